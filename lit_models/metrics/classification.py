"""Task metrics by name, all torchmetrics objects, so they accumulate over batches and devices.

Names are the keys a task YAML lists under ``metrics`` and the keys of a record's metrics:
``accuracy``, ``f1`` (of the positive class, as GLUE's MRPC/QQP; macro over classes beyond two),
``macro_f1`` (the unweighted mean of the per-class F1s) and ``micro_f1`` (F1 of the pooled
per-class counts: accuracy, for single-label classes), as SciBERT (Beltagy et al. 2019, §4) and
don't-stop-pretraining (Gururangan et al. 2020, Table 5) report ChemProt (micro) and ACL-ARC,
SciCite and SciERC relations (macro); ``matthews`` (CoLA; Matthews 1975), ``auroc`` (the area
under the ROC curve of the positive class's probability, binary tasks: spoiler detection, Wan et
al. 2019 §5), ``pearson`` and ``spearman`` (STS-B).

A classification collection is fed either class ids [N] or the model's class probabilities
(``class_probabilities``: p(positive) [N] for two labels, [N, C] beyond), so that ``auroc`` ranks
by score while the label metrics read the most probable class (p > 0.5, argmax); class ids give
``auroc`` the ROC of hard predictions.
"""

from collections.abc import Sequence

import torch
import torchmetrics
from torchmetrics import classification, regression
from torchmetrics.utilities import dim_zero_cat

from datamodules.errors import PlmbenchError


def _classification(name: str, num_labels: int) -> torchmetrics.Metric:
    binary = num_labels == 2
    if name == "accuracy":
        if binary:
            return classification.BinaryAccuracy()
        return classification.MulticlassAccuracy(num_classes=num_labels, average="micro")
    if name == "f1":
        if binary:
            return classification.BinaryF1Score()
        return classification.MulticlassF1Score(num_classes=num_labels, average="macro")
    if name in ("macro_f1", "micro_f1"):
        average = name.partition("_")[0]
        return classification.MulticlassF1Score(num_classes=num_labels, average=average)
    if name == "matthews":
        task = "binary" if binary else "multiclass"
        return classification.MatthewsCorrCoef(task=task, num_classes=num_labels)
    if name == "auroc":
        if not binary:
            raise PlmbenchError("metric 'auroc' needs a binary task (num_labels: 2)")
        return ScoreAUROC()
    raise PlmbenchError(f"metric {name!r} needs a regression task (num_labels: 1)")


class ScoreAUROC(classification.BinaryAUROC):
    """torchmetrics' exact binary AUROC over scores of the positive class; class ids are read
    as scores 0 and 1 (the ROC of hard predictions). NaN where the targets hold one class, for
    which the ROC is not defined (scikit-learn's NaN; torchmetrics would say 0)."""

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        super().update(preds.float(), target)

    def compute(self) -> torch.Tensor:
        target = dim_zero_cat(self.target)
        if target.numel() == 0 or bool(target.min() == target.max()):
            return torch.tensor(float("nan"))
        return super().compute()


def class_probabilities(logits: torch.Tensor, num_labels: int) -> torch.Tensor:
    """What a classification collection reads from [N, C] logits: the softmax, p(positive)
    [N] for two labels."""
    probabilities = logits.float().softmax(-1)
    return probabilities[:, 1] if num_labels == 2 else probabilities


REGRESSION = {"pearson": regression.PearsonCorrCoef, "spearman": regression.SpearmanCorrCoef}
CLASSIFICATION = ("accuracy", "f1", "macro_f1", "micro_f1", "matthews", "auroc")


def build_metrics(names: Sequence[str], num_labels: int) -> torchmetrics.MetricCollection:
    """A MetricCollection for a task; fed class ids or ``class_probabilities``
    (classification), or scores (regression)."""
    known = CLASSIFICATION + tuple(REGRESSION)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise PlmbenchError(f"unknown metric(s) {unknown} in the task config: use {list(known)}")
    if num_labels == 1:
        wrong = [n for n in names if n not in REGRESSION]
        if wrong:
            raise PlmbenchError(f"metric(s) {wrong} need classification labels (num_labels >= 2)")
        return torchmetrics.MetricCollection({n: REGRESSION[n]() for n in names})
    return torchmetrics.MetricCollection({n: _classification(n, num_labels) for n in names})
