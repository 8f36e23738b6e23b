"""Where a run's processes run: the accelerator its trainer asks for, and the DDP ranks that
Lightning starts for it.

Lightning's DDP launcher (``trainer=ddp`` on one node, when no torchrun or SLURM task started the
ranks) starts ranks 1..N-1 by running this process's command line (``sys.argv``) again, with
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment, and leaves those variables
and the process group behind when the run ends. A second run in the same process (the next point
of a sweep, the next entry of a study) would take itself for a rank of the first run's group and
wait for ranks that have exited, or that run the whole sweep again. ``own_processes`` gives every
run its own ranks: while it runs, the command line they re-run is that one run's overrides, and
when it ends the group is destroyed and the variables restored, so the next run starts its own.
Ranks started by someone else (torchrun sets LOCAL_RANK) keep what they were given.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping

import torch

from datamodules.errors import PlmbenchError

#: what Lightning's launcher sets in the environment of the process that starts the ranks
LAUNCHER_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")


def check_accelerator(trainer: Mapping) -> None:
    """One line, before anything runs or is written, where the trainer asks for GPUs that this
    machine does not have (Lightning would end in a MisconfigurationException traceback)."""
    accelerator = str(trainer.get("accelerator", "auto"))
    if accelerator not in ("gpu", "cuda"):
        return
    mps = accelerator == "gpu" and torch.backends.mps.is_available()  # Apple's "gpu"
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not available and not mps:
        build = "a CPU-only build" if torch.version.cuda is None else "no visible CUDA device"
        raise PlmbenchError(
            f"trainer.accelerator={accelerator}, but this machine has no GPU for torch "
            f"{torch.__version__} ({build}): run with trainer=cpu, or keep the preset's other "
            "settings with trainer.accelerator=cpu")
    devices = trainer.get("devices", 1)
    if not mps and isinstance(devices, int) and devices > available:
        raise PlmbenchError(
            f"trainer.devices={devices}, but this machine has {available} CUDA device(s): "
            f"set trainer.devices={available} (or -1 for all of them)")


@contextlib.contextmanager
def own_processes(command: list[str]) -> Iterator[None]:
    """While one run runs, its DDP ranks re-run ``command`` (``[script, *overrides]``: that run
    alone); afterwards, no trace of them in this process (see the module's docstring)."""
    argv, before = sys.argv, {name: os.environ.get(name) for name in LAUNCHER_ENV}
    sys.argv = list(command)
    try:
        yield
    finally:
        sys.argv = argv
        if before["LOCAL_RANK"] is None:  # no rank of a launch by someone else
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
