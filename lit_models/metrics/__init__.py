"""Every metric plmbench reports, in one package that imports only ``datamodules.errors`` and the
libraries that compute them (torchmetrics, seqeval, sacrebleu ...), so every layer may use it.

The registry (``registry.py``) holds them by name; a task YAML lists the ones it reports under
``metrics`` and its family builds them with ``build_metrics``. Registered here:
``classification`` (accuracy, F1s, Matthews, AUROC; Pearson and Spearman for regression), ``squad``
(the official SQuAD v1.1/v2.0 F1 and the v2.0 figures), ``exact_match`` (SQuAD's and open-domain
QA's, string or regex answers), ``rouge`` (ROUGE-1/2/L/Lsum), ``bleu`` (sacrebleu's corpus BLEU),
``tagging`` (seqeval's entity P/R/F1), ``retrieval`` (DPR's answer recall@k and MRR) and
``superglue`` (MultiRC's F1a and exact match, ReCoRD's EM and F1, AX-g's gender parity). A new
metric is a function with ``@register_metric`` in the module of its field (a new module is
imported below)."""

from lit_models.metrics import (  # noqa: F401  (each module registers its metrics)
    bleu,
    classification,
    exact_match,
    retrieval,
    rouge,
    squad,
    superglue,
    tagging,
)
from lit_models.metrics.registry import (
    INPUTS,
    METRICS,
    Metrics,
    build_metrics,
    exact_total,
    register_metric,
)

__all__ = ["INPUTS", "METRICS", "Metrics", "build_metrics", "exact_total", "register_metric"]
