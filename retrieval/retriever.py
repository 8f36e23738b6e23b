"""The retriever interface shared by the dense (FAISS) and sparse (BM25) retrievers.

``Retriever.search(questions, k)`` gives ``Retrieved``: the corpus rows of the top k passages of
each question, best first, and their scores (inner products for the dense retriever, BM25
scores for the sparse one); ``describe()`` what a run records (retriever, index type, corpus
size, passages encoded per second, build time, index memory). ``DenseRetriever`` also exposes
what trainers of the question encoder need: ``encoder`` (the ``BiEncoder``), ``index`` (the
``DenseIndex``), ``passage_vectors(rows)`` (the indexed vectors of passages, fixed between
refreshes) and ``refresh()`` (re-embed the corpus with the current passage encoder and rebuild the
index: REALM's asynchronous refresh, Guu et al. 2020 §3.4, done synchronously every N steps;
it runs its own Lightning predict loop, so call it between training steps, e.g. from a
callback's ``on_train_batch_end``, not inside one).

``dense_retriever`` builds one, or loads it from ``$PLMBENCH_CACHE/indexes/`` where an index of
the same corpus, encoder and index settings was saved before.
"""

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets
import numpy as np
import torch

from datamodules.tokenization import cache_root
from lit_models.metrics.retrieval import throughput
from retrieval.bm25 import BM25Index
from retrieval.encode import encode_passages
from retrieval.encoders import BiEncoder
from retrieval.index import DenseIndex, IndexSettings, index_bytes
from retrieval.passages import corpus_fingerprint


@dataclass
class Retrieved:
    rows: np.ndarray  # int64 [Q, k] corpus rows, best first; -1 where the corpus has fewer
    scores: np.ndarray  # float32 [Q, k]
    seconds: float  # wall time of the search (question encoding included)

    @property
    def queries_per_s(self) -> float:
        return throughput(len(self.rows), self.seconds)


class Retriever:
    """Top-k passages of a corpus (a ``datasets.Dataset`` with id, title, text)."""

    name: str = ""
    corpus: datasets.Dataset

    def search(self, questions: Sequence[str], k: int) -> Retrieved:
        raise NotImplementedError

    def describe(self) -> dict:
        """retriever, index, corpus_size, passages_per_s, build_s, index_bytes."""
        raise NotImplementedError


class BM25Retriever(Retriever):
    name = "bm25"

    def __init__(self, corpus: datasets.Dataset, **settings) -> None:
        self.corpus = corpus
        start = time.perf_counter()
        titles, texts = corpus["title"], corpus["text"]
        self.index = BM25Index([f"{t} {x}" if t else x for t, x in zip(titles, texts,
                                                                        strict=True)], **settings)
        self.build_seconds = time.perf_counter() - start

    def search(self, questions: Sequence[str], k: int) -> Retrieved:
        start = time.perf_counter()
        rows, scores = self.index.search(questions, k)
        return Retrieved(rows, scores, time.perf_counter() - start)

    def describe(self) -> dict:
        return {"retriever": self.name, "index": "bm25s " + ",".join(
            f"{k}={v}" for k, v in self.index.settings.items()), "corpus_size": len(self.corpus),
            "passages_per_s": len(self.corpus) / max(self.build_seconds, 1e-9),
            "build_s": self.build_seconds, "index_bytes": None}


class DenseRetriever(Retriever):
    name = "dense"

    def __init__(self, corpus: datasets.Dataset, encoder: BiEncoder, index: DenseIndex,
                 passages_per_s: float | None = None, encode: Mapping | None = None) -> None:
        self.corpus, self.encoder, self.index = corpus, encoder, index
        self.passages_per_s = passages_per_s
        self.encode_settings = dict(encode or {})

    @classmethod
    def build(cls, corpus: datasets.Dataset, encoder: BiEncoder, settings: IndexSettings,
              encode: Mapping | None = None) -> "DenseRetriever":
        """Encode every passage (``encode``: ``encode_passages``'s batch_size, trainer,
        num_workers) and index the vectors."""
        retriever = cls(corpus, encoder, None, None, encode)  # type: ignore[arg-type]
        retriever.refresh(settings)
        return retriever

    def refresh(self, settings: IndexSettings | None = None) -> None:
        """Re-embed the corpus with the current passage encoder and rebuild the index."""
        settings = settings or self.index.settings
        vectors, self.passages_per_s = encode_passages(
            self.encoder, self.corpus["title"], self.corpus["text"], **self.encode_settings)
        self.index = DenseIndex.build(vectors, settings, self.encoder.fingerprint(),
                                      corpus_fingerprint(self.corpus))

    def passage_vectors(self, rows: np.ndarray) -> torch.Tensor:
        """The indexed vectors of corpus ``rows`` [...] -> [..., H] (reconstructed from the
        index: exact for Flat and HNSW, the quantised vector for PQ)."""
        flat = np.asarray(rows).reshape(-1)
        vectors = np.stack([self.index.index.reconstruct(int(r)) for r in flat]) if len(flat) \
            else np.zeros((0, self.index.index.d), dtype=np.float32)
        return torch.from_numpy(vectors).reshape(*np.shape(rows), -1)

    def search(self, questions: Sequence[str], k: int) -> Retrieved:
        start = time.perf_counter()
        vectors = self.encoder.question_vectors(questions).numpy()
        rows, scores = self.index.search(vectors, k)
        return Retrieved(rows, scores, time.perf_counter() - start)

    def describe(self) -> dict:
        return {"retriever": self.name, "index": self.index.settings.describe(),
                "corpus_size": len(self.corpus), "passages_per_s": self.passages_per_s,
                "build_s": self.index.build_seconds, "index_bytes": index_bytes(self.index.index)}


def index_path(corpus: datasets.Dataset, encoder: BiEncoder, settings: IndexSettings,
               root: Path | None = None) -> Path:
    """Where the index of (corpus, encoder, settings) is cached."""
    key = [corpus_fingerprint(corpus), encoder.fingerprint(), asdict(settings)]
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return (root or cache_root() / "indexes") / f"{name}.faiss"


def dense_retriever(corpus: datasets.Dataset, encoder: BiEncoder, settings: IndexSettings,
                    encode: Mapping | None = None, cache: bool = True,
                    mmap: bool = False) -> DenseRetriever:
    """A dense retriever over ``corpus``: its cached index when one was saved (the encoder's
    and corpus's fingerprints checked), else encoded, indexed and (``cache``) saved."""
    path = index_path(corpus, encoder, settings)
    if cache and path.is_file():
        index = DenseIndex.load(path, encoder.fingerprint(), corpus_fingerprint(corpus), mmap)
        return DenseRetriever(corpus, encoder, index, index.meta.get("passages_per_s"), encode)
    retriever = DenseRetriever.build(corpus, encoder, settings, encode)
    if cache:
        retriever.index.meta["passages_per_s"] = retriever.passages_per_s
        retriever.index.save(path)
    return retriever
