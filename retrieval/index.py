"""FAISS indexes of passage vectors, chosen by a factory string, saved with what they were built
from.

Johnson et al. 2019 (FAISS). The index scores by inner product (DPR's sim(q, p) = E_Q(q)ᵀE_P(p),
Karpukhin et al. 2020 eq. 1) and is one of FAISS's ``index_factory`` strings:
- ``Flat``: exact maximum inner product search, a scan of every vector (DPR's "exact" index);
- ``HNSW32``: a hierarchical navigable small-world graph (Malkov & Yashunin 2018), 32 links a
  node, built with ``ef_construction`` candidates and searched with ``efSearch`` (the
  ``search_params``): approximate, sublinear;
- ``IVF<n>,PQ<m>``: an inverted file of n k-means cells, each vector product-quantised into m
  sub-vector codes of 8 bits (Jégou et al. 2011); searched over ``nprobe`` cells. Both parts are
  trained on a random sample of ``train_size`` vectors (FAISS wants ~39 per cell).
``search_params`` is a FAISS ``ParameterSpace`` string ("efSearch=128", "nprobe=16").

``save`` writes ``<path>`` (FAISS's own format) and ``<path>.json`` (the factory, the vector
size and count, the file's size, the fingerprints of the encoder and the corpus); ``load``
refuses, in one line, a missing or corrupt file and an index built from another encoder or
corpus, and can memory-map the vectors (``mmap=True``, FAISS's IO_FLAG_MMAP) so a 21M-passage
index is paged in as searched rather than read whole. A loaded file's SHA-256 must be the one it
was written with (skipped when memory-mapping, which would read it whole; the size is checked).
"""

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_path, atomic_write_text


@dataclass(frozen=True)
class IndexSettings:
    factory: str = "Flat"  # a faiss.index_factory string: Flat | HNSW32 | IVF<n>,PQ<m> ...
    search_params: str = ""  # faiss ParameterSpace string, e.g. "efSearch=128" or "nprobe=16"
    ef_construction: int = 200  # HNSW: candidates kept while linking a node (FAISS: 40)
    train_size: int = 100_000  # IVF/PQ: vectors sampled to train the cells and codebooks
    seed: int = 0  # the training sample's draw

    def describe(self) -> str:
        return self.factory + (f" ({self.search_params})" if self.search_params else "")


def _train_sample(vectors: np.ndarray, size: int, seed: int) -> np.ndarray:
    if len(vectors) <= size:
        return vectors
    rows = np.random.default_rng(seed).choice(len(vectors), size, replace=False)
    return vectors[np.sort(rows)]


