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
from collections.abc import Iterator, Mapping, Sequence

import torch

from datamodules.batching import Batching
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


def planned_world_size(trainer: Mapping) -> int | None:
    """The processes a run's trainer will run on, read from its config before anything starts:
    the launcher's WORLD_SIZE where torchrun or SLURM started the ranks, else ``devices`` (a
    count, a list of ids; -1 or "auto": every visible GPU) x ``num_nodes``; None where only
    Lightning can tell (all the cores of a CPU)."""
    if os.environ.get("LOCAL_RANK") is not None and os.environ.get("WORLD_SIZE"):
        return int(os.environ["WORLD_SIZE"])
    devices, accelerator = trainer.get("devices", 1), str(trainer.get("accelerator", "auto"))
    if isinstance(devices, str) and devices.strip().isdigit():
        devices = int(devices)
    if devices in (-1, "auto", "-1"):
        if accelerator in ("gpu", "cuda") and torch.cuda.is_available():
            devices = torch.cuda.device_count()
        elif devices == "auto" and accelerator == "cpu":
            devices = 1
        else:
            return None
    count = len(devices) if isinstance(devices, Sequence) and not isinstance(devices, str) \
        else devices
    return count * int(trainer.get("num_nodes", 1)) if isinstance(count, int) else None


def check_batching(task: Mapping, trainer: Mapping) -> None:
    """One line, before anything runs or is written, where the task's global batch
    (``task.batch_size``) does not divide over the planned processes and
    ``trainer.accumulate_grad_batches`` (``datamodules/batching.py``); a task that does not
    train has no training batch to split."""
    world = planned_world_size(trainer)
    if task.get("splits", {}).get("train") and task.get("batch_size") and world:
        Batching(int(task["batch_size"]), world, int(trainer.get("accumulate_grad_batches", 1)))


def run_batching(task: Mapping, trainer) -> dict:
    """The record's ``batching`` of a run of ``task`` by the Lightning ``trainer``: its
    processes; where it trains, how the task's global batch (``task.batch_size``) splits over them
    and the accumulated batches (one line, before training, where it does not divide:
    ``datamodules/batching.py``)."""
    world = trainer.num_nodes * trainer.num_devices
    if not task["splits"].get("train") or not task.get("batch_size"):
        return {"world_size": world}
    return Batching(int(task["batch_size"]), world, trainer.accumulate_grad_batches).as_record()


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
