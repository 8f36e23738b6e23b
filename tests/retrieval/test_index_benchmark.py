"""The index benchmark (``-m benchmark``; minutes on a CPU, and the first run encodes the capped
SQuAD-open corpus with MiniLM, ~40 minutes on 2 busy cores): on real all-MiniLM-L6-v2 vectors
of the Wikipedia-sample passages HNSW32 finds >= 0.95 of the exact top 10; at ~100k passages (the
real vectors and jittered copies) it answers >= 10 times as many queries per second as the
exact index at that recall; IVF-PQ's recall and memory are measured beside it."""

import pytest

from bench.perf_index import markdown, run


@pytest.mark.benchmark
def test_hnsw_recall_and_speed_against_flat(mirror, capsys):
    real = run(2000, 2000, 10, [("HNSW32", "efSearch=64")], batch_size=64, threads=1)
    assert real[1].recall >= 0.95
    scaled = run(2000, 2000, 10, [("HNSW32", "efSearch=128"), ("IVF256,PQ96", "nprobe=16")],
                 batch_size=64, threads=1, copies=16, train_size=20_000)
    with capsys.disabled():
        print("\n" + markdown(real + scaled, 10))
    flat, hnsw, ivfpq = scaled
    assert hnsw.recall >= 0.95 and hnsw.speedup >= 10
    assert ivfpq.bytes < flat.bytes / 10
