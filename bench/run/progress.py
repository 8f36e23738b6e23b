"""The training progress bar with the epochs a run will really take.

Lightning's rich bar titles an epoch "Epoch <i>/<max_epochs - 1>"; a run bounded by
``trainer.max_steps`` leaves ``max_epochs`` unbounded (-1, ``bench/run/execute.steps_decide``),
so it read "Epoch 0/-2". ``EpochBar`` counts epochs from 1 and shows how many the run takes: its
``max_epochs``, or with ``max_steps`` the epochs those steps span (ceil(max_steps / optimizer
steps per epoch)); nothing after the slash where neither bounds it."""

from __future__ import annotations

import math

from lightning.pytorch.callbacks import RichProgressBar


def planned_epochs(trainer) -> int | None:
    """The epochs the run takes: ``max_epochs``, or the epochs ``max_steps`` optimizer steps
    span; None where neither is known (an unbounded run, a loader of unknown length)."""
    if trainer.max_epochs not in (None, -1):
        return int(trainer.max_epochs)
    batches = trainer.num_training_batches
    if not (trainer.max_steps or 0) > 0 or not isinstance(batches, int) or batches <= 0:
        return None
    per_epoch = math.ceil(batches / max(1, trainer.accumulate_grad_batches))
    return math.ceil(trainer.max_steps / per_epoch)


def epoch_text(current: int, planned: int | None) -> str:
    """"Epoch 2/3" (1-based), "Epoch 2" where the count is unknown."""
    return f"Epoch {current + 1}" + (f"/{planned}" if planned else "")


class EpochBar(RichProgressBar):
    """Lightning's rich bar, its epoch title from ``planned_epochs`` (module docstring)."""

    def _get_train_description(self, current_epoch: int) -> str:
        text = epoch_text(current_epoch, planned_epochs(self.trainer))
        width = len(self.validation_description)
        return f"{text:{width}}" if len(text) < width else text
