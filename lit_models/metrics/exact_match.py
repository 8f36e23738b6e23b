"""Exact match of a predicted answer against any of its references (Rajpurkar et al. 2016, §6:
SQuAD's normalisation: lower case, no punctuation, no articles, one space), or, for regex
references (CuratedTREC; Chen et al. 2017, DrQA's ``regex_match_score``), a match of the
pattern at the start of the prediction, ignoring case. Registered as ``exact_match`` over
``answers``: the share of questions answered exactly, on 0..100 (SQuAD v1.1's and open-domain
QA's EM)."""

from collections.abc import Sequence

import regex

from lit_models.metrics.registry import register_metric
from lit_models.metrics.squad import normalize_answer


def exact_match(prediction: str, references: Sequence[str], match: str = "string") -> bool:
    """SQuAD-normalised equality with any reference; for ``regex`` references, DrQA's
    ``regex_match_score`` (the pattern matches at the start of the prediction, ignoring case)."""
    if match == "regex":
        for pattern in references:
            try:
                compiled = regex.compile(pattern, flags=regex.IGNORECASE | regex.UNICODE
                                         | regex.MULTILINE)
            except regex.error:
                continue
            if compiled.match(prediction) is not None:
                return True
        return False
    normalized = normalize_answer(prediction)
    return any(normalized == normalize_answer(reference) for reference in references)


@register_metric("exact_match", inputs="answers", whole_split=True)
def exact_match_rate(predictions: Sequence[str], references: Sequence[Sequence[str]],
                     match: str = "string", **_) -> float:
    """100 x the share of ``predictions`` that ``exact_match`` one of their references."""
    hits = [exact_match(p, refs, match) for p, refs in zip(predictions, references, strict=True)]
    return 100 * sum(hits) / len(hits) if hits else 0.0
