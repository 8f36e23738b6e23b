"""BM25 through bm25s against the formula computed by hand on three documents."""

import math

import numpy as np
import pytest

from retrieval.bm25 import BM25Index

DOCS = ["paris capital france", "berlin capital germany city", "river seine flows paris city"]


def lucene_bm25(query: list[str], docs: list[list[str]], k1: float, b: float) -> np.ndarray:
    """Robertson & Zaragoza's BM25 as Lucene (>= 8) computes it, written out: Lucene's IDF and
    no (k1 + 1) factor in the numerator (it scales every score alike)."""
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    scores = np.zeros(n)
    for term in query:
        df = sum(term in d for d in docs)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            f = d.count(term)
            scores[i] += idf * f / (f + k1 * (1 - b + b * len(d) / avgdl))
    return scores


@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.5, 0.75)])
def test_scores_equal_the_formula(k1, b):
    index = BM25Index(DOCS, k1=k1, b=b)
    rows, scores = index.search(["paris city", "capital"], k=3)
    for q, query in enumerate([["paris", "city"], ["capital"]]):
        expected = lucene_bm25(query, [d.split() for d in DOCS], k1, b)
        assert scores[q] == pytest.approx(np.sort(expected)[::-1], rel=1e-5)
        assert expected[rows[q][0]] == pytest.approx(expected.max(), rel=1e-5)


def test_obvious_top1_and_short_corpus():
    rows, scores = BM25Index(DOCS).search(["seine river"], k=5)
    assert rows[0, 0] == 2 and rows.shape == (1, 5)
    assert rows[0, 3:].tolist() == [-1, -1] and np.isneginf(scores[0, 3:]).all()
