"""Task metrics against independent computations written here in plain Python / torch (float64),
accumulated over several ``update`` calls of uneven size to check that batching does not change
the result: accuracy, F1 of the positive class, Matthews correlation (Matthews 1975; the
multiclass form of Gorodkin 2004), Pearson and Spearman (Pearson of average ranks)."""

import math

import pytest
import torch

from datamodules.errors import PlmbenchError
from lit_models.metrics.classification import label_metrics

pytestmark = pytest.mark.filterwarnings("ignore:Metric `SpearmanCorrcoef`:UserWarning")

#: uneven batch boundaries, so a metric that averages per-batch values would disagree
SPLITS = (3, 17, 1, 29, 50)


def feed(names: list[str], num_labels: int, preds: torch.Tensor, target: torch.Tensor) -> dict:
    metrics = label_metrics(names, num_labels)
    kind = "scores" if num_labels == 1 else "labels"
    for p, t in zip(preds.split(SPLITS), target.split(SPLITS), strict=True):
        metrics.update(t, **{kind: p})
    return metrics.compute()


def confusion(preds: list[int], target: list[int], k: int) -> list[list[int]]:
    """c[true][predicted] counts."""
    c = [[0] * k for _ in range(k)]
    for p, t in zip(preds, target, strict=True):
        c[t][p] += 1
    return c


def matthews(preds: list[int], target: list[int], k: int) -> float:
    """Gorodkin's R_K from the confusion matrix; for k = 2 it is Matthews' phi."""
    c = confusion(preds, target, k)
    n = len(preds)
    correct = sum(c[i][i] for i in range(k))
    true_counts = [sum(c[i]) for i in range(k)]
    pred_counts = [sum(c[i][j] for i in range(k)) for j in range(k)]
    cov = correct * n - sum(p * t for p, t in zip(pred_counts, true_counts, strict=True))
    var_pred = n * n - sum(p * p for p in pred_counts)
    var_true = n * n - sum(t * t for t in true_counts)
    return cov / math.sqrt(var_pred * var_true)


def binary_matthews(preds: list[int], target: list[int]) -> float:
    (tn, fp), (fn, tp) = confusion(preds, target, 2)
    return (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))


def pearson(x: list[float], y: list[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in x))
    sy = math.sqrt(sum((b - my) ** 2 for b in y))
    return cov / (sx * sy)


