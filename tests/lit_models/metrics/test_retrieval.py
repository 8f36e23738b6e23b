"""DPR's has_answer and the retrieval metrics against hand computation."""

import numpy as np
import pytest

from lit_models.metrics.retrieval import answer_hits, has_answer, retrieval_metrics


def test_has_answer_matches_token_sequences_uncased():
    text = "The Denver Broncos beat the Carolina Panthers 24–10 in Super Bowl 50."
    assert has_answer(text, ["denver broncos"])
    assert has_answer(text, ["24–10"])
    assert not has_answer(text, ["Denver Bronco"])  # a token prefix is no match
    assert not has_answer(text, ["Broncos Denver"])
    assert has_answer("Café au lait", ["cafe\u0301"])  # NFD on both sides


def test_regex_answers_are_searched():
    assert has_answer("It was founded in 1887 by him.", [r"18[0-9]{2}"], match="regex")
    assert not has_answer("founded in 1987", [r"^18[0-9]{2}"], match="regex")
    assert not has_answer("anything", ["(unclosed"], match="regex")


def test_recall_and_mrr_equal_hand_computation():
    hits = np.array([[False, True, False, False],   # first answer at rank 2
                     [True, False, True, False],    # rank 1
                     [False, False, False, False],  # none
                     [False, False, False, True]])  # rank 4
    metrics = retrieval_metrics(hits, recall_at=(1, 2, 4, 20))
    assert metrics["recall@1"] == pytest.approx(100 * 1 / 4)
    assert metrics["recall@2"] == pytest.approx(100 * 2 / 4)
    assert metrics["recall@4"] == pytest.approx(100 * 3 / 4)
    assert metrics["recall@20"] == metrics["recall@4"]  # deeper than the lists: all of them
    assert metrics["mrr"] == pytest.approx(100 * (1 / 2 + 1 + 0 + 1 / 4) / 4)


def test_answer_hits_pads_short_lists():
    hits = answer_hits([["paris is big"], []], [["Paris"], ["x"]], k=3)
    assert hits.tolist() == [[True, False, False], [False, False, False]]
