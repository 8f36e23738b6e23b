"""BLEU (Papineni et al. 2002, "BLEU: a Method for Automatic Evaluation of Machine Translation")
as sacreBLEU computes it (Post 2018, "A Call for Clarity in Reporting BLEU Scores"): corpus-level
BLEU of detokenized hypotheses against raw references (one each), the tokenization, casing and
smoothing fixed by sacreBLEU and named by its signature ("nrefs:1|case:mixed|eff:no|tok:13a|
smooth:exp|version:2.6.0"), which the run records beside the score, so a score here is the one
``sacrebleu``'s command line prints for the same files with the same settings.

BLEU = BP x exp(sum_n 1/4 log p_n), p_n the clipped n-gram precisions pooled over the corpus
(n = 1..4, §2.1), BP = min(1, exp(1 - r / c)) the brevity penalty of hypothesis length c against
reference length r (§2.2.2). Recorded as sacreBLEU prints them: BLEU and p_n on 0..100, BP on 0..1,
the hypothesis and reference lengths. Registered as ``bleu`` (and its parts) over ``texts``; the
settings are a task's ``bleu`` block (``SETTINGS``), sacreBLEU's defaults (its command line's)
otherwise: tokenizer 13a (WMT's mteval-v13a), mixed case, "exp" smoothing. T5 scored with
tokenize="intl" (Raffel et al. 2020; its released ``metrics.bleu``). A corpus statistic: the
texts of a split are kept and scored once (the family gathers every process's before updating).
"""

from collections.abc import Mapping, Sequence

import torch
from sacrebleu.metrics import BLEU

from datamodules.errors import PlmbenchError
from lit_models.metrics.registry import Signed, register_metric

#: sacreBLEU's BLEU settings a task may set (``task.bleu``)
SETTINGS = ("tokenize", "smooth_method", "smooth_value", "lowercase")
#: what one corpus score records, as sacreBLEU's text output names them
VALUES = ("bleu", "bleu_brevity_penalty", "bleu_hyp_len", "bleu_ref_len",
          *(f"bleu_precision_{n}" for n in range(1, 5)))


def sacrebleu_metric(settings: Mapping | None) -> BLEU:
    """sacreBLEU's BLEU with ``settings``; a setting it does not know or refuses is one line."""
    settings = dict(settings or {})
    if unknown := sorted(set(settings) - set(SETTINGS)):
        raise PlmbenchError(f"task.bleu: unknown keys {unknown}; sacreBLEU's BLEU takes "
                            f"{', '.join(SETTINGS)}")
    try:
        return BLEU(**settings)
    except (KeyError, AssertionError, TypeError) as err:
        raise PlmbenchError(f"task.bleu={settings}: sacreBLEU refuses it ({err!s}); see "
                            "`sacrebleu --help` for its tokenizers and smoothing methods") from None


class Bleu(Signed):
    """Collects (hypothesis, reference) pairs; ``compute()`` scores them as one corpus."""

    full_state_update = False

    def __init__(self, settings: Mapping | None = None) -> None:
        super().__init__()
        self.bleu = sacrebleu_metric(settings)
        self.hypotheses: list[str] = []
        self.references: list[str] = []

    def update(self, predictions: Sequence[str], references: Sequence[str]) -> None:
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} hypotheses for {len(references)} references")
        self.hypotheses.extend(predictions)
        self.references.extend(references)

    def compute(self) -> dict[str, torch.Tensor]:
        if not self.hypotheses:
            raise ValueError("BLEU of an empty corpus: update() was never called with a pair")
        score = self.bleu.corpus_score(self.hypotheses, [self.references])
        values = (score.score, score.bp, score.sys_len, score.ref_len, *score.precisions)
        return {name: torch.tensor(float(value), dtype=torch.float64)
                for name, value in zip(VALUES, values, strict=True)}

    def signatures(self) -> dict[str, str]:
        """sacreBLEU's signature of the last ``compute``."""
        return {"bleu": str(self.bleu.get_signature())}

    def reset(self) -> None:
        super().reset()
        self.hypotheses, self.references = [], []


@register_metric(*VALUES, inputs="texts")
def bleu(bleu: Mapping | None = None, **_) -> Bleu:
    """Corpus BLEU with the task's ``bleu`` settings."""
    return Bleu(bleu)
