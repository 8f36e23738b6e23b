"""Resolving a split: Parquet mirror, then the hub (never probed offline), else one line."""

import hashlib
import json
import socket
import threading
import time
from operator import itemgetter

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datamodules import sources
from datamodules.errors import PlmbenchError
from datamodules.sources import (
    hub_unreachable_reason,
    list_mirror,
    load_split,
    mirror_dataset,
    mirror_path,
)

RTE_COLUMNS = ["sentence1", "sentence2", "label"]


@pytest.fixture
def temp_mirror(monkeypatch, tmp_path, datasets_cache):
    root = tmp_path / "mirror"
    root.mkdir()
    monkeypatch.setenv("PLMBENCH_DATA", str(root))
    return root


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if anything opens a socket to the hub or calls datasets.load_dataset."""
    sources._can_connect.cache_clear()

    def refuse(*args, **kwargs):
        raise AssertionError(f"network touched: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(datasets, "load_dataset", refuse)
    yield
    sources._can_connect.cache_clear()


def _online(monkeypatch):
    for name in sources.OFFLINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sources, "_can_connect", lambda host, port: True)


def test_mirror_hit_real_rte(mirror, no_network) -> None:
    data = load_split("glue", "rte", "validation", columns=RTE_COLUMNS, hub_id="nyu-mll/glue")
    reference = pq.read_table(mirror_path("glue", "rte", "validation")).to_pylist()
    assert len(data) == len(reference) == 277
    assert data[:3] == {key: [row[key] for row in reference[:3]] for key in data.column_names}
    assert set(data["label"]) == {0, 1}
    assert data.features["label"].names == ["entailment", "not_entailment"]  # HF ClassLabel kept


def test_corrupt_parquet_names_the_file(temp_mirror, no_network) -> None:
    path = temp_mirror / "glue" / "rte" / "train.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not parquet" * 10)
    with pytest.raises(PlmbenchError) as info:
        load_split("glue", "rte", "train", columns=RTE_COLUMNS)
    message = str(info.value)
    assert message.startswith(f"cannot read {path}: ") and "\n" not in message
    assert "plmbench data mirror glue rte" in message


def test_corrupt_data_pages_behind_a_valid_footer(mirror, temp_mirror, no_network) -> None:
    original = (mirror / "glue" / "rte" / "validation.parquet").read_bytes()
    path = temp_mirror / "glue" / "rte" / "validation.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(original[:4] + b"\xff" * 2000 + original[2004:])  # footer intact
    assert pq.ParquetFile(path).metadata.num_rows == 277
    with pytest.raises(PlmbenchError, match=f"cannot read {path}: "):
        load_split("glue", "rte", "validation", columns=RTE_COLUMNS)


def test_missing_columns_are_named(temp_mirror, no_network) -> None:
    path = temp_mirror / "glue" / "rte" / "train.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"text": ["a", "b"], "label": [0, 1]}), path)
    with pytest.raises(PlmbenchError) as info:
        load_split("glue", "rte", "train", columns=RTE_COLUMNS)
    assert str(info.value).startswith(
        f"{path} lacks columns ['sentence1', 'sentence2'] (has ['text', 'label'])"
    )


def test_missing_split_offline_is_one_line_with_paths_and_fix(temp_mirror, no_network) -> None:
    with pytest.raises(PlmbenchError) as info:
        load_split("glue", "mnli", "validation_matched", hub_id="nyu-mll/glue")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("glue/mnli split validation_matched not found")
    assert str(temp_mirror / "glue" / "mnli" / "validation_matched.parquet") in message
    assert "hub nyu-mll/glue (HF_HUB_OFFLINE=1)" in message
    assert "set PLMBENCH_DATA" in message
    assert "`plmbench data mirror glue mnli --hub-id nyu-mll/glue`" in message  # the hub's name


def test_missing_split_on_real_mirror_lists_the_splits_it_has(mirror, no_network) -> None:
    with pytest.raises(PlmbenchError, match=r"mirror has \['test', 'validation'\]"):
        load_split("glue", "qnli", "train")


def test_hub_check_honours_offline_switches_and_is_bounded(monkeypatch) -> None:
    sources._can_connect.cache_clear()
    calls = []

    def unreachable(address, timeout):
        calls.append((address, timeout))
        raise OSError("no route")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "true")
    assert hub_unreachable_reason() == "HF_DATASETS_OFFLINE=true" and calls == []

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example:8443")
    assert hub_unreachable_reason() == "hub.example:8443 unreachable"
    assert hub_unreachable_reason() == "hub.example:8443 unreachable"
    assert calls == [(("hub.example", 8443), 2.0)]  # one probe per process, 2 s at most
    sources._can_connect.cache_clear()


def test_hub_check_gives_up_on_a_hanging_resolver(monkeypatch) -> None:
    sources._can_connect.cache_clear()
    release = threading.Event()
    monkeypatch.setattr(sources, "CONNECT_TIMEOUT_S", 0.2)

    def hang(address, timeout):  # like getaddrinfo with a dead resolver: no timeout applies
        release.wait(10)
        raise OSError("resolver gave up")

    monkeypatch.setattr(socket, "create_connection", hang)
    start = time.monotonic()
    assert sources._can_connect("huggingface.co", 443) is False
    assert time.monotonic() - start < 1.0
    release.set()
    sources._can_connect.cache_clear()


def test_hub_fallback_when_reachable(monkeypatch, temp_mirror) -> None:
    _online(monkeypatch)
    requested = []

    def fake_load_dataset(path, name, split):
        requested.append((path, name, split))
        return datasets.Dataset.from_dict({"sentence": ["x"], "label": [1]})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    data = load_split("glue", "sst2", "train", columns=["sentence"], hub_id="nyu-mll/glue")
    assert data["sentence"] == ["x"] and requested == [("nyu-mll/glue", "sst2", "train")]
    with pytest.raises(PlmbenchError, match=r"hub glue/sst2/train lacks columns \['idx'\]"):
        load_split("glue", "sst2", "train", columns=["idx"])


def test_list_mirror_matches_manifest_without_reading_data(mirror, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("list_mirror must read metadata only")

    monkeypatch.setattr(pq, "read_table", refuse)
    monkeypatch.setattr(pq.ParquetFile, "read", refuse)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", refuse)
    listing = list_mirror()
    manifest = json.loads((mirror / "manifest.json").read_text())["files"]
    # the manifest vouches for the files it hashes; one altered since (``plmbench data verify``
    # names it) or unlisted is checked against its own Parquet footer instead
    intact = [entry for entry in manifest if (mirror / entry["file"]).is_file()
              and hashlib.sha256((mirror / entry["file"]).read_bytes()).hexdigest()
              == entry["sha256"]]
    assert len(intact) >= 100, "the shared mirror's files mostly match its manifest"
    expected = [{key: entry[key] for key in ("dataset", "config", "split", "rows", "bytes")}
                for entry in intact]
    vouched = {entry["file"] for entry in intact}
    for path in sorted(mirror.glob("*/*/*.parquet")):
        if path.relative_to(mirror).as_posix() not in vouched:
            meta = pq.ParquetFile(path).metadata
            expected.append(dict(dataset=path.parent.parent.name, config=path.parent.name,
                                 split=path.stem, rows=meta.num_rows, bytes=path.stat().st_size))
    key = itemgetter("dataset", "config", "split")
    assert sorted(listing, key=key) == sorted(expected, key=key)
    assert {"dataset": "glue", "config": "rte", "split": "train", "rows": 2490}.items() <= next(
        row for row in listing if key(row) == ("glue", "rte", "train")
    ).items()
    assert list_mirror(mirror / "no-such-dir") == []


def test_mirror_dataset_writes_atomically_and_round_trips(monkeypatch, temp_mirror) -> None:
    _online(monkeypatch)
    splits = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"text": ["a", "b", "c"], "label": [0, 1, 0]}),
        test=datasets.Dataset.from_dict({"text": ["d"], "label": [-1]}),
    )
    monkeypatch.setattr(datasets, "load_dataset", lambda path, name: splits)
    written = mirror_dataset("toy", "default", hub_id="someone/toy")
    assert written == [temp_mirror / "toy/default/train.parquet",
                       temp_mirror / "toy/default/test.parquet"]
    assert sorted(p.name for p in (temp_mirror / "toy/default").iterdir()) == [
        "test.parquet", "train.parquet"]  # no partial files left
    rows = {row["split"]: row["rows"] for row in list_mirror()}
    assert rows == {"train": 3, "test": 1}
    assert load_split("toy", "default", "train", columns=["text"])["text"] == ["a", "b", "c"]


def test_mirror_dataset_offline_refuses(temp_mirror, no_network) -> None:
    with pytest.raises(PlmbenchError, match="cannot mirror nyu-mll/glue config rte: hub not"):
        mirror_dataset("glue", "rte", hub_id="nyu-mll/glue")
    assert list(temp_mirror.iterdir()) == []


def test_a_directory_where_a_split_file_goes_is_one_line_and_not_listed(temp_mirror,
                                                                         no_network) -> None:
    """A folder named like the split's Parquet file (an unpacked archive): one line naming it,
    and neither the message nor ``data list`` counts it as a split the mirror has."""
    (temp_mirror / "glue" / "rte" / "validation.parquet").mkdir(parents=True)
    with pytest.raises(PlmbenchError) as info:
        load_split("glue", "rte", "validation")
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        f"{temp_mirror / 'glue' / 'rte' / 'validation.parquet'} is a directory, not the Parquet "
        "file of glue/rte split validation")
    assert list_mirror(temp_mirror) == []
