"""Runs that survive crashes and repeat themselves (issue #10: fault tolerance, reproducibility):
a run killed with SIGKILL part-way and resumed ends with the metrics of an uninterrupted run; the
same run twice gives identical metrics; a full disk leaves no partial record. (A diverging loss:
tests/bench/test_bad_input.py.)"""

from __future__ import annotations

import csv
import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench import record as records
from bench.run.checkpoints import CHECKPOINT_DIR, LAST
from datamodules import files
from datamodules.errors import PlmbenchError
from tests.bench.invoke import plmbench, read, records_under
from tests.conftest import REPO

# STS-B's Pearson correlation moves with any change of the weights, unlike a 16-example accuracy.
# 24 examples in batches of 8: 3 steps an epoch, 3 epochs; a checkpoint every 2 steps.
RUN = ["run", "model=bert-tiny-scratch", "task=glue/stsb", "task.max_train_samples=24",
       "task.batch_size=8", "task.max_eval_samples=32", "trainer.max_steps=9",
       "trainer.enable_progress_bar=false", "checkpoint.every_n_steps=2"]
#: RUN for another step budget (a key is given once on a command line)
WITHOUT_STEPS = [arg for arg in RUN if not arg.startswith("trainer.max_steps=")]


@pytest.fixture
def env(mirror, tmp_path) -> Path:
    return tmp_path


def only_record(root: Path) -> dict:
    (path,) = records_under(root)
    return read(path.parent)


