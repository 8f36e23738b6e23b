"""Our ROUGE against values worked out by hand from the definitions (Lin 2004): n-gram overlap,
LCS, the summary-level union LCS over newline-split sentences, and Porter stemming."""

import pytest

from lit_models.metrics.rouge import Rouge


def f1(hits: int, predicted: int, reference: int) -> float:
    p, r = hits / predicted, hits / reference
    return 0.0 if hits == 0 else 2 * p * r / (p + r)


def test_rouge_matches_hand_computed_values():
    rouge = Rouge()
    # pair 1: 6 vs 6 tokens; 5 common unigrams; bigrams "the cat", "on the", "the mat" shared;
    # LCS "the cat on the mat" = 5
    rouge.update(["The cat sat on the mat."], ["the cat is on the mat"])
    # pair 2: stemming makes "running dogs" = "run dog"; 2 sentences each (newlines):
    # candidate [a b c] [d e], reference [a b] [c d e]
    rouge.update(["Running dogs\na b c\nd e"], ["run dog\na b\nc d e z"])
    scores = rouge.compute()
    # pair 2 tokens: candidate run dog a b c d e (7), reference run dog a b c d e z (8)
    one = (f1(5, 6, 6) + f1(7, 7, 8)) / 2
    # bigrams: candidate 6 (run dog, dog a, a b, b c, c d, d e), reference 7: all 6 shared
    two = (f1(3, 5, 5) + f1(6, 6, 7)) / 2
    lcs = (f1(5, 6, 6) + f1(7, 7, 8)) / 2
    # Lsum pair 2: reference sentences vs the union of LCS with all candidate sentences:
    # [run dog] -> 2, [a b] -> 2, [c d e z] -> c (from [a b c]) and d e (from [d e]) = 3;
    # 7 hits of 7 candidate and 8 reference tokens; pair 1 is one sentence: its LCS
    lsum = (f1(5, 6, 6) + f1(7, 7, 8)) / 2
    expected = {"rouge1": one, "rouge2": two, "rougeL": lcs, "rougeLsum": lsum}
    for key, value in expected.items():
        assert float(scores[key]) == pytest.approx(value, abs=1e-6), key


def test_sentence_order_matters_for_rouge_l_not_for_lsum():
    rouge = Rouge()
    rouge.update(["d e f\na b c"], ["a b c\nd e f"])
    scores = rouge.compute()
    assert float(scores["rougeLsum"]) == pytest.approx(1.0)
    assert float(scores["rougeL"]) == pytest.approx(0.5)  # LCS 3 of 6
    rouge.reset()
    rouge.update(["", "x"], ["a b", "y"])  # empty and disjoint predictions score 0
    assert all(float(v) == 0.0 for v in rouge.compute().values())
