"""Classification and regression metrics, all torchmetrics objects, so they accumulate over
batches and devices; registered over ``labels`` (predicted class ids), ``probabilities`` (the
model's class probabilities) and ``scores`` (regression).

``accuracy``, ``f1`` (of the positive class, as GLUE's MRPC/QQP; macro over classes beyond two),
``macro_f1`` (the unweighted mean of the per-class F1s) and ``micro_f1`` (F1 of the pooled
per-class counts: accuracy, for single-label classes), as SciBERT (Beltagy et al. 2019, §4) and
don't-stop-pretraining (Gururangan et al. 2020, Table 5) report ChemProt (micro) and ACL-ARC,
SciCite and SciERC relations (macro); ``matthews`` (CoLA; Matthews 1975, ``matthews.py``),
``auroc`` (the area under the ROC curve of the positive class's probability, binary tasks:
spoiler detection, Wan et al. 2019 §5), ``pearson`` and ``spearman`` (STS-B; ``correlation.py``).
Each equals scikit-learn's / scipy's value, degenerate inputs included (a constant predictor,
one class present; ``tests/lit_models/metrics/test_degenerate.py``).

A classifier feeds its metrics ``label_predictions`` of its class probabilities
(``class_probabilities``: p(positive) [N] for two labels, [N, C] beyond): ``auroc`` ranks by the
probability, the label metrics read the most probable class (p > 0.5, argmax). Predicted class
ids alone (generated label texts) are probabilities of 0 and 1 (``hard_probabilities``): the ROC
of hard predictions.
"""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torchmetrics import Metric, classification
from torchmetrics.utilities import dim_zero_cat

from datamodules.errors import PlmbenchError
from lit_models.metrics.correlation import Correlation
from lit_models.metrics.matthews import MatthewsCorrCoef
from lit_models.metrics.registry import Metrics, build_metrics, register_metric


@register_metric("accuracy", inputs="labels")
def accuracy(num_labels: int, **_) -> Metric:
    if num_labels == 2:
        return classification.BinaryAccuracy()
    return classification.MulticlassAccuracy(num_classes=num_labels, average="micro")


@register_metric("f1", inputs="labels")
def f1(num_labels: int, **_) -> Metric:
    if num_labels == 2:
        return classification.BinaryF1Score()
    return classification.MulticlassF1Score(num_classes=num_labels, average="macro")


@register_metric("macro_f1", inputs="labels")
def macro_f1(num_labels: int, **_) -> Metric:
    return classification.MulticlassF1Score(num_classes=num_labels, average="macro")


@register_metric("micro_f1", inputs="labels")
def micro_f1(num_labels: int, **_) -> Metric:
    return classification.MulticlassF1Score(num_classes=num_labels, average="micro")


@register_metric("matthews", inputs="labels")
def matthews(num_labels: int, **_) -> Metric:
    return MatthewsCorrCoef(num_classes=num_labels)  # scikit-learn's, 0 when undefined


class ScoreAUROC(classification.BinaryAUROC):
    """torchmetrics' exact binary AUROC over scores of the positive class. NaN where the targets
    hold one class, for which the ROC is not defined (scikit-learn's NaN; torchmetrics would say
    0)."""

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        super().update(preds.float(), target)

    def compute(self) -> torch.Tensor:
        target = dim_zero_cat(self.target)
        if target.numel() == 0 or bool(target.min() == target.max()):
            return torch.tensor(float("nan"))
        return super().compute()


@register_metric("auroc", inputs="probabilities")
def auroc(num_labels: int, **_) -> Metric:
    if num_labels != 2:
        raise PlmbenchError("metric 'auroc' needs a binary task (num_labels: 2)")
    return ScoreAUROC()


@register_metric("pearson", inputs="scores")
def pearson(**_) -> Metric:
    return Correlation("pearson")  # scipy's, in float64; 0 for a constant vector


@register_metric("spearman", inputs="scores")
def spearman(**_) -> Metric:
    return Correlation("spearman")


def label_metrics(names: Sequence[str], num_labels: int, indexed: bool = False) -> Metrics:
    """A classification task's metrics: fed ``label_predictions``, or scores where
    ``num_labels`` is 1 (regression); with ``indexed``, also ``indexed_labels`` (example index,
    predicted class), which a metric that pairs examples by index reads (AX-g's gender parity),
    else left out, with a log line (generated labels, a baseline: no example index)."""
    feeds = ("scores",) if num_labels == 1 else ("labels", "probabilities",
                                                 *(("indexed_labels",) if indexed else ()))
    return build_metrics(names, feeds, without=() if indexed else ("indexed_labels",),
                         num_labels=num_labels)


def class_probabilities(logits: torch.Tensor, num_labels: int) -> torch.Tensor:
    """The softmax of [N, C] logits; p(positive) [N] for two labels."""
    probabilities = logits.float().softmax(-1)
    return probabilities[:, 1] if num_labels == 2 else probabilities


def hard_probabilities(ids: torch.Tensor, num_labels: int) -> torch.Tensor:
    """Class ids as ``class_probabilities`` of 0 and 1."""
    one_hot = F.one_hot(ids.long(), num_labels).float()
    return one_hot[:, 1] if num_labels == 2 else one_hot


def label_predictions(probabilities: torch.Tensor, num_labels: int) -> dict[str, torch.Tensor]:
    """What ``label_metrics`` read, by kind, from ``class_probabilities``: the most probable
    class (``labels``: p > 0.5 for two labels, as torchmetrics' binary threshold) and the
    probabilities."""
    labels = (probabilities > 0.5).long() if num_labels == 2 else probabilities.argmax(-1)
    return {"labels": labels, "probabilities": probabilities}
