"""Sweeps submitted to a real SLURM cluster (``.ci/slurm.sh``: one node on this machine) through
``hydra/launcher=slurm`` (hydra-submitit-launcher), as a user on a login node submits them:

- a sweep is one job array, every point a task of it; every point leaves its record and the
  board lists them;
- a task cancelled with ``scancel`` while it trains leaves a record that says interrupted; the
  same command again runs only that point, resuming it from its last checkpoint;
- a task requeued with ``scontrol requeue`` while it trains runs again and resumes from its last
  checkpoint, within the same sweep command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.invoke import records_under
from tests.cluster.conftest import JOB, TINY, wait_for
from tests.conftest import REPO

pytestmark = pytest.mark.cluster

#: a point that trains long enough to be stopped part-way (one epoch of 60 steps), with a
#: checkpoint every 10 steps
LONG = ["task.max_train_samples=480", "task.max_epochs=1", "checkpoint.every_n_steps=10"]


def records(results: Path) -> dict[str, dict]:
    """The records under ``results`` by their seed."""
    return {f"seed{r['seed']}": r for r in (json.loads(p.read_text())
                                            for p in records_under(results))}


def checkpoint_of(results: Path, seed: int) -> Path | None:
    found = sorted(results.glob(f"**/seed{seed}/checkpoints/*/last.ckpt"))
    return found[0] if found else None


def test_a_sweep_is_one_job_array_and_every_point_leaves_its_record(sweeps, submit_env,
                                                                    tmp_path):
    results = tmp_path / "results"
    rc, out, err = sweeps.run(*JOB, *TINY, "seed=0,1", "task.max_train_samples=16",
                              "trainer.max_steps=2", f"results_dir={results}")
    assert rc == 0, err
    found = records(results)
    assert sorted(found) == ["seed0", "seed1"] and all(
        r["status"] == "ok" for r in found.values()), found
    # both ran as tasks of one array: submitit's folder names each <array job>_<task>
    logs = sorted(p.name for p in (results / ".submitit").glob("*/*_log.out"))
    assert len(logs) == 2 and len({name.split("_")[0] for name in logs}) == 1, logs
    board = subprocess.run([sys.executable, "-m", "bench.cli", "leaderboard", str(results),
                            "--no-baselines", "--format", "csv"], capture_output=True, text=True,
                           env=submit_env, cwd=REPO)
    assert board.returncode == 0, board.stderr
    (row,) = [line for line in board.stdout.splitlines() if "bert-tiny-scratch" in line]
    assert ",2," in row, board.stdout  # the row aggregates both seeds


def test_a_cancelled_task_says_interrupted_and_the_rerun_completes_only_it(sweeps, tmp_path):
    results = tmp_path / "results"
    args = [*JOB, *TINY, *LONG, "seed=0,1", f"results_dir={results}"]
    process = sweeps.start(*args)
    wait_for(lambda: checkpoint_of(results, 1), 300, "a checkpoint of seed 1", process)
    task = wait_for(lambda: sweeps.task(1), 60, "seed 1's task running", process)
    subprocess.run(["scancel", task], check=True)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 1 and err.splitlines()[-1].startswith(
        f"error: a job of the sweep ended without a result: Job {task} "), err
    cancelled = records(results)["seed1"]
    assert cancelled["status"] == "failed" and cancelled["failure_kind"] == "interrupted", cancelled
    assert "SIGTERM" in cancelled["error"]
    ok = records(results)["seed0"]
    assert ok["status"] == "ok"

    rc, out, err = sweeps.run(*args)
    assert rc == 0, err
    again = records(results)
    assert again["seed0"]["run_id"] == ok["run_id"]  # skipped: its record said ok
    assert again["seed1"]["status"] == "ok" and again["seed1"]["resumed_from"], again["seed1"]


def test_a_requeued_task_resumes_from_its_last_checkpoint(sweeps, tmp_path):
    results = tmp_path / "results"
    process = sweeps.start(*JOB, *TINY, *LONG, "seed=0,1", f"results_dir={results}")
    wait_for(lambda: checkpoint_of(results, 0), 300, "a checkpoint of seed 0", process)
    task = wait_for(lambda: sweeps.task(0), 60, "seed 0's task running", process)
    subprocess.run(["scontrol", "requeue", task], check=True)
    # SLURM holds a requeued batch job for 120 s (its BeginTime); let it start at once
    wait_for(lambda: subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"],
                                    capture_output=True).returncode == 0, 30, "the release")
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    found = records(results)
    assert found["seed0"]["status"] == "ok" and found["seed0"]["resumed_from"], found["seed0"]
    assert found["seed1"]["status"] == "ok" and not found["seed1"]["resumed_from"]
