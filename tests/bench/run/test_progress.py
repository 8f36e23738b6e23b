"""The progress bar's epoch count (bench/run/progress.py): the epochs a run takes, also when
``trainer.max_steps`` bounds it and leaves ``max_epochs`` at -1 (it read "Epoch 0/-2")."""

from types import SimpleNamespace

import pytest

from bench.run.progress import epoch_text, planned_epochs


@pytest.mark.parametrize(("max_epochs", "max_steps", "batches", "accumulate", "planned"), [
    (3, -1, 10, 1, 3),          # epochs bound the run
    (-1, 20, 8, 1, 3),          # 20 steps of 8 a epoch: 3 epochs, the last partial
    (-1, 20, 8, 2, 5),          # 2 batches a step: 4 steps an epoch
    (-1, 16, 8, 1, 2),
    (-1, -1, 8, 1, None),       # unbounded
    (-1, 20, float("inf"), 1, None),  # a loader of unknown length
])
def test_the_planned_epochs(max_epochs, max_steps, batches, accumulate, planned):
    trainer = SimpleNamespace(max_epochs=max_epochs, max_steps=max_steps,
                              num_training_batches=batches, accumulate_grad_batches=accumulate)
    assert planned_epochs(trainer) == planned


def test_the_title_counts_from_one():
    assert epoch_text(0, 3) == "Epoch 1/3"
    assert epoch_text(2, None) == "Epoch 3"
