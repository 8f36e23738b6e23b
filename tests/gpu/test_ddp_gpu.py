"""``trainer=ddp`` over the node's GPUs (two or more): a pretraining run with packed rows and a
fine-tuning run with length-grouped batches each end ok, with the ranks' throughput summed."""

import pytest
import torch

from tests.bench.invoke import plmbench, read, reset_cli_state, run_dir

TINY = ["task.max_train_samples=200", "task.max_eval_samples=32", "trainer.max_steps=20",
        "trainer=ddp"]


@pytest.fixture(autouse=True)
def clean_cli_state():
    reset_cli_state()
    yield
    reset_cli_state()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two or more GPUs")
@pytest.mark.parametrize("task", ["pretrain/wikipedia", "glue/sst2"])
def test_ddp_runs_on_every_gpu(task, mirror, monkeypatch, tmp_path):
    monkeypatch.setenv("PLMBENCH_CACHE", str(tmp_path / "cache"))
    overrides = ["model=bert-mini", f"task={task}", *TINY]
    if task.startswith("pretrain"):
        overrides.append("task.eval_documents=20")
    result = plmbench("run", *overrides, f"results_dir={tmp_path}")
    assert result.rc == 0, result.err
    record = read(run_dir(tmp_path, task, *overrides))
    assert record["status"] == "ok" and record["hardware"]["devices"] == -1
    assert record["throughput"]["train_samples"] > 20  # more than one rank's batches