def test_a_run_killed_part_way_resumes_to_the_metrics_of_an_uninterrupted_run(env):
    whole = plmbench(*RUN, f"results_dir={env / 'whole'}")
    assert whole.rc == 0, whole.err
    expected = only_record(env / "whole")
    args = [*RUN, f"results_dir={env / 'killed'}"]
    # step 5 is mid-epoch (epoch 2, its second batch); the last checkpoint is step 4's
    # one torch thread, as this test process has (conftest): float sums then add up alike
    killed = subprocess.run([sys.executable, "-m", "tests.bench.killed_run", "5", *args],
                            cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert records_under(env / "killed") == []
    (last,) = (env / "killed").rglob(LAST)
    assert last.parent.parent.name == CHECKPOINT_DIR
    resumed = plmbench(*args)  # resume=auto is the default
    assert resumed.rc == 0, resumed.err
    record = only_record(env / "killed")
    assert record["resumed_from"] == str(last)
    assert record["steps"] == expected["steps"] == 9
    assert record["metrics"] == expected["metrics"]
    assert record["throughput"]["train_samples"] == expected["throughput"]["train_samples"]
    assert not last.exists()  # a finished run's resume state is removed (checkpoint.keep=false)
    # the resumed run's metrics.csv keeps the rows logged before the kill: the same steps and
    # keys as the uninterrupted run's, each epoch's validation loss equal up to float noise
    def rows(root: Path) -> list[dict]:
        (file,) = root.rglob("metrics.csv")
        with file.open(newline="") as handle:
            return list(csv.DictReader(handle))

    before, after = rows(env / "whole"), rows(env / "killed")
    assert [(r["step"], sorted(k for k, v in r.items() if v)) for r in after] == [
        (r["step"], sorted(k for k, v in r.items() if v)) for r in before]
    losses = [(float(a["validation/loss"]), float(b["validation/loss"])) for a, b in zip(
        before, after, strict=True)]
    assert len(losses) >= 3 and all(a == pytest.approx(b, rel=1e-4) for a, b in losses)
    # its lock is gone, and run.log holds both attempts: the kill left no traceback, the
    # resumption says where it resumed from
    run_dir = last.parent.parent.parent
    assert not (run_dir / ".lock").exists()
    log = (run_dir / "run.log").read_text()
    assert "stale lock" in resumed.out + resumed.err + log and f"from {last}" in log


def test_the_same_run_twice_gives_identical_metrics(env):
    args = [*WITHOUT_STEPS, "trainer.max_steps=4", "trainer.deterministic=true"]
    for name in ("a", "b"):
        assert plmbench(*args, f"results_dir={env / name}").rc == 0
    a, b = only_record(env / "a"), only_record(env / "b")
    assert a["metrics"] == b["metrics"] and a["metrics"]["validation"]["pearson"] != 0
    assert a["config_hash"] == b["config_hash"] and a["data"] == b["data"]
    assert a["tokenizer"] == b["tokenizer"] and a["versions"]["git_dirty"] in (True, False, None)
    # the seed matters: another seed is another run
    assert plmbench(*args, "seed=1", f"results_dir={env / 'c'}").rc == 0
    assert only_record(env / "c")["metrics"] != a["metrics"]


def test_a_full_disk_is_one_line_and_leaves_no_partial_record(tmp_path, monkeypatch):
    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    records.write_record(tmp_path, {"status": "ok", "seed": 0})
    monkeypatch.setattr(files.os, "fsync", disk_full)
    with pytest.raises(PlmbenchError, match="No space left on device.*results_dir"):
        records.write_record(tmp_path, {"status": "ok", "seed": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
    assert records.read_record(tmp_path)["seed"] == 0  # the previous record, untouched


@pytest.mark.parametrize(("signal_name", "status", "said"), [
    ("INT", 130, "Ctrl-C (SIGINT)"),
    ("TERM", 143, "SIGTERM (scancel, scontrol requeue, a preemption or kill)"),  # schedulers
])
def test_a_stopping_signal_ends_a_run_with_an_interrupted_record_in_one_line_and_it_resumes(
        env, signal_name, status, said):
    """SIGINT (Ctrl-C) or SIGTERM mid-run: Lightning's graceful shutdown, then plmbench's one
    line and exit status 128 + the signal; the record says failure_kind interrupted (not crash),
    the checkpoint stays, and the same command again resumes from it."""
    args = [*RUN, f"results_dir={env}"]
    stopped = subprocess.run([sys.executable, "-m", "tests.bench.killed_run",
                              f"5:{signal_name}", *args],
                             cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                             capture_output=True, text=True, timeout=300)
    assert stopped.returncode == status, stopped.stderr[-2000:]
    lines = [line for line in stopped.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and lines[-1].endswith(
        f"interrupted by {said}; run the same command again to resume it from its last "
        "checkpoint (its record says failure_kind: interrupted)"), lines[-3:]
    assert "attempting graceful shutdown" in stopped.stdout + stopped.stderr
    assert "Traceback" not in stopped.stdout + stopped.stderr
    record = only_record(env)
    assert (record["status"], record["failure_kind"]) == ("failed", "interrupted")
    (last,) = env.rglob(LAST)
    assert lines[-1] == f"error: {last.parent.parent.parent}: {record['error']} (its record " \
                        "says failure_kind: interrupted)"
    resumed = plmbench(*args)
    assert resumed.rc == 0, resumed.err
    record = only_record(env)
    assert record["status"] == "ok" and record["resumed_from"] == str(last)
    assert record["steps"] == 9


def test_a_corrupt_last_checkpoint_is_one_line_naming_it_and_resume_never_starts_over(env):
    """A last.ckpt truncated (a kill while it was saved): every rerun would fail on torch's
    reader error; plmbench names the file and the way out, which works."""
    args = [*WITHOUT_STEPS, "trainer.max_steps=2", "checkpoint.keep=true", f"results_dir={env}"]
    assert plmbench(*args).rc == 0
    (last,) = env.rglob(LAST)
    run_dir = last.parent.parent.parent
    (run_dir / "record.json").unlink()  # as a run killed after its checkpoint left it
    last.write_bytes(last.read_bytes()[:1000])
    again = plmbench(*args)
    assert again.rc == 2
    (line,) = [line for line in again.err.splitlines() if line.startswith("error:")]
    assert f"cannot resume from {last} (" in line and "killed while saving" in line
    assert line.endswith("run the same command with resume=never to discard it and start the run "
                         f"over, or remove the file (rm '{last}')")
    assert "Traceback" not in again.err
    assert only_record(env)["failure_kind"] == "input"
    fresh = plmbench(*args, "resume=never")
    assert fresh.rc == 0, fresh.err
    record = only_record(env)
    assert record["status"] == "ok" and record["resumed_from"] is None


def test_ctrl_c_before_any_run_starts_is_one_line_and_status_130(monkeypatch):
    from bench import cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_run", interrupted)
    result = plmbench("run", "seed=0")
    assert result.rc == 130 and result.err_lines == ["error: interrupted by Ctrl-C (SIGINT)"]
