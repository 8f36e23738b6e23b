"""``hydra/launcher=slurm`` where there is no SLURM (part of ``make test``, no cluster needed):
one line naming the launcher and the fix, exit 2, nothing written; submitit would end in a
25-line traceback ("Could not detect srun")."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.bench.invoke import plmbench


def test_a_slurm_sweep_without_slurm_is_one_line(tmp_path, monkeypatch, mirror):
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # python, no SLURM commands
    results = tmp_path / "results"
    result = plmbench("run", "-m", "hydra/launcher=slurm", "model=bert-tiny-scratch",
                      "task=glue/rte", "seed=0,1", f"results_dir={results}")
    assert result.rc == 2 and result.err_lines == [
        "error: hydra/launcher=slurm: this machine has no SLURM (sbatch, srun, squeue, scontrol "
        "not on PATH); submit from a cluster's login node, or leave out hydra/launcher=slurm to "
        "run the sweep here (hydra/launcher=local: parallel local jobs)"], result.err
    assert not results.exists()


def test_a_slurm_sweep_whose_controller_is_down_is_one_line(tmp_path, monkeypatch, mirror):
    bin_ = tmp_path / "bin"  # SLURM's commands, and a controller that does not answer
    bin_.mkdir()
    for command in ("sbatch", "srun", "squeue"):
        (bin_ / command).write_text("#!/bin/sh\nexit 1\n")
    (bin_ / "scontrol").write_text("#!/bin/sh\necho 'Slurmctld(primary) at head is DOWN'\n")
    for path in bin_.iterdir():
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{Path(sys.executable).parent}")
    results = tmp_path / "results"
    result = plmbench("run", "-m", "hydra/launcher=slurm", "model=bert-tiny-scratch",
                      "task=glue/rte", f"results_dir={results}")
    assert result.rc == 2 and result.err_lines == [
        "error: hydra/launcher=slurm: SLURM's controller does not answer (scontrol ping: "
        "Slurmctld(primary) at head is DOWN); start slurmctld or submit from a node where "
        "`sinfo` works"], result.err
    assert not results.exists()
