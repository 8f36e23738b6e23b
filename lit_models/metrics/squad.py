"""SQuAD's exact match and F1, as the official evaluation scripts compute them.

Rajpurkar et al. 2016, §5 (v1.1, ``evaluate-v1.1.py``): a prediction and a reference are
normalised (lower case, punctuation and the articles a/an/the removed, whitespace collapsed);
exact match is their equality, F1 the harmonic mean of precision and recall of their bags of
tokens; a question scores the maximum over its references, the dataset the mean x 100.
Rajpurkar et al. 2018, §5 (v2.0, ``evaluate-v2.0.py``): an unanswerable question's only
reference is the empty answer (so predicting "" scores 1, anything else 0), references that
normalise to nothing are dropped; HasAns/NoAns are the means over answerable / unanswerable
questions (absent, as in the script, when there are none; v2.0 scores a prediction and a reference
that both normalise to nothing F1 1, v1.1 scores it 0); a system abstains when its null odds
(null score - best non-null score, BERT's §4.3 s_null vs. s_hat) exceed a threshold, chosen on
the dev set to maximise F1 as the script's ``find_best_thresh`` does. Questions of equal null
odds abstain together under any threshold, so only cuts between distinct odds are candidates
(the script also counts cuts inside a run of equal odds, a best F1 no threshold reproduces); the
written predictions then score, under ``evaluate-v2.0.py``, exactly what the record says.
No questions: an error, as the scripts divide by their count.

The per-question scores are torchmetrics' SQuAD metric on each question; the answer
normalisation is the scripts' (only used here to drop empty references, as v2.0 does). Registered
as ``f1`` over ``answers`` (v1.1; its exact match is ``lit_models.metrics.exact_match``) and as
the v2.0 figures over ``answers_with_null_odds``.
"""

import re
import string
from collections.abc import Sequence

import numpy as np
from torchmetrics.functional.text import squad

from datamodules.errors import PlmbenchError
from lit_models.metrics.registry import register_metric

ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (official ``normalize_answer``)."""
    return " ".join(ARTICLES.sub(" ", text.lower().translate(PUNCTUATION)).split())


def v2_references(answers: Sequence[str]) -> list[str]:
    """The answers that normalise to something, else the empty answer (unanswerable)."""
    return [a for a in answers if normalize_answer(a)] or [""]


def question_scores(predictions: Sequence[str], references: Sequence[Sequence[str]]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(exact match, F1) per question on 0..1: the maximum over the question's references."""
    em, f1 = np.zeros(len(predictions)), np.zeros(len(predictions))
    for i, (prediction, answers) in enumerate(zip(predictions, references, strict=True)):
        scores = squad({"prediction_text": prediction, "id": str(i)},
                       {"answers": {"text": list(answers), "answer_start": [0] * len(answers)},
                        "id": str(i)})
        em[i], f1[i] = scores["exact_match"].item() / 100, scores["f1"].item() / 100
    return em, f1


def _percent(scores: np.ndarray) -> float:
    if len(scores) == 0:
        raise PlmbenchError("SQuAD scores of no questions: the eval split is empty; check the "
                            "task's eval splits and max_eval_samples")
    return float(100 * scores.mean())


@register_metric("f1", inputs="answers", whole_split=True)
def f1(predictions: Sequence[str], references: Sequence[Sequence[str]], match: str = "string",
       **_) -> float:
    """``evaluate-v1.1.py``'s F1 (0..100) of one answer per question (exact match:
    ``lit_models.metrics.exact_match``)."""
    if match != "string":
        raise PlmbenchError(f"metric f1 compares answer tokens, and {match} answers have none "
                            "(CuratedTREC's patterns): drop f1 from task.metrics")
    f1 = question_scores(predictions, references)[1]
    # v1.1's F1 is 0 without a common token, also when the prediction normalises to nothing
    # (v2.0, whose rule torchmetrics follows, scores an empty pair 1)
    f1[[not normalize_answer(p) for p in predictions]] = 0.0
    return _percent(f1)


def best_null_threshold(f1: np.ndarray, has_answer: np.ndarray, null_odds: np.ndarray,
                        abstains: np.ndarray) -> float:
    """The null-odds threshold that maximises the total F1 (``find_best_thresh``): questions in
    increasing null odds, each answered in turn, starting from "every question abstains".
    ``f1`` is the score of each question's non-null answer, ``abstains`` where that answer is
    the empty string anyway. Returns the odds above which a question abstains."""
    order = np.argsort(null_odds, kind="stable")
    gain = np.where(has_answer, f1, np.where(abstains, 0.0, -1.0))[order]
    totals = np.concatenate([[0.0], np.cumsum(gain)])  # answered: none, first 1, first 2, ...
    odds = np.asarray(null_odds)[order]
    cuts = np.ones(len(totals), dtype=bool)  # a threshold answers all of equal odds or none
    cuts[1:-1] = odds[1:] != odds[:-1]
    # the first maximum, as the script keeps strict improvements
    best = int(np.argmax(np.where(cuts, totals, -np.inf)))
    if best == 0:  # nothing answered: a threshold below every odds
        return float(null_odds[order[0]] - 1.0) if len(order) else 0.0
    return float(null_odds[order[best - 1]])


@register_metric("exact_match", "f1", "HasAns_exact_match", "HasAns_f1", "HasAns_total",
                 "NoAns_exact_match", "NoAns_f1", "NoAns_total", "null_threshold",
                 inputs="answers_with_null_odds", whole_split=True)
def squad_v2(predictions: Sequence[tuple[str, float]], references: Sequence[Sequence[str]], **_
             ) -> dict[str, float]:
    """``evaluate-v2.0.py`` at the best F1 threshold: metrics on 0..100 plus ``null_threshold``
    (``abstain`` gives the answers after it).

    ``predictions`` are (best non-null answer, null odds: the question's null score minus the best
    non-null score), ``references`` the answers as the data lists them (empty: unanswerable).
    """
    texts = [text for text, _ in predictions]
    _percent(np.ones(len(texts)))  # no questions: refused
    null_odds = np.array([odds for _, odds in predictions], dtype=float)
    answers, references = references, [v2_references(a) for a in references]
    # answerable: the data lists answers, even ones that normalise to nothing (as the script's
    # qid_to_has_ans reads them)
    has_answer = np.array([len(a) > 0 for a in answers], dtype=bool)
    _, f1 = question_scores(texts, references)
    abstains = np.array([not text for text in texts], dtype=bool)
    threshold = best_null_threshold(f1, has_answer, null_odds, abstains)
    em, f1 = question_scores(abstain(texts, null_odds, threshold), references)
    metrics = {"exact_match": _percent(em), "f1": _percent(f1)}
    for name, part in (("HasAns", has_answer), ("NoAns", ~has_answer)):
        metrics[f"{name}_total"] = float(part.sum())
        if part.any():
            metrics |= {f"{name}_exact_match": _percent(em[part]), f"{name}_f1": _percent(f1[part])}
    metrics["null_threshold"] = threshold
    return metrics


def abstain(texts: Sequence[str], null_odds: Sequence[float], threshold: float) -> list[str]:
    """The answers after abstaining: "" where the null odds exceed ``threshold``."""
    return [text if odds <= threshold else "" for text, odds in zip(texts, null_odds, strict=True)]
