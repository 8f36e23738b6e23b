"""Runs that survive crashes: Lightning's ModelCheckpoint every ``checkpoint.every_n_steps``
optimizer steps and at every epoch end, both keeping ``last.ckpt``, and ``resume=auto``, which
continues a run from it. A checkpoint holds what Lightning restores (weights, optimizer,
scheduler, loop progress), the DataModule's place in its epoch (``datamodules/sampling.py``), the
throughput counters, and the Python, NumPy and torch RNG states (``RngState``), so a resumed run
ends with the metrics of an uninterrupted one.

Checkpoints live in ``<run dir>/checkpoints/<config hash>/``: never in ``<run dir>/model/`` (what
``init_from=ckpt:<run dir>`` reads), and never resumed by another configuration. A non-finite
training loss stops the run (``FiniteLoss``) before a checkpoint could save it. A ``last.ckpt``
that does not read (truncated by a kill while it was saved) stops the run in one line naming it
and ``resume=never``, which discards it (``check_resumable``).
"""

from __future__ import annotations

import csv
import math
import random
import shutil
from collections.abc import Mapping
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from datamodules.errors import PlmbenchError

CHECKPOINT_DIR = "checkpoints"
LAST = "last.ckpt"
RESUME_MODES = ("auto", "never")


def checkpoint_dir(run_dir: Path, config_hash: str) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / config_hash


def checkpoint_callbacks(cfg: Mapping, directory: Path) -> list[ModelCheckpoint]:
    """``last.ckpt`` at every epoch end and, with ``every_n_steps`` > 0, every N steps (Lightning
    takes one trigger per callback, so these are two callbacks writing the same file)."""
    common = {"dirpath": directory, "save_top_k": 0, "save_last": True,
              "enable_version_counter": False}
    callbacks = [ModelCheckpoint(**common, every_n_epochs=1, save_on_train_epoch_end=True)]
    if cfg["every_n_steps"]:
        callbacks.append(ModelCheckpoint(**common, every_n_train_steps=cfg["every_n_steps"]))
    return callbacks


def resume_from(mode: str, directory: Path) -> Path | None:
    """The checkpoint to resume from: ``last.ckpt`` with ``resume=auto`` when there is one."""
    if mode not in RESUME_MODES:
        raise PlmbenchError(f"resume={mode!r} is unknown: use auto or never")
    last = directory / LAST
    if mode == "auto" and last.is_file():
        check_resumable(last)
        return last
    if directory.exists():  # resume=never: start over, with no stale last.ckpt left behind
        shutil.rmtree(directory)
    return None


def check_resumable(checkpoint: Path) -> None:
    """``checkpoint`` reads as a Lightning checkpoint (a run killed while it saved, or a damaged
    disk, leaves a truncated file, which every resumption would fail on with torch's reader
    error); else one line naming it and the way out. Its tensors are memory-mapped, not read."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=False, mmap=True)
        missing = [f"it lacks {key}" for key in ("global_step", "state_dict") if key not in state]
    except Exception as err:  # noqa: BLE001 - torch's reader raises several kinds
        reason = " ".join(str(err).split("\n")[0].split())[:200]
        missing = [f"{type(err).__name__}: {reason}"]
    if missing:
        raise PlmbenchError(
            f"cannot resume from {checkpoint} ({'; '.join(missing)}): the run that wrote it was "
            "killed while saving, or the file is damaged; run the same command with resume=never "
            f"to discard it and start the run over, or remove the file (rm '{checkpoint}')")


def rows_before(metrics_file: Path, checkpoint: Path) -> list[dict[str, str]]:
    """The rows of a run's ``metrics.csv`` logged up to ``checkpoint``'s step: what a resumed
    run keeps (the rows after it are logged again as the run repeats those steps)."""
    if not metrics_file.is_file():
        return []
    step = torch.load(checkpoint, map_location="cpu", weights_only=False, mmap=True)["global_step"]
    with metrics_file.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [row for row in rows if row.get("step") and float(row["step"]) <= step]


def discard(directory: Path) -> None:
    """Remove a finished run's checkpoints (``checkpoint.keep=false``)."""
    shutil.rmtree(directory, ignore_errors=True)
    parent = directory.parent
    if parent.name == CHECKPOINT_DIR and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()


class RngState(L.Callback):
    """Python, NumPy, torch (and CUDA) RNG states in every checkpoint, set again when the resumed
    run starts training (after the sanity check, which draws nothing, so the order matches)."""

    def __init__(self) -> None:
        self._loaded: dict | None = None

    def state_dict(self) -> dict:
        return {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self._loaded = state_dict

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._loaded is None:
            return
        random.setstate(self._loaded["python"])
        np.random.set_state(self._loaded["numpy"])
        torch.set_rng_state(self._loaded["torch"])
        if self._loaded["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(self._loaded["cuda"])
        self._loaded = None


class FiniteLoss(L.Callback):
    """Stop the run at the first NaN or infinite training loss, with one line saying so."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, Mapping) else outputs
        value = float(loss.detach()) if isinstance(loss, torch.Tensor) else None
        if value is not None and not math.isfinite(value):
            raise PlmbenchError(
                f"training loss is {value} at step {trainer.global_step}: the run diverged; "
                "lower optim.lr or keep trainer.gradient_clip_val", kind="configuration"
            )
