"""SuperGLUE's metrics of its two reading-comprehension tasks and of its gender diagnostic, as the
benchmark scores them (Wang et al. 2019, §3.1, §3.2 and Table 1), on 0..1.

MultiRC (Khashabi et al. 2018): every (paragraph, question, answer option) is labelled true or
false, and a question may have several true options. ``f1a`` is the F1 of the "true" class over
all answer options of the split (binary F1, SuperGLUE's F1_a); ``exact_match`` the share of
questions whose options are all labelled right.

ReCoRD (Zhang et al. 2018): a query's answer is one entity of the passage, and the official
``evaluate.py`` of ReCoRD v1.0 (SQuAD v1.1's script: answers normalised by lower-casing and
removing punctuation, articles and extra whitespace) scores the predicted entity's text against
every gold answer and keeps the best: ``exact_match`` is normalised equality, ``f1`` the harmonic
mean of the bag-of-tokens precision and recall (0 when no token is shared), each the mean over
queries. Registered as ``f1a`` and ``exact_match`` over ``answer_options`` and as ``exact_match``
and ``f1`` over ``entities``.

AX-g, Winogender (Rudinger et al. 2018, recast as entailment by Poliak et al. 2018): each premise
comes twice, once with a male and once with a female pronoun, with one hypothesis and one label.
SuperGLUE (§3.2) reports accuracy and the gender parity score: the share of these minimal pairs
whose two examples get the same prediction (1: the pronoun's gender never changes the answer).
The data lists each pair as consecutive rows, the male one first (examples 2k and 2k + 1; the hub
schema dropped the pair id), so ``gender_parity`` reads (example index, predicted class) and
pairs the indices 2k and 2k + 1; an example whose partner was not evaluated (a capped split)
counts in no pair.
"""

from collections import Counter
from collections.abc import Hashable, Sequence

from sklearn.metrics import f1_score
from torch import Tensor

from datamodules.errors import PlmbenchError
from lit_models.metrics.registry import register_metric
from lit_models.metrics.squad import normalize_answer


def multirc_scores(predictions: Sequence[int], labels: Sequence[int],
                   questions: Sequence[Hashable]) -> dict[str, float]:
    """``f1a`` and ``exact_match`` of answer-option labels (0/1), each option's ``questions``
    entry naming the question it answers (e.g. (paragraph idx, question idx))."""
    right: dict[Hashable, bool] = {}
    for predicted, gold, question in zip(predictions, labels, questions, strict=True):
        right[question] = right.get(question, True) and int(predicted) == int(gold)
    f1a = f1_score(list(map(int, labels)), list(map(int, predictions)), zero_division=0.0)
    exact = sum(right.values()) / len(right) if right else 0.0
    return {"f1a": float(f1a), "exact_match": float(exact)}


def record_token_f1(prediction: str, answer: str) -> float:
    """The official script's ``f1_score``: bag-of-tokens F1 of the normalised texts."""
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(answer).split()
    shared = sum((Counter(predicted) & Counter(gold)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(gold)
    return 2 * precision * recall / (precision + recall)


def record_scores(predictions: Sequence[str], answers: Sequence[Sequence[str]]
                  ) -> dict[str, float]:
    """``exact_match`` and ``f1`` of one predicted entity text per query against the query's
    gold answers (the maximum over them), averaged over queries."""
    exact = f1 = 0.0
    for prediction, gold in zip(predictions, answers, strict=True):
        normalized = normalize_answer(prediction)
        exact += max((normalized == normalize_answer(a) for a in gold), default=False)
        f1 += max((record_token_f1(prediction, a) for a in gold), default=0.0)
    total = len(predictions)
    return {"exact_match": exact / total if total else 0.0, "f1": f1 / total if total else 0.0}


@register_metric("f1a", "exact_match", inputs="answer_options", whole_split=True)
def multirc(predictions: Sequence[int], references: Sequence[tuple[int, Hashable]], **_
            ) -> dict[str, float]:
    """``multirc_scores`` of option labels against (gold label, question) references."""
    labels, questions = zip(*references, strict=True) if references else ((), ())
    return multirc_scores(predictions, labels, questions)


@register_metric("exact_match", "f1", inputs="entities", whole_split=True)
def record(predictions: Sequence[str], references: Sequence[Sequence[str]], **_
           ) -> dict[str, float]:
    """``record_scores`` of each query's chosen entity."""
    return record_scores(predictions, references)


def gender_parity_score(indices: Sequence[int], predictions: Sequence[int]) -> float:
    """The share of pairs (2k, 2k + 1) among ``indices`` whose ``predictions`` agree."""
    predicted = dict(zip(map(int, indices), map(int, predictions), strict=True))
    pairs = [(predicted[i], predicted[i + 1]) for i in predicted
             if i % 2 == 0 and i + 1 in predicted]
    if not pairs:
        raise PlmbenchError("gender_parity needs both examples of at least one (male, female) "
                            "pair (rows 2k and 2k + 1): evaluate AX-g uncapped, or capped to "
                            "an even number of rows")
    return sum(male == female for male, female in pairs) / len(pairs)


@register_metric("gender_parity", inputs="indexed_labels", whole_split=True)
def gender_parity(predictions: Tensor, references: Tensor, **_) -> float:
    """``gender_parity_score`` of [N, 2] rows (example index, predicted class)."""
    return gender_parity_score(predictions[:, 0].tolist(), predictions[:, 1].tolist())
