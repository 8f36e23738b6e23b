"""SQuAD's exact match and F1, as the official evaluation scripts compute them.

Rajpurkar et al. 2016, §5 (v1.1, ``evaluate-v1.1.py``): a prediction and a reference are
normalised (lower case, punctuation and the articles a/an/the removed, whitespace collapsed);
exact match is their equality, F1 the harmonic mean of precision and recall of their bags of
tokens; a question scores the maximum over its references, the dataset the mean x 100.
Rajpurkar et al. 2018, §5 (v2.0, ``evaluate-v2.0.py``): an unanswerable question's only
reference is the empty answer (so predicting "" scores 1, anything else 0), references that
normalise to nothing are dropped; HasAns/NoAns are the means over answerable / unanswerable
questions; a system abstains when its null odds (null score - best non-null score, BERT's
§4.3 s_null vs. s_hat) exceed a threshold, chosen on the dev set to maximise F1 as the script's
``find_best_thresh`` does.

The per-question scores are torchmetrics' SQuAD metric on each question; the answer
normalisation is the scripts' (only used here to drop empty references, as v2.0 does).
"""

import re
import string
from collections.abc import Sequence

import numpy as np
from torchmetrics.functional.text import squad

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
    return float(100 * scores.mean()) if len(scores) else 0.0


def squad_v1(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """``evaluate-v1.1.py``: exact_match and f1 (0..100) of one prediction per question."""
    em, f1 = question_scores(predictions, references)
    return {"exact_match": _percent(em), "f1": _percent(f1)}


def best_null_threshold(f1: np.ndarray, has_answer: np.ndarray, null_odds: np.ndarray,
                        abstains: np.ndarray) -> float:
    """The null-odds threshold that maximises the total F1 (``find_best_thresh``): questions in
    increasing null odds, each answered in turn, starting from "every question abstains".
    ``f1`` is the score of each question's non-null answer, ``abstains`` where that answer is
    the empty string anyway. Returns the odds above which a question abstains."""
    order = np.argsort(null_odds, kind="stable")
    gain = np.where(has_answer, f1, np.where(abstains, 0.0, -1.0))[order]
    totals = np.concatenate([[0.0], np.cumsum(gain)])  # answered: none, first 1, first 2, ...
    best = int(np.argmax(totals))  # the first maximum, as the script keeps strict improvements
    if best == 0:  # nothing answered: a threshold below every odds
        return float(null_odds[order[0]] - 1.0) if len(order) else 0.0
    return float(null_odds[order[best - 1]])


def squad_v2(texts: Sequence[str], null_odds: np.ndarray, answers: Sequence[Sequence[str]]
             ) -> tuple[dict[str, float], list[str]]:
    """``evaluate-v2.0.py`` at the best F1 threshold: (metrics on 0..100 plus ``null_threshold``,
    the answers after abstaining: "" where null odds > threshold).

    ``texts`` are the best non-null answers, ``null_odds`` each question's null score minus the
    best non-null score, ``answers`` the references as the data lists them (empty: unanswerable).
    """
    references = [v2_references(a) for a in answers]
    has_answer = np.array([refs != [""] for refs in references])
    _, f1 = question_scores(texts, references)
    abstains = np.array([not text for text in texts])
    threshold = best_null_threshold(f1, has_answer, np.asarray(null_odds), abstains)
    final = [text if odds <= threshold else "" for text, odds in zip(texts, null_odds, strict=True)]
    em, f1 = question_scores(final, references)
    metrics = {"exact_match": _percent(em), "f1": _percent(f1)}
    for name, part in (("HasAns", has_answer), ("NoAns", ~has_answer)):
        metrics |= {f"{name}_exact_match": _percent(em[part]), f"{name}_f1": _percent(f1[part]),
                    f"{name}_total": float(part.sum())}
    metrics["null_threshold"] = threshold
    return metrics, final