def average_ranks(x: list[float]) -> list[float]:
    """1-based ranks; tied values share the mean of the ranks they span."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = [0.0] * len(x)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and x[order[end + 1]] == x[order[start]]:
            end += 1
        for j in range(start, end + 1):
            ranks[order[j]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: list[float], y: list[float]) -> float:
    return pearson(average_ranks(x), average_ranks(y))


@pytest.fixture
def binary() -> tuple[torch.Tensor, torch.Tensor]:
    """Labels and imperfect predictions (about 70% right, positives over-predicted)."""
    g = torch.Generator().manual_seed(1)
    target = torch.randint(0, 2, (100,), generator=g)
    flip = torch.rand(100, generator=g) < 0.3
    preds = torch.where(flip, 1 - target, target)
    preds[:10] = 1
    return preds, target


def test_average_ranks_helper():
    assert average_ranks([10.0, 20.0, 20.0, 5.0, 20.0]) == [2.0, 4.0, 4.0, 1.0, 4.0]


def test_binary_accuracy_f1_matthews(binary):
    preds, target = binary
    got = feed(["accuracy", "f1", "matthews"], 2, preds, target)
    p, t = preds.tolist(), target.tolist()
    tp = sum(a == 1 and b == 1 for a, b in zip(p, t, strict=True))
    fp = sum(a == 1 and b == 0 for a, b in zip(p, t, strict=True))
    fn = sum(a == 0 and b == 1 for a, b in zip(p, t, strict=True))
    assert 0 < tp and 0 < fp and 0 < fn
    correct = sum(a == b for a, b in zip(p, t, strict=True))
    assert got["accuracy"] == pytest.approx(correct / len(p), abs=1e-6)
    assert got["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), abs=1e-6)
    assert got["matthews"] == pytest.approx(binary_matthews(p, t), abs=1e-6)
    assert got["matthews"] == pytest.approx(matthews(p, t, 2), abs=1e-6)


def test_f1_is_of_the_positive_class(binary):
    """Swapping the class names changes F1 (it is not symmetric), but not accuracy or MCC."""
    preds, target = binary
    got = feed(["accuracy", "f1", "matthews"], 2, preds, target)
    swapped = feed(["accuracy", "f1", "matthews"], 2, 1 - preds, 1 - target)
    p, t = (1 - preds).tolist(), (1 - target).tolist()
    tp = sum(a == 1 and b == 1 for a, b in zip(p, t, strict=True))
    wrong = sum(a != b for a, b in zip(p, t, strict=True))
    assert swapped["f1"] == pytest.approx(2 * tp / (2 * tp + wrong), abs=1e-6)
    assert abs(swapped["f1"] - got["f1"]) > 1e-3
    assert swapped["accuracy"] == pytest.approx(got["accuracy"], abs=1e-6)
    assert swapped["matthews"] == pytest.approx(got["matthews"], abs=1e-6)


def test_three_class_accuracy_and_matthews():
    g = torch.Generator().manual_seed(2)
    target = torch.randint(0, 3, (100,), generator=g)
    noise = torch.randint(0, 3, (100,), generator=g)
    preds = torch.where(torch.rand(100, generator=g) < 0.4, noise, target)
    got = feed(["accuracy", "matthews", "f1"], 3, preds, target)
    p, t = preds.tolist(), target.tolist()
    correct = sum(a == b for a, b in zip(p, t, strict=True))
    assert got["accuracy"] == pytest.approx(correct / 100, abs=1e-6)
    assert got["matthews"] == pytest.approx(matthews(p, t, 3), abs=1e-6)
    assert 0.2 < got["matthews"] < 0.95  # a non-trivial value
    # multiclass f1 is the macro average of the per-class F1
    c = confusion(p, t, 3)
    per_class = []
    for k in range(3):
        tp = c[k][k]
        fp = sum(c[i][k] for i in range(3)) - tp
        fn = sum(c[k]) - tp
        per_class.append(2 * tp / (2 * tp + fp + fn))
    assert got["f1"] == pytest.approx(sum(per_class) / 3, abs=1e-6)


def test_matthews_is_one_when_perfect_and_minus_one_when_inverted(binary):
    _, target = binary
    assert feed(["matthews"], 2, target, target)["matthews"] == pytest.approx(1.0, abs=1e-6)
    assert feed(["matthews"], 2, 1 - target, target)["matthews"] == pytest.approx(-1.0, abs=1e-6)


def test_pearson_and_spearman():
    g = torch.Generator().manual_seed(3)
    target = torch.rand(100, generator=g) * 5  # STS-B scores in 0..5
    preds = target**2 / 5 + torch.randn(100, generator=g)  # monotone-ish, not linear
    got = feed(["pearson", "spearman"], 1, preds, target)
    x, y = preds.double().tolist(), target.double().tolist()
    assert got["pearson"] == pytest.approx(pearson(x, y), abs=1e-5)
    assert got["spearman"] == pytest.approx(spearman(x, y), abs=1e-5)
    assert abs(got["pearson"] - got["spearman"]) > 1e-3  # they do measure different things


def test_spearman_with_ties_uses_average_ranks():
    g = torch.Generator().manual_seed(4)
    target = torch.randint(0, 6, (100,), generator=g).float()  # STS-B-like integer scores: ties
    preds = (target + torch.randint(-2, 3, (100,), generator=g)).clamp(0, 5).float()  # ties too
    got = feed(["spearman"], 1, preds, target)
    x, y = preds.tolist(), target.tolist()
    assert got["spearman"] == pytest.approx(spearman(x, y), abs=1e-5)
    # ordinal ranks (ties broken by position) would give a different value
    ordinal = [0.0] * 100
    for r, i in enumerate(sorted(range(100), key=lambda i: x[i])):
        ordinal[i] = float(r)
    assert abs(pearson(ordinal, average_ranks(y)) - got["spearman"]) > 1e-4


def test_pearson_of_a_perfect_linear_prediction_is_one():
    target = torch.linspace(0, 5, 100)
    got = feed(["pearson", "spearman"], 1, 2 * target + 1, target)
    assert got["pearson"] == pytest.approx(1.0, abs=1e-5)
    assert got["spearman"] == pytest.approx(1.0, abs=1e-5)


def test_metrics_accumulate_rather_than_keep_the_last_batch(binary):
    """The last batch alone is all correct; the accumulated accuracy is not."""
    preds, target = binary
    preds, target = preds.clone(), target.clone()
    preds[-SPLITS[-1]:] = target[-SPLITS[-1]:]
    got = feed(["accuracy"], 2, preds, target)
    assert got["accuracy"] == pytest.approx((preds == target).double().mean().item(), abs=1e-6)
    assert got["accuracy"] < 1.0


def test_reset_forgets_earlier_batches(binary):
    preds, target = binary
    metrics = label_metrics(["accuracy"], 2)
    metrics.update(target, labels=1 - target)
    metrics.compute()
    metrics.reset()
    metrics.update(target, labels=target)
    assert metrics.compute()["accuracy"] == pytest.approx(1.0)


def test_unknown_metric_raises():
    with pytest.raises(PlmbenchError, match="bleu"):
        label_metrics(["accuracy", "bleu"], 2)


@pytest.mark.parametrize("name", ["accuracy", "f1", "matthews"])
def test_classification_metric_on_a_regression_task_raises(name):
    with pytest.raises(PlmbenchError, match=name):
        label_metrics(["pearson", name], 1)


@pytest.mark.parametrize("name", ["pearson", "spearman"])
@pytest.mark.parametrize("num_labels", [2, 3])
def test_regression_metric_on_a_classification_task_raises(name, num_labels):
    with pytest.raises(PlmbenchError, match=name):
        label_metrics(["accuracy", name], num_labels)


def test_macro_and_micro_f1_of_several_classes_one_never_seen():
    """macro_f1: unweighted mean of the per-class F1 over the classes that occur (in the labels
    or the predictions), as sklearn averages; micro_f1: F1 of the pooled counts, which for one
    label per example is the accuracy. Class 4 of 5 is neither a label nor a prediction."""
    g = torch.Generator().manual_seed(5)
    target = torch.randint(0, 4, (100,), generator=g)
    noise = torch.randint(0, 4, (100,), generator=g)
    preds = torch.where(torch.rand(100, generator=g) < 0.4, noise, target)
    got = feed(["macro_f1", "micro_f1"], 5, preds, target)
    p, t = preds.tolist(), target.tolist()
    c = confusion(p, t, 5)
    per_class = []
    for k in range(5):
        tp = c[k][k]
        fp = sum(c[i][k] for i in range(5)) - tp
        fn = sum(c[k]) - tp
        if tp + fp + fn:
            per_class.append(2 * tp / (2 * tp + fp + fn))
    assert len(per_class) == 4
    assert got["macro_f1"] == pytest.approx(sum(per_class) / len(per_class), abs=1e-6)
    correct = sum(a == b for a, b in zip(p, t, strict=True))
    assert got["micro_f1"] == pytest.approx(correct / 100, abs=1e-6)
    assert abs(got["macro_f1"] - got["micro_f1"]) > 1e-3
