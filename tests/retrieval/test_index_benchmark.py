"""The index benchmark (``-m benchmark``; ~15 minutes on 2 cores, and the first run encodes the
capped SQuAD-open corpus with MiniLM, ~40 minutes more): on the real all-MiniLM-L6-v2 vectors of
the Wikipedia-sample passages HNSW32 finds >= 0.95 of the exact top 10; at ~100k passages (the
real vectors and jittered copies, ``bench.perf.index --replicate``) it does so answering queries
one at a time >= 10 times as fast as the exact index. docs/retrieval.md has the figures."""

import pytest

from bench.perf.index import markdown, run


@pytest.mark.benchmark
def test_hnsw_recall_and_speed_against_flat(mirror, capsys):
    real = run(2000, 2000, 10, [("HNSW32", "efSearch=64")], batch_size=64, threads=1)
    scaled = run(2000, 2000, 10, [("HNSW32", "efSearch=128")], batch_size=64, threads=1,
                 copies=16)
    with capsys.disabled():
        print("\n" + markdown(real + scaled, 10))
    assert real[1].recall >= 0.95
    flat, hnsw = scaled
    assert hnsw.recall >= 0.95 and hnsw.single_speedup >= 10
