"""Every metric plmbench reports, in one package that imports only ``datamodules.errors`` and the
libraries that compute them (torchmetrics, seqeval, sacrebleu ...), so every layer may use it.

The registry (``registry.py``) holds them by name; a task YAML lists the ones it reports under
``metrics`` and its family builds them with ``build_metrics``. Found here:
``classification`` (accuracy, F1s, Matthews, AUROC; Pearson and Spearman for regression), ``squad``
(the official SQuAD v1.1/v2.0 F1 and the v2.0 figures), ``exact_match`` (SQuAD's and open-domain
QA's, string or regex answers), ``rouge`` (ROUGE-1/2/L/Lsum), ``bleu`` (sacrebleu's corpus BLEU),
``tagging`` (seqeval's entity P/R/F1), ``retrieval`` (DPR's answer recall@k and MRR) and
``superglue`` (MultiRC's F1a and exact match, ReCoRD's EM and F1, AX-g's gender parity). A new
metric is a function with ``@register_metric`` in a module of this folder, which is imported
because it is there (``datamodules/discovery.py``), or in a module an installed distribution names
under the ``plmbench.metrics`` entry-point group."""

from datamodules.discovery import folder_modules, plugins
from lit_models.metrics.registry import (
    INPUTS,
    METRICS,
    Metrics,
    build_metrics,
    exact_total,
    register_metric,
)

#: the entry-point group under which a distribution names its metrics' modules
METRIC_GROUP = "plmbench.metrics"

folder_modules(__name__)  # each module registers its metrics as it is imported
plugins(METRIC_GROUP)

__all__ = ["INPUTS", "METRICS", "METRIC_GROUP", "Metrics", "build_metrics", "exact_total",
           "register_metric"]
