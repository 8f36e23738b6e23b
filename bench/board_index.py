"""The records a board reads, at a study's scale: an index of their board-relevant part per
results directory, kept current on every read.

A record is mostly what no board reads (per-example ``outputs``: 40-150 KB of a 65 KB average in
a GLUE study), and a board of thousands of records spent most of its time parsing them and
re-reading every run's predictions file for the digest of its gold labels (``bench/eval_sets.py``).
``board_records`` reads each record once: it keeps, in ``<results_dir>/.plmbench/board_index.json``,
per record file its modification time and size, the record without its ``HEAVY`` keys (or why a
board cannot use it) and the gold digests of its predictions files with their times and sizes.
A run that finishes puts its record in its results directory's index, where there is one
(``record_finished``, from ``bench/run/execute.py``), and on every read a record whose file (or
predictions file) changed since, or that is new, is read again and its entry replaced, and a
record that is gone is dropped: the board is current whether or not a run's own update got in
(two runs finishing at once may each write the index; the next read mends what one missed).
The same records give the same tables, with or without the index.

A directory of fewer than ``MIN_RECORDS`` records is read whole and gets no index (parsing them
takes a fraction of a second), nor does one that cannot be written (a read-only copy): reading
never fails for want of its index, and an index that cannot be read is rebuilt.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.eval_sets import file_golds, gold_files
from bench.record import Record, Unused, load_record, record_paths, record_problem
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text

INDEX = Path(".plmbench") / "board_index.json"
#: the index's format; another is rebuilt
VERSION = 1
#: record keys no board reads: the per-example outputs, the bulk of a record
HEAVY = frozenset({"outputs"})
#: the fewest records for which an index is written
MIN_RECORDS = 100


def _stamp(path: Path) -> list[int] | None:
    """A file's modification time (ns) and size; None where it is gone."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return [stat.st_mtime_ns, stat.st_size]


def _entry(path: Path, stamp: list[int] | None) -> dict:
    """What the index keeps of the record at ``path``: the record less its ``HEAVY`` keys, the
    gold digests of its predictions files (with their stamps), or why a board cannot use it."""
    value, why = load_record(path)
    why = why or record_problem(value)
    if why is not None:
        return {"stamp": stamp, "why": why}
    kept = {key: item for key, item in value.items() if key not in HEAVY}
    try:
        record = Record.from_json({**kept, "_path": str(path)})
    except PlmbenchError as err:
        return {"stamp": stamp, "why": str(err)}
    files = gold_files(record) or {}
    return {"stamp": stamp, "record": kept, "gold": file_golds(record),
            "files": {str(file): _stamp(file) for file in files.values()}}


def _current(entry: dict | None, stamp: list[int] | None) -> bool:
    """Whether an index entry still says what its record (and predictions files) hold."""
    return (isinstance(entry, dict) and stamp is not None and entry.get("stamp") == stamp
            and all(_stamp(Path(file)) == kept for file, kept in entry.get("files", {}).items()))


def _load(index: Path) -> dict:
    try:
        found = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    ok = isinstance(found, dict) and found.get("version") == VERSION
    return found.get("entries", {}) if ok and isinstance(found.get("entries"), dict) else {}


def board_records(results_dir: str | Path) -> tuple[list[Record], list[Unused]]:
    """Every record below ``results_dir`` in path order as a board reads it, typed, less its
    ``HEAVY`` keys: (the usable ones, the others with why); through the index (module docstring)."""
    root = Path(results_dir)
    if not root.is_dir():
        raise PlmbenchError(
            f"results directory {root} does not exist; pass the results_dir your runs wrote to"
        )
    paths = record_paths(root)
    old = _load(root / INDEX) if len(paths) >= MIN_RECORDS else {}
    entries, changed = {}, False
    records, unused = [], []
    for path in paths:
        name, stamp = str(path.relative_to(root)), _stamp(path)
        entry = old.get(name)
        if not _current(entry, stamp):
            entry, changed = _entry(path, stamp), True
        entries[name] = entry
        if "why" in entry:
            unused.append(Unused(str(path), entry["why"]))
            continue
        record = Record.from_json({**entry["record"], "_path": str(path)})
        records.append(record if entry["gold"] is None else record.updated(gold=entry["gold"]))
    if len(paths) >= MIN_RECORDS and (changed or len(entries) != len(old)):
        _save(root / INDEX, entries)
    return records, unused


def _save(index: Path, entries: dict) -> None:
    """Write the index atomically; where it cannot be written, the next read parses again."""
    text = json.dumps({"version": VERSION, "entries": entries}, separators=(",", ":"))
    try:
        index.parent.mkdir(exist_ok=True)
        atomic_write_text(index, text)
    except (OSError, PlmbenchError):
        return


def record_finished(results_dir: str | Path, path: Path) -> None:
    """Bring the entry of the record at ``path`` up to date in the index of ``results_dir``, if
    it has one (a run that just wrote its record); never fails the run."""
    root = Path(results_dir)
    try:
        name = str(Path(path).resolve().relative_to(root.resolve()))
    except (OSError, ValueError):  # a record outside its results directory: no index of it
        return
    if not (root / INDEX).is_file():
        return
    entries = _load(root / INDEX)
    entries[name] = _entry(Path(path), _stamp(Path(path)))
    _save(root / INDEX, entries)
