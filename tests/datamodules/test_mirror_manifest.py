"""``plmbench data verify``: every split file against the mirror's manifest (sha256), each file
that is missing, altered or unlisted named, exit 1; a mirror without a manifest is bad input."""

import hashlib
import json
import os

import datasets
import pytest

from bench.cli import main
from datamodules.errors import PlmbenchError
from datamodules.mirror_manifest import Discrepancy, verify_mirror


def write_split(root, name: str, rows: int) -> dict:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict({"text": [f"row {i}" for i in range(rows)]}).to_parquet(str(path))
    return {"file": name, "rows": rows, "bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


@pytest.fixture
def manifested(tmp_path, monkeypatch):
    """A mirror of three splits and the manifest that hashes them."""
    entries = [write_split(tmp_path, name, rows) for name, rows in
               (("toy/default/train.parquet", 30), ("toy/default/test.parquet", 10),
                ("other/a/validation.parquet", 5))]
    (tmp_path / "manifest.json").write_text(json.dumps({"files": entries}))
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path))
    return tmp_path


def test_an_intact_mirror_verifies(manifested, capsys) -> None:
    assert verify_mirror(manifested) == (3, [])
    assert main(["data", "verify"]) == 0
    assert "all 3 files match manifest.json" in capsys.readouterr().out


def test_each_differing_file_is_named(manifested, capsys) -> None:
    write_split(manifested, "toy/default/test.parquet", 8)  # overwritten by a script
    (manifested / "other/a/validation.parquet").unlink()
    write_split(manifested, "toy/default/extra.parquet", 4)
    listed, differing = verify_mirror(manifested)
    assert listed == 3
    assert [(d.file, d.problem) for d in differing] == [
        ("other/a/validation.parquet", "missing"),
        ("toy/default/extra.parquet", "not in manifest"),
        ("toy/default/test.parquet", "altered")]
    altered = next(d for d in differing if d.problem == "altered")
    assert altered.detail.startswith("8 rows,") and "the manifest has 10 rows" in altered.detail
    assert isinstance(altered, Discrepancy)
    assert main(["data", "verify"]) == 1
    out = capsys.readouterr().out
    assert "3 file(s) differ from manifest.json (3 listed)" in out
    assert "toy/default/test.parquet" in out and "toy/default/train.parquet" not in out


def test_same_size_other_bytes_is_altered(manifested) -> None:
    path = manifested / "toy/default/train.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: rows and size unchanged
    path.write_bytes(bytes(data))
    assert [d.problem for d in verify_mirror(manifested)[1]] == ["altered"]


@pytest.mark.parametrize("manifest", [None, "{not json", '{"files": [{"file": "a"}]}'])
def test_no_or_broken_manifest_is_one_line(tmp_path, monkeypatch, capsys, manifest) -> None:
    if manifest is not None:
        (tmp_path / "manifest.json").write_text(manifest)
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path))
    with pytest.raises(PlmbenchError, match="manifest"):
        verify_mirror(tmp_path)
    assert main(["data", "verify"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path) in err


def test_unreadable_stray_files_are_listed_not_a_crash(manifested, capsys) -> None:
    """Files the manifest does not list that cannot be read as Parquet (a folder, garbage, no
    permission): each is a line of the listing, exit 1, never a traceback."""
    (manifested / "toy/default/folder.parquet").mkdir()
    (manifested / "toy/default/garbage.parquet").write_bytes(b"not parquet")
    locked = manifested / "toy/default/train.parquet"
    locked.chmod(0)
    try:
        listed, differing = verify_mirror(manifested)
        problems = {d.file: (d.problem, d.detail) for d in differing}
        assert problems["toy/default/folder.parquet"] == ("not in manifest", "a directory")
        assert problems["toy/default/garbage.parquet"][1].startswith("unreadable (")
        if not os.access(locked, os.R_OK):  # root reads whatever the mode says
            assert problems["toy/default/train.parquet"][0] == "unreadable"
        assert main(["data", "verify"]) == 1
        assert "garbage.parquet" in capsys.readouterr().out
    finally:
        locked.chmod(0o644)
