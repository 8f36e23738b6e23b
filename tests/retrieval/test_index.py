"""FAISS indexes: exact search equals a numpy inner product, a saved index loads (read or
memory-mapped) to identical results, a corrupt or mismatched one is refused in one line."""

import numpy as np
import pytest

from datamodules.errors import PlmbenchError
from retrieval.index import DenseIndex, IndexSettings

RNG = np.random.default_rng(0)
VECTORS = RNG.standard_normal((600, 16)).astype(np.float32)
QUERIES = RNG.standard_normal((20, 16)).astype(np.float32)


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_flat_is_exact_inner_product():
    index = DenseIndex.build(VECTORS, IndexSettings("Flat"), "enc", "corpus")
    rows, scores = index.search(QUERIES, 5)
    exact = QUERIES @ VECTORS.T
    assert rows.tolist() == np.argsort(-exact, axis=1)[:, :5].tolist()
    assert scores == pytest.approx(np.sort(exact, axis=1)[:, ::-1][:, :5], rel=1e-5)


@pytest.mark.parametrize(("factory", "params"), [("Flat", ""), ("HNSW32", "efSearch=64"),
                                                 ("IVF4,PQ4", "nprobe=2")])
@pytest.mark.parametrize("mmap", [False, True])
def test_saved_index_loads_to_identical_results(tmp_path, factory, params, mmap):
    settings = IndexSettings(factory, params, ef_construction=40, train_size=600)
    index = DenseIndex.build(VECTORS, settings, "enc", "corpus")
    path = index.save(tmp_path / "passages.faiss")
    loaded = DenseIndex.load(path, "enc", "corpus", mmap=mmap)
    assert loaded.settings == settings
    for got, want in zip(loaded.search(QUERIES, 10), index.search(QUERIES, 10), strict=True):
        np.testing.assert_array_equal(got, want)


def test_mismatched_fingerprints_are_refused(tmp_path):
    path = DenseIndex.build(VECTORS, IndexSettings(), "enc", "corpus").save(tmp_path / "i.faiss")
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.load(path, "other-encoder", "corpus")
    assert "another encoder" in one_line(err)
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.load(path, "enc", "other-corpus")
    assert "another corpus" in one_line(err)


def test_corrupt_files_are_refused(tmp_path):
    path = DenseIndex.build(VECTORS, IndexSettings(), "enc", "corpus").save(tmp_path / "i.faiss")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte among the vectors
    path.write_bytes(bytes(data))
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.load(path, "enc", "corpus")
    assert "corrupt" in one_line(err)
    path.write_bytes(b"garbage" * (len(data) // 7) + b"g" * (len(data) % 7))  # same size
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.load(path, "enc", "corpus", mmap=True)
    assert "corrupt" in one_line(err)
    path.write_bytes(b"short")
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.load(path, "enc", "corpus")
    assert "not the size" in one_line(err)
    path.with_name("i.faiss.json").write_text("{not json")
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.load(path)
    assert "corrupt" in one_line(err)


def test_bad_settings_are_one_line():
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.build(VECTORS, IndexSettings("NoSuchIndex"), "e", "c")
    assert "factory" in one_line(err)
    with pytest.raises(PlmbenchError) as err:
        DenseIndex.build(VECTORS[:100], IndexSettings("IVF64,PQ4"), "e", "c")
    assert "training vectors" in one_line(err)
