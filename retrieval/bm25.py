"""BM25, the sparse baseline, through ``bm25s`` (Lù 2024).

Robertson & Zaragoza 2009, eq. 3.1 (Okapi BM25): a passage D scores a query Q as
sum over query terms t of IDF(t) · f(t, D) (k1 + 1) / (f(t, D) + k1 (1 - b + b |D| / avgdl)),
f the term's count in D, |D| the passage length in terms, avgdl the mean length; ``method``
picks bm25s's variant (``lucene``: Lucene's IDF, log(1 + (N - df + 0.5) / (df + 0.5)), and, as
Lucene 8+, no (k1 + 1) factor, which scales every score alike: the ranking of Anserini's BM25,
DPR's Table 2 baseline). Terms: lower-cased words of two or more
characters, English stop words removed, optionally Porter-stemmed (``stemmer: porter``, NLTK's;
Anserini stems). DPR's BM25 used k1 = 0.9, b = 0.4 (Karpukhin et al. 2020, §5.1 via Anserini's
defaults); bm25s's defaults are 1.5 and 0.75.
"""

import hashlib
import json
from collections.abc import Sequence

import bm25s
import numpy as np

from datamodules.errors import PlmbenchError

STEMMERS = (None, "porter")


def _stemmer(name: str | None):
    if name not in STEMMERS:
        raise PlmbenchError(f"bm25 stemmer {name!r} is unknown; use one of {STEMMERS}")
    if name is None:
        return None
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer().stem


class BM25Index:
    """A bm25s index of passage texts (row i = passage i)."""

    def __init__(self, texts: Sequence[str], k1: float = 0.9, b: float = 0.4,
                 method: str = "lucene", stemmer: str | None = None) -> None:
        self.settings = {"k1": k1, "b": b, "method": method, "stemmer": stemmer}
        self.stem = _stemmer(stemmer)
        self.model = bm25s.BM25(k1=k1, b=b, method=method)
        self.size = len(texts)
        self.model.index(self._tokens(texts), show_progress=False)

    def _tokens(self, texts: Sequence[str]):
        return bm25s.tokenize(list(texts), stopwords="en", stemmer=self.stem,
                              show_progress=False)

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.settings).encode()).hexdigest()[:16]

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows int64 [Q, k], scores float32 [Q, k]), best first; -1 rows past the corpus."""
        tokens = bm25s.tokenize(list(queries), stopwords="en", stemmer=self.stem,
                                return_ids=False, show_progress=False)
        kept = min(k, self.size)
        rows, scores = self.model.retrieve(tokens, k=kept, show_progress=False)
        rows, scores = np.asarray(rows, dtype=np.int64), np.asarray(scores, dtype=np.float32)
        if kept < k:
            rows = np.pad(rows, ((0, 0), (0, k - kept)), constant_values=-1)
            scores = np.pad(scores, ((0, 0), (0, k - kept)), constant_values=-np.inf)
        return rows, scores
