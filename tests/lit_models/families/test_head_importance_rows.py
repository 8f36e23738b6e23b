"""Which examples head pruning's importance is averaged over (``importance_rows``): held out from
both the fine-tuned run's training rows and the splits that score the curve, or one line."""

import pytest

from datamodules.errors import PlmbenchError
from lit_models.families.head_pruning import importance_rows


def task(cap=8000, split=None, skip=None, samples=1000, scored=("validation",)):
    target = {"name": "glue/sst2", "splits": {"train": "train", "eval": list(scored)},
              "max_train_samples": cap}
    return {"target": target, "splits": {"eval": list(scored)},
            "importance": {"split": split, "skip": skip, "samples": samples}}


def test_by_default_the_training_rows_after_the_runs_cap():
    assert importance_rows(task()) == ("train", 8000, 1000)
    assert importance_rows(task(skip=0)) == ("train", 0, 1000)
    assert importance_rows(task(cap=None, skip=500, samples=7)) == ("train", 500, 7)
    # another split the run does not score starts at its first row
    assert importance_rows(task(split="validation_matched", scored=["validation_mismatched"])) \
        == ("validation_matched", 0, 1000)


@pytest.mark.parametrize("bad, says", [
    (task(split="validation"), "other than those that score"),
    (task(split="test", scored=["validation", "test"]), "other than those that score"),
    (task(cap=None), "set task.importance.skip"),
    (task(samples=0), "task.importance.samples=0"),
])
def test_rows_that_would_leak_or_are_none_are_one_line(bad, says):
    with pytest.raises(PlmbenchError, match=says) as err:
        importance_rows(bad)
    assert "\n" not in str(err.value)
