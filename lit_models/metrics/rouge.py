"""ROUGE (Lin 2004, "ROUGE: A Package for Automatic Evaluation of Summaries") as the standard
summarization scorer (Google's ``rouge_score``) computes it, through torchmetrics, offline.

ROUGE-1 / ROUGE-2: F-measure of unigram / bigram overlap (§2); ROUGE-L: of the longest common
subsequence of the whole texts (§3.1); ROUGE-Lsum: the summary-level LCS (§3.2), the union of
LCS matches of every reference sentence against all candidate sentences, with sentences split on
newlines, as ``rouge_score`` does for CNN/DailyMail (one highlight per line). Tokens are
lowercased alphanumeric runs, Porter-stemmed (``use_stemmer=True``). Scores are means over
examples of per-example F-measures, on 0..1.

torchmetrics' own ROUGE-Lsum splits sentences with NLTK's punkt model, a data download; here the
same summary-level LCS (torchmetrics' ``_rouge_lsum_score``) gets the newline-split sentences, so
nothing beyond the ``nltk`` package (its Porter stemmer) is needed. Registered as ``rouge1``,
``rouge2``, ``rougeL`` and ``rougeLsum`` over ``texts``.
"""

from collections.abc import Sequence

import torch
from torchmetrics import MeanMetric, Metric
from torchmetrics.functional.text.rouge import _normalize_and_tokenize_text, _rouge_lsum_score
from torchmetrics.text.rouge import ROUGEScore

from lit_models.metrics.registry import register_metric

KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def sentences(text: str) -> list[str]:
    """A summary's sentences: its non-empty lines."""
    return [line for line in text.split("\n") if line.strip()] or [""]


@register_metric(*KEYS, inputs="texts")
class Rouge(Metric):
    """Accumulates ROUGE-1/2/L/Lsum F-measures over (prediction, reference) pairs."""

    full_state_update = False

    def __init__(self, **_) -> None:
        super().__init__()
        self.overlap = ROUGEScore(use_stemmer=True, rouge_keys=("rouge1", "rouge2", "rougeL"))
        self.lsum = MeanMetric()

    def update(self, predictions: Sequence[str], references: Sequence[str]) -> None:
        self.overlap.update(list(predictions), list(references))
        stemmer = self.overlap.stemmer
        for prediction, reference in zip(predictions, references, strict=True):
            split = [[_normalize_and_tokenize_text(s, stemmer) for s in sentences(text)]
                     for text in (prediction, reference)]
            self.lsum.update(_rouge_lsum_score(*split)["fmeasure"])

    def compute(self) -> dict[str, torch.Tensor]:
        scores = self.overlap.compute()
        out = {key: scores[f"{key}_fmeasure"] for key in KEYS[:3]}
        return {**out, "rougeLsum": self.lsum.compute()}

    def reset(self) -> None:
        super().reset()
        self.overlap.reset()
        self.lsum.reset()
