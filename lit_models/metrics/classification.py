"""Classification and regression metrics, all torchmetrics objects, so they accumulate over
batches and devices; registered over ``labels`` (predicted class ids) and ``scores`` (regression).

``accuracy``, ``f1`` (of the positive class, as GLUE's MRPC/QQP; macro over classes beyond two),
``macro_f1`` (the unweighted mean of the per-class F1s) and ``micro_f1`` (F1 of the pooled
per-class counts: accuracy, for single-label classes), as SciBERT (Beltagy et al. 2019, §4) and
don't-stop-pretraining (Gururangan et al. 2020, Table 5) report ChemProt (micro) and ACL-ARC,
SciCite and SciERC relations (macro); ``matthews`` (CoLA; Matthews 1975), ``pearson`` and
``spearman`` (STS-B).
"""

from collections.abc import Sequence

from torchmetrics import Metric, classification, regression

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
    task = "binary" if num_labels == 2 else "multiclass"
    return classification.MatthewsCorrCoef(task=task, num_classes=num_labels)


@register_metric("pearson", inputs="scores")
def pearson(**_) -> Metric:
    return regression.PearsonCorrCoef()


@register_metric("spearman", inputs="scores")
def spearman(**_) -> Metric:
    return regression.SpearmanCorrCoef()


def label_metrics(names: Sequence[str], num_labels: int) -> Metrics:
    """A classification task's metrics: fed class ids, or scores where ``num_labels`` is 1
    (regression)."""
    feeds = "scores" if num_labels == 1 else "labels"
    return build_metrics(names, feeds, num_labels=num_labels)
