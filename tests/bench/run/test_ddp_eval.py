"""Evaluations whose outputs are computed per example (span logits, generated text) give under
DDP exactly what one process gives: DDP's sampler hands each process a share of the examples
(padded with repeats), and the shares are gathered before scoring and writing.

Both runs evaluate the same untrained net (``trainer.max_steps=0``, the same seed), so their
metrics and prediction files must be equal byte for byte. The DDP run goes through Lightning's
launcher, which re-runs the installed ``plmbench`` for rank 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.invoke import plmbench, read, run_dir

DDP = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.precision=32-true"]
CASES = {
    # 41 questions: an odd number of windows, so the sampler pads one process's share
    "squad": (
        "bert-tiny-scratch",
        [
            "task=squad/v1",
            "task.max_eval_samples=41",
            "task.max_length=128",
            "task.doc_stride=32",
            "task.max_train_samples=8",
        ],
    ),
    # at least 4 generated tokens each, so the untrained net writes text ROUGE can score
    "summarization": (
        "bart-tiny-scratch",
        [
            "task=summarization/aeslc",
            "task.max_eval_samples=9",
            "task.max_train_samples=8",
            "task.generation.min_new_tokens=4",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ddp_evaluation_equals_one_process(case, mirror, tmp_path):
    model, task = CASES[case]
    common = [f"model={model}", *task, "trainer.max_steps=0", "trainer.enable_progress_bar=false"]
    single = plmbench("run", *common, f"results_dir={tmp_path}")
    assert single.rc == 0, single.err
    command = [str(Path(sys.executable).with_name("plmbench")), "run", *common, *DDP,
               f"results_dir={tmp_path}"]
    env = {**os.environ, "PLMBENCH_DATA": str(mirror), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    name = task[0].partition("=")[2]
    one, two = (run_dir(tmp_path, name, *common[1:], *extra, label=model) for extra in ([], DDP))
    first, second = read(one), read(two)
    assert second["hardware"]["devices"] == 2
    assert first["metrics"] == second["metrics"]
    assert first["predictions"] == second["predictions"] and first["predictions"]
    for path in first["predictions"].values():
        assert (one / path).read_bytes() == (two / path).read_bytes()
