"""The command line answers before anything heavy loads (issue 30): help, the boards over run
records, and the config errors a check finds from files alone never import torch, Lightning,
transformers, faiss or datasets (``bench/cli.py`` imports what a command needs when it runs).

Each command runs in a fresh interpreter (``sys.modules`` of this test process holds everything
the suite imported), which reports the heavy modules it ended with. The CPU seconds the same
commands take are a benchmark (``-m benchmark``), recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from bench.record import write_record
from tests.bench.boards.test_leaderboard import TASKS, record

ROOT = Path(__file__).resolve().parents[2]
#: what no help, board or config error needs
HEAVY = ("torch", "lightning", "transformers", "faiss", "datasets")
#: a GLUE task's family, as a run's record names it (a board never builds it from records that
#: keep their baselines)
FAMILY = {"_target_": "lit_models.families.classify.Classification"}
#: the first line of docs/benchmarks.md's start-up table: the CPU each command may take
CPU_BUDGET_S = 1.5

PROBE = """
import json, sys
from bench import cli
try:
    rc = cli.main(json.loads(sys.argv[1]))
except SystemExit as exit_:
    rc = exit_.code
heavy = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
print(json.dumps({"rc": rc, "heavy": heavy}), file=sys.stderr)
"""


def probe(args: list[str], env: dict | None = None) -> tuple[dict, str]:
    """``plmbench ARGS`` in a fresh interpreter: ({rc, heavy modules it imported}, its stderr)."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(HEAVY)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=300)
    *lines, last = done.stderr.strip().splitlines()
    return json.loads(last), "\n".join(lines)


def write_board(root: Path, n: int = 100) -> Path:
    """``n`` finished run records of GLUE tasks (models x tasks x seeds), as runs leave them:
    each names its task's family and keeps the task's baseline (``bench/boards/baselines.py``)."""
    values = {"glue/mrpc": {"validation": {"f1": 0.8, "accuracy": 0.75}},
              "glue/mnli": {"validation_matched": {"accuracy": 0.7},
                            "validation_mismatched": {"accuracy": 0.71}},
              "glue/rte": {"validation": {"accuracy": 0.6}}}
    for i in range(n):
        model, task, seed = f"model-{i // 9}", list(TASKS)[i % 3], i % 9 // 3
        run = record(model, task, seed, values[task],
                     baselines={"rows": [{"name": None, "metrics": values[task]}], "gold": None})
        run["config"]["task"] = {**run["config"]["task"], "family": FAMILY}
        write_record(root / task / model / f"seed{seed}", run)
    return root


@pytest.mark.parametrize("args", [["--help"], ["leaderboard", "--help"], ["perf", "--help"],
                                  ["significance", "--help"], ["submit", "--help"]])
def test_help_imports_nothing_heavy(args):
    result, _ = probe(args)
    assert result == {"rc": 0, "heavy": []}


@pytest.mark.parametrize("fmt", ["md", "html", "csv"])
def test_board_over_records_imports_nothing_heavy(tmp_path, fmt):
    result, err = probe(["leaderboard", str(write_board(tmp_path / "results")), "--format", fmt,
                         "--out", str(tmp_path / f"board.{fmt}")])
    assert result == {"rc": 0, "heavy": []}, err
    text = (tmp_path / f"board.{fmt}").read_text()
    assert "model-10" in text and "baseline (no training)" in text  # every record was read


def test_missing_checkpoint_files_found_before_anything_loads(tmp_path):
    """``init_from=hf:<dir>`` without config.json: the config check's one line, no run dir."""
    empty = tmp_path / "not_a_checkpoint"
    empty.mkdir()
    result, err = probe(["run", "model=bert-tiny-scratch", "task=glue/rte", f"init_from=hf:{empty}",
                         f"results_dir={tmp_path / 'results'}"])
    assert result == {"rc": 2, "heavy": []}
    assert err.splitlines() == [f"error: {empty} is not a Hugging Face checkpoint: it lacks "
                                "config.json, model.safetensors or "
                                "model.safetensors.index.json or pytorch_model.bin or "
                                "pytorch_model.bin.index.json, "
                                "tokenizer.json or vocab.txt or vocab.json or spiece.model or "
                                "spm.model; point init_from at a directory written by "
                                "save_pretrained or `to_hf`"]
    assert not (tmp_path / "results").exists()


def test_missing_data_found_before_lightning_loads(tmp_path):
    """A task whose data the mirror lacks (and no hub): one line before Lightning or torch load
    (finding it reads the mirror's listing with ``datamodules.sources``, which imports datasets)."""
    result, err = probe(["run", "model=bert-tiny-scratch", "task=glue/rte",
                         f"results_dir={tmp_path / 'results'}"],
                        env={"PLMBENCH_DATA": str(tmp_path / "empty_mirror"),
                             "HF_HUB_OFFLINE": "1"})
    assert result == {"rc": 2, "heavy": ["datasets"]}
    assert err.startswith("error: glue/rte split train not found: tried "
                          f"{tmp_path / 'empty_mirror' / 'glue' / 'rte' / 'train.parquet'}")
    assert len(err.splitlines()) == 1 and "PLMBENCH_DATA" in err
    assert not (tmp_path / "results").exists()


def cpu_seconds(args: list[str]) -> float:
    """User + system CPU seconds of ``python -m bench.cli ARGS`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=ROOT, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@pytest.mark.benchmark
def test_start_up_cpu(tmp_path):
    """Each command's median CPU over 5 runs is under ``CPU_BUDGET_S`` (issue 30)."""
    board = str(write_board(tmp_path / "results"))
    commands = {"--help": ["--help"], "leaderboard --help": ["leaderboard", "--help"],
                "leaderboard (100 records)": ["leaderboard", board]}
    for name, args in commands.items():
        times = sorted(cpu_seconds(args) for _ in range(5))
        print(f"{name}: CPU s {', '.join(f'{t:.2f}' for t in times)}; load {os.getloadavg()}")
        assert times[2] < CPU_BUDGET_S, (name, times)
