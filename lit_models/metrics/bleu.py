"""BLEU (Papineni et al. 2002, "BLEU: a Method for Automatic Evaluation of Machine Translation")
as sacreBLEU computes it (Post 2018, "A Call for Clarity in Reporting BLEU Scores"): corpus-level
BLEU of detokenized hypotheses against raw references, the tokenization, casing and smoothing
fixed by sacreBLEU and named by its signature ("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|
version:2.6.0"), which is recorded beside the score so a reader knows how to recompute it.

BLEU = BP x exp(sum_n 1/4 log p_n), p_n the clipped n-gram precisions of the whole corpus (n = 1..4,
§2.1), BP = min(1, exp(1 - r / c)) the brevity penalty of hypothesis length c against reference
length r (§2.2.2). Recorded as sacreBLEU prints them: BLEU and p_n on 0..100, BP on 0..1, and
the hypothesis and reference lengths. The defaults are sacreBLEU's (its command line's): tokenizer
13a (WMT's mteval-v13a), mixed case, "exp" smoothing; T5 scored with tokenize="intl" (Raffel et
al. 2020, §2.3; its released ``metrics.bleu``).
"""

from collections.abc import Sequence

import torch
from sacrebleu.metrics import BLEU
from torchmetrics import Metric

#: sacreBLEU's BLEU settings a task may set (``task.bleu``)
SETTINGS = ("tokenize", "smooth_method", "smooth_value", "lowercase")


class Bleu(Metric):
    """Collects (hypothesis, reference) pairs; ``compute()`` scores them as one corpus. The texts
    stay in this process (the caller gathers every process's pairs before updating)."""

    full_state_update = False

    def __init__(self, tokenize: str = "13a", smooth_method: str = "exp",
                 smooth_value: float | None = None, lowercase: bool = False) -> None:
        super().__init__()
        self.bleu = BLEU(tokenize=tokenize, smooth_method=smooth_method,
                         smooth_value=smooth_value, lowercase=lowercase)
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
        values = {"bleu": score.score, "bleu_brevity_penalty": score.bp,
                  "bleu_hyp_len": score.sys_len, "bleu_ref_len": score.ref_len}
        values |= {f"bleu_precision_{n}": p for n, p in enumerate(score.precisions, 1)}
        return {key: torch.tensor(float(value), dtype=torch.float64)
                for key, value in values.items()}

    def signatures(self) -> dict[str, str]:
        """How the score was computed, as sacreBLEU writes it (after ``compute``)."""
        return {"bleu": str(self.bleu.get_signature())}

    def reset(self) -> None:
        super().reset()
        self.hypotheses, self.references = [], []
