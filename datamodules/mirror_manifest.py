"""A mirror checked against its manifest: ``manifest.json`` at the mirror's root lists every split
file with its rows, bytes and sha256 (the shared mirror ships one; see its ``MANIFEST.md``).

``verify_mirror`` hashes each file and names every one that is missing, altered (its sha256
differs: it holds other rows than the manifest's source) or not in the manifest. A run on an
altered split measures other data than its record's name says, so ``plmbench data verify`` is
the check to make before trusting a board, and the way to find a file a script overwrote.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from datamodules.errors import PlmbenchError

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Discrepancy:
    """One split file that differs from the manifest: ``problem`` is ``missing``, ``altered`` or
    ``not in manifest``; ``detail`` says what the file and the manifest hold."""

    file: str
    problem: str
    detail: str


def read_manifest(root: Path) -> list[dict]:
    """The manifest's file entries (each with ``file``, ``rows``, ``bytes``, ``sha256``)."""
    path = root / MANIFEST
    if not path.is_file():
        raise PlmbenchError(f"no {MANIFEST} in {root}: nothing to verify the mirror against; "
                            "point PLMBENCH_DATA at a mirror that ships one")
    try:
        files = json.loads(path.read_text())["files"]
        for entry in files:
            entry["file"], entry["rows"], entry["bytes"], entry["sha256"]
    except (ValueError, KeyError, TypeError) as error:
        raise PlmbenchError(f"{path} is not a mirror manifest ({type(error).__name__}: {error}); "
                            "it needs a 'files' list of {file, rows, bytes, sha256}") from error
    return files


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _holds(path: Path) -> str:
    """What a file holds, for the listing; why not, where it cannot be read as Parquet."""
    if path.is_dir():
        return "a directory"
    try:
        return f"{pq.ParquetFile(path).metadata.num_rows:,} rows, {path.stat().st_size:,} bytes"
    except Exception as err:  # noqa: BLE001 - unreadable (permissions, not Parquet): listed so
        return f"unreadable ({' '.join(str(getattr(err, 'strerror', None) or err).split())})"


def _digest(path: Path) -> str | None:
    """``sha256(path)``; None where the file cannot be read."""
    try:
        return sha256(path)
    except OSError:
        return None


def verify_mirror(root: Path) -> tuple[int, list[Discrepancy]]:
    """(number of files the manifest lists, the files that differ from it), in path order."""
    entries = read_manifest(root)
    found = []
    for entry in entries:
        path = root / entry["file"]
        expected = f"{entry['rows']:,} rows, {entry['bytes']:,} bytes"
        if not path.is_file():
            found.append(Discrepancy(entry["file"], "missing", f"the manifest has {expected}"))
        elif (digest := _digest(path)) is None:
            found.append(Discrepancy(entry["file"], "unreadable",
                                     f"{_holds(path)}; the manifest has {expected}"))
        elif digest != entry["sha256"]:
            found.append(Discrepancy(entry["file"], "altered",
                                     f"{_holds(path)}; the manifest has {expected}"))
    listed = {entry["file"] for entry in entries}
    for path in sorted(root.glob("*/*/*.parquet")):
        name = path.relative_to(root).as_posix()
        if name not in listed:
            found.append(Discrepancy(name, "not in manifest", _holds(path)))
    return len(entries), sorted(found, key=lambda d: d.file)
