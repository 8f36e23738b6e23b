"""SuperGLUE's MultiRC and ReCoRD metrics and the binary AUROC, against computations written here
independently: counts by hand (MultiRC's F1_a and exact match, as the SuperGLUE paper defines
them), the ReCoRD v1.0 evaluation logic (SQuAD v1.1's normalisation and token F1, maximum over
gold answers) and scikit-learn's ``roc_auc_score`` / ``f1_score``, on degenerate inputs too."""

import math
import random
import re
import string

import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

from datamodules.errors import PlmbenchError
from lit_models.metrics.classification import (
    class_probabilities,
    hard_probabilities,
    label_metrics,
    label_predictions,
)
from lit_models.metrics.superglue import multirc_scores, record_scores


def hand_multirc(predictions, labels, questions):
    tp = sum(p == 1 and g == 1 for p, g in zip(predictions, labels, strict=True))
    fp = sum(p == 1 and g == 0 for p, g in zip(predictions, labels, strict=True))
    fn = sum(p == 0 and g == 1 for p, g in zip(predictions, labels, strict=True))
    f1a = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    groups = {}
    for p, g, q in zip(predictions, labels, questions, strict=True):
        groups.setdefault(q, []).append(p == g)
    return {"f1a": f1a, "exact_match": sum(all(v) for v in groups.values()) / len(groups)}


@pytest.mark.parametrize("seed", range(4))
def test_multirc_matches_the_counts(seed):
    rng = random.Random(seed)
    questions = [(p, q) for p in range(6) for q in range(rng.randint(1, 3))
                 for _ in range(rng.randint(1, 5))]
    labels = [rng.randint(0, 1) for _ in questions]
    predictions = [g if rng.random() < 0.7 else 1 - g for g in labels]
    got = multirc_scores(predictions, labels, questions)
    assert got == pytest.approx(hand_multirc(predictions, labels, questions))


def test_multirc_degenerate_predictions():
    """All false: no true positive, F1_a 0; a question whose options are all false is exactly
    right. All right: both 1."""
    labels, questions = [0, 0, 1, 0], [(0, 0), (0, 0), (0, 1), (0, 1)]
    assert multirc_scores([0, 0, 0, 0], labels, questions) == {"f1a": 0.0, "exact_match": 0.5}
    assert multirc_scores(labels, labels, questions) == {"f1a": 1.0, "exact_match": 1.0}


def normalize(s):
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def token_f1(prediction, gold):
    p, g = normalize(prediction).split(), normalize(gold).split()
    same = sum(min(p.count(t), g.count(t)) for t in set(p))
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def official_record(predictions, answers):
    em = sum(max(float(normalize(p) == normalize(a)) for a in gold)
             for p, gold in zip(predictions, answers, strict=True))
    f1 = sum(max(token_f1(p, a) for a in gold)
             for p, gold in zip(predictions, answers, strict=True))
    return {"exact_match": em / len(predictions), "f1": f1 / len(predictions)}


def test_record_matches_the_official_logic():
    predictions = ["Barack Obama", "the White House", "Obama", "Paris, France", "The", "U.S."]
    answers = [["Obama", "Barack Obama"], ["White House"], ["Barack Obama"], ["France"],
               ["The"], ["US", "United States"]]
    got = record_scores(predictions, answers)
    assert got == pytest.approx(official_record(predictions, answers))
    # "The" normalises to nothing: exact, yet no token shared, so F1 0 as the script scores it
    assert record_scores(["The"], [["the"]]) == {"exact_match": 1.0, "f1": 0.0}
    assert record_scores(["White House"], [["the White House!"]]) == {"exact_match": 1.0,
                                                                     "f1": 1.0}


def test_auroc_and_f1_match_scikit_learn_on_probabilities_with_ties():
    g = torch.Generator().manual_seed(3)
    target = torch.randint(0, 2, (200,), generator=g)
    logits = torch.randn(200, 2, generator=g) + target[:, None] * torch.tensor([0.0, 0.8])
    logits[:20] = 0.0  # ties at p = 0.5: class 0, as argmax reads them
    probabilities = class_probabilities(logits, 2)
    metrics = label_metrics(["auroc", "f1", "accuracy"], 2)
    for p, t in zip(probabilities.split(37), target.split(37), strict=True):
        metrics.update(t, **label_predictions(p, 2))
    got = metrics.compute()
    predicted = logits.argmax(-1).numpy()
    assert got["auroc"] == pytest.approx(roc_auc_score(target.numpy(), probabilities.numpy()),
                                         abs=1e-6)
    assert got["f1"] == pytest.approx(f1_score(target.numpy(), predicted), abs=1e-6)
    assert got["accuracy"] == pytest.approx(accuracy_score(target.numpy(), predicted), abs=1e-6)


def test_auroc_of_a_constant_predictor_is_one_half_and_needs_two_labels():
    target = torch.tensor([0, 1, 1, 0, 1])
    metrics = label_metrics(["auroc"], 2)
    majority = hard_probabilities(torch.zeros(5, dtype=torch.long), 2)  # a majority baseline
    metrics.update(target, **label_predictions(majority, 2))
    assert metrics.compute()["auroc"] == pytest.approx(0.5)
    with pytest.raises(PlmbenchError, match="auroc.*binary"):
        label_metrics(["auroc"], 3)


def test_auroc_of_one_class_is_undefined_as_scikit_learn_says():
    metrics = label_metrics(["auroc"], 2)
    metrics.update(torch.tensor([0, 0]), **label_predictions(torch.tensor([0.2, 0.9]), 2))
    assert math.isnan(metrics.compute()["auroc"])
    with pytest.warns(UserWarning, match="Only one class"):
        assert math.isnan(roc_auc_score([0, 0], [0.2, 0.9]))
