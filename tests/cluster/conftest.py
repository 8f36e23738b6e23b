"""The single-node SLURM cluster ``.ci/slurm.sh start`` runs on this machine (``.ci/run`` starts
it where it runs as root). Tests marked ``cluster`` skip, saying why, where it is absent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.bench.invoke import mirror_with
from tests.conftest import REPO

#: every point a tiny run: bert-tiny-scratch on a few RTE rows, one thread, small SLURM jobs
TINY = ["model=bert-tiny-scratch", "task=glue/rte", "task.max_eval_samples=8",
        "task.batch_size=8", "trainer.threads=1", "trainer.enable_progress_bar=false"]
#: hydra/launcher=slurm's one-GPU defaults made a job this cluster can run
JOB = ["hydra/launcher=slurm", "hydra.launcher.partition=debug",
       "hydra.launcher.gpus_per_task=null", "hydra.launcher.cpus_per_task=1",
       "hydra.launcher.mem_gb=2", "hydra.launcher.timeout_min=10",
       "hydra.launcher.array_parallelism=2"]


def slurm_absent() -> str | None:
    """Why there is no cluster to submit to, or None."""
    if shutil.which("sbatch") is None:
        return "no SLURM on this machine (sbatch not on PATH): run `.ci/slurm.sh start` as root"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if ping.returncode != 0 or "DOWN" in ping.stdout:
        return f"SLURM's controller does not answer ({' '.join(ping.stdout.split())[:200]})"
    idle = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True).stdout
    if not {"idle", "mix", "alloc"} & set(idle.split()):
        return f"no SLURM node is up (sinfo: {idle.split()})"
    return None


@pytest.fixture(scope="session")
def cluster() -> None:
    reason = slurm_absent()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def submit_env(tmp_path) -> dict[str, str]:
    """What a job inherits from the submitting shell (sbatch exports it): the data mirror, a
    cache of its own, offline."""
    return {**os.environ, "PLMBENCH_DATA": str(mirror_with("glue")), "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "PLMBENCH_CACHE": str(tmp_path / "plmbench-cache"),
            "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "PYTHONPATH": str(REPO)}


class Sweep:
    """``plmbench run -m ARGS`` as the user's shell on the login node runs it: a process of its
    own, which submits the job array (named ``name``, this test's) and waits for it. Whatever a
    test leaves running is cancelled when it ends (``sweeps``)."""

    def __init__(self, env: dict, name: str) -> None:
        self.env, self.name = env, name
        self.processes: list[subprocess.Popen] = []

    def start(self, *args: str) -> subprocess.Popen:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.cli", "run", "-m", *args,
             f"hydra.launcher.name={self.name}"], cwd=REPO, env=self.env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.processes.append(process)
        return process

    def run(self, *args: str) -> tuple[int, str, str]:
        process = self.start(*args)
        out, err = process.communicate(timeout=600)
        return process.returncode, out, err

    def task(self, index: int) -> str | None:
        """The running array task ``<job>_<index>`` of this sweep's point ``index``."""
        for job_id, name, state in squeue("%i", "%j", "%T"):
            if name == self.name and job_id.endswith(f"_{index}") and state == "RUNNING":
                return job_id
        return None

    def close(self) -> None:
        subprocess.run(["scancel", "--name", self.name], check=False)
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.communicate()


@pytest.fixture
def sweeps(cluster, submit_env, tmp_path) -> Sweep:
    sweep = Sweep(submit_env, f"plmbench-{tmp_path.name}")
    yield sweep
    sweep.close()


def squeue(*fields: str) -> list[list[str]]:
    """This user's jobs, one row of ``fields`` (squeue's %-letters) each."""
    listed = subprocess.run(["squeue", "-h", "-r", "-o", "|".join(fields)], capture_output=True,
                            text=True, check=True).stdout
    return [line.split("|") for line in listed.splitlines()]


def wait_for(condition, timeout: float, what: str, process: subprocess.Popen | None = None):
    """``condition()``'s first true value within ``timeout`` seconds; fails at once, with its
    output, where ``process`` (the sweep) ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the sweep ended ({process.returncode}) before {what}: "
                                 f"{process.communicate()[1][-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"waited {timeout:.0f} s for {what}")
