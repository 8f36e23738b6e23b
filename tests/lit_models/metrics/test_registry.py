"""The metric registry: a task's names select registrations over the inputs its family feeds,
one line refuses what it cannot feed, a registration computes its values together once, and a
metric registered from outside the package (here, this file) is a function and a decorator."""

import pytest
import torch

from datamodules.errors import PlmbenchError
from lit_models.metrics import METRICS, build_metrics, register_metric
from lit_models.metrics.registry import WholeSplit


@pytest.fixture
def registered():
    """Registrations made by a test, removed after it."""
    before = dict(METRICS)
    yield
    METRICS.clear()
    METRICS.update(before)


def test_unknown_and_unfed_names_are_refused_in_one_line():
    with pytest.raises(PlmbenchError, match="'nope' in the task config is unknown"):
        build_metrics(["accuracy", "nope"], "labels", num_labels=2)
    with pytest.raises(PlmbenchError, match="'rouge1' .* scores texts, and this task's family "
                                            "feeds labels: use one of .*'accuracy'"):
        build_metrics(["rouge1"], "labels", num_labels=2)


def test_a_name_over_a_kind_the_family_lacks_knowingly_is_left_out():
    metrics = build_metrics(["exact_match", "recall@5"], "answers", without=("rankings",))
    metrics.update([["Paris"], ["1876"]], answers=["paris", "1877"])
    assert metrics.compute() == {"exact_match": 50.0}


def test_the_first_fed_kind_that_has_a_name_wins():
    """``f1`` is SQuAD's token F1 over answers and seqeval's over tags."""
    answers = build_metrics(["f1"], ("answers", "tags"))
    answers.update([["the big cat"]], answers=["big dog"], tags=[["O"]])
    assert answers.compute() == pytest.approx({"f1": 100 * 2 * (1 / 2 * 1 / 2) / (1 / 2 + 1 / 2)})
    tags = build_metrics(["f1"], ("tags", "answers"))
    tags.update([["B-PER", "O"]], answers=["x"], tags=[["B-PER", "O"]])
    assert tags.compute() == pytest.approx({"precision": 1.0, "recall": 1.0, "f1": 1.0})


def test_a_metric_registered_outside_the_package_by_a_function_and_a_decorator(registered):
    calls = []

    @register_metric("median_error", "max_error", inputs="scores", whole_split=True)
    def errors(predictions: torch.Tensor, references: torch.Tensor, **_) -> dict[str, float]:
        calls.append(len(predictions))
        error = (predictions - references).abs()
        return {"median_error": float(error.median()), "max_error": float(error.max())}

    metrics = build_metrics(["median_error", "max_error", "pearson"], "scores")
    metrics.update(torch.tensor([1.0, 2.0]), scores=torch.tensor([1.5, 2.0]))
    metrics.update(torch.tensor([3.0]), scores=torch.tensor([0.0]))  # whole split: 3 examples
    values = metrics.compute()
    assert calls == [3]  # both names of the registration computed once, over every batch
    assert values["median_error"] == pytest.approx(0.5) and values["max_error"] == 3.0
    assert list(values) == ["median_error", "max_error", "pearson"]
    with pytest.raises(ValueError, match="registered twice"):
        register_metric("max_error", inputs="scores")(errors)


def test_whole_split_metrics_over_tensors_sync_and_over_objects_do_not():
    tensors = WholeSplit(lambda p, r: 0.0, tensors=True, context={})
    texts = WholeSplit(lambda p, r: 0.0, tensors=False, context={})
    assert tensors.sync_on_compute and tensors._reductions["predictions"] is not None
    assert not texts.sync_on_compute
    # a family's texts are gathered by the family: the built metrics never sync
    rouge = build_metrics(["rouge1"], "texts")
    assert not any(m.sync_on_compute for m in rouge.modules() if hasattr(m, "sync_on_compute"))


def test_reset_starts_a_whole_split_metric_over():
    metrics = build_metrics(["exact_match"], "answers")
    metrics.update([["a"]], answers=["b"])
    assert metrics.compute() == {"exact_match": 0.0}
    metrics.reset()
    metrics.update([["a"]], answers=["a"])
    assert metrics.compute() == {"exact_match": 100.0}