def empty_index(dim: int, settings: IndexSettings) -> faiss.Index:
    """An untrained, empty inner-product index of the factory string."""
    try:
        index = faiss.index_factory(dim, settings.factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise PlmbenchError(f"index factory {settings.factory!r} is not one FAISS knows "
                            f"({str(err).strip().splitlines()[-1]}); use Flat, HNSW32 or "
                            "IVF<n>,PQ<m>") from None
    inner = faiss.downcast_index(index)
    if hasattr(inner, "hnsw"):
        inner.hnsw.efConstruction = settings.ef_construction
    return index


def train(index: faiss.Index, vectors: np.ndarray, settings: IndexSettings) -> None:
    """Train IVF cells / PQ codebooks on a random sample of ``train_size`` vectors (no-op for
    indexes that need no training)."""
    if index.is_trained:
        return
    sample = _train_sample(vectors, settings.train_size, settings.seed)
    cells = getattr(faiss.extract_index_ivf(index), "nlist", 0) if "IVF" in settings.factory \
        else 0
    if len(sample) < max(cells, 256):
        raise PlmbenchError(
            f"index {settings.factory} needs at least {max(cells, 256)} training vectors "
            f"(cells and 8-bit codebooks) and the corpus has {len(sample)}; use fewer cells "
            "or a Flat/HNSW index for a corpus this small")
    index.train(sample)


def build_faiss(vectors: np.ndarray, settings: IndexSettings) -> faiss.Index:
    """An inner-product index of ``vectors`` [N, d] (float32), trained where it needs it."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = empty_index(vectors.shape[1], settings)
    train(index, vectors, settings)
    index.add(vectors)
    set_search_params(index, settings.search_params)
    return index


def set_search_params(index: faiss.Index, params: str) -> None:
    if params:
        try:
            faiss.ParameterSpace().set_index_parameters(index, params)
        except RuntimeError as err:
            raise PlmbenchError(f"search_params {params!r} do not fit this index "
                                f"({str(err).strip().splitlines()[-1]}); use efSearch=N for "
                                "HNSW, nprobe=N for IVF") from None


def index_bytes(index: faiss.Index) -> int:
    """The index's size as FAISS serialises it (its vectors or codes, graph and lists)."""
    return int(faiss.serialize_index(index).nbytes)


@dataclass
class DenseIndex:
    """A FAISS index of a corpus's passage vectors (row i = passage i)."""

    index: faiss.Index
    settings: IndexSettings
    encoder_fingerprint: str
    corpus_fingerprint: str
    build_seconds: float = 0.0
    meta: dict = field(default_factory=dict)

    @classmethod
    def build(cls, vectors: np.ndarray, settings: IndexSettings, encoder_fingerprint: str,
              corpus_fingerprint: str) -> "DenseIndex":
        start = time.perf_counter()
        index = build_faiss(vectors, settings)
        return cls(index, settings, encoder_fingerprint, corpus_fingerprint,
                   time.perf_counter() - start)

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows int64 [Q, k], scores float32 [Q, k]), best first; -1 rows past the corpus."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        scores, rows = self.index.search(vectors, min(k, self.size))
        if rows.shape[1] < k:
            pad = k - rows.shape[1]
            rows = np.pad(rows, ((0, 0), (0, pad)), constant_values=-1)
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
        return rows.astype(np.int64), scores.astype(np.float32)

    def save(self, path: str | Path) -> Path:
        """``path`` and ``path``.json, each written to a temporary name and renamed."""
        path = Path(path)
        with atomic_path(path) as partial:
            faiss.write_index(self.index, str(partial))
            meta = {**self.meta, "factory": self.settings.factory,
                    "search_params": self.settings.search_params,
                    "ef_construction": self.settings.ef_construction,
                    "train_size": self.settings.train_size, "seed": self.settings.seed,
                    "dim": int(self.index.d), "ntotal": self.size,
                    "bytes": partial.stat().st_size, "sha256": file_digest(partial),
                    "encoder": self.encoder_fingerprint, "corpus": self.corpus_fingerprint,
                    "build_seconds": self.build_seconds}
        atomic_write_text(_meta_path(path), strict_json.dumps(meta, indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path, encoder_fingerprint: str | None = None,
             corpus_fingerprint: str | None = None, mmap: bool = False) -> "DenseIndex":
        """The index at ``path``; the fingerprints given must be those it was built with."""
        path = Path(path)
        fix = f"delete {path} and its .json to rebuild it"
        try:
            meta = json.loads(_meta_path(path).read_text())
            settings = IndexSettings(**{k: meta[k] for k in (
                "factory", "search_params", "ef_construction", "train_size", "seed")})
            expected = (meta["dim"], meta["ntotal"], meta["bytes"])
        except FileNotFoundError:
            raise PlmbenchError(f"index {path} has no {_meta_path(path).name} beside it; "
                                f"{fix}") from None
        except (ValueError, KeyError, TypeError) as err:
            raise PlmbenchError(f"index description {_meta_path(path)} is corrupt "
                                f"({type(err).__name__}); {fix}") from None
        for what, wanted, found in (("encoder", encoder_fingerprint, meta["encoder"]),
                                    ("corpus", corpus_fingerprint, meta["corpus"])):
            if wanted is not None and wanted != found:
                raise PlmbenchError(
                    f"index {path} was built with another {what} (fingerprint {found}, this run's "
                    f"{wanted}); point the run at the index of this {what}, or {fix}")
        if not path.is_file() or path.stat().st_size != meta["bytes"]:
            raise PlmbenchError(f"index file {path} is missing or not the size it was written "
                                f"with ({meta['bytes']} bytes); {fix}")
        if not mmap and file_digest(path) != meta.get("sha256"):
            raise PlmbenchError(f"index file {path} is corrupt (its checksum is not the one it "
                                f"was written with); {fix}")
        try:
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP if mmap else 0)
        except RuntimeError as err:
            raise PlmbenchError(f"index file {path} is corrupt "
                                f"({str(err).strip().splitlines()[-1][:120]}); {fix}") from None
        if (index.d, index.ntotal) != expected[:2]:
            raise PlmbenchError(f"index file {path} holds {index.ntotal} vectors of size "
                                f"{index.d}, its description {expected[1]} of {expected[0]}; {fix}")
        set_search_params(index, settings.search_params)
        return cls(index, settings, meta["encoder"], meta["corpus"], meta["build_seconds"], meta)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")
