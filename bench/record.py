"""The run record as a type: ``Record``, what one ``record.json`` holds (DESIGN.md contract 7).

The run is the only writer of a record (``bench/run/execute.py`` builds one and
``Record.write``s it); boards, studies and submissions read it through this type's attributes.
``Record.from_json`` reads every record plmbench has written: schema 1 gained keys over time
(``overrides`` and ``predictions``, then ``variant``, ``notes``, ``epochs``, ``recipe``,
``outputs``, ``metric_signatures``, ``analysis``, ``trained_parameters``, ``checkpoint``,
``baselines``, ``protocol``, ``batching``; a failed run has no result keys at all), and a key a
file does not hold reads as its default here (an empty list or mapping, None). ``to_json`` writes
back exactly the keys the record was given, so a record read and written again is the same bytes,
and the JSON users' own scripts read keeps its form. A file that is not a record is one
``PlmbenchError`` line naming it and what is wrong. The run builds its record as this type from
its first line (``Record.new``) and fills it with ``updated``, where a key that is no field is an
error.

The files: a record is written atomically (``datamodules.files.atomic_write_text``: a reader
sees the old record or the new one, never half of one), and read back with corrupt ones listed,
not raised (``read_records``, ``records_in``).

The parts with a structure of their own (versions, hardware, batching, the checkpoint's identity,
the pretraining cost, the kept baselines, the throughput) are ``Part`` dataclasses with the same
round trip (``bench/record_parts.py``); the open-ended ones (metrics per split, the resolved
config, data fingerprints) are mappings, as the board's dotted column paths
(``metrics.validation.accuracy``, ``Record.at``) address them.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from bench.record_parts import (  # noqa: F401 - the parts of a record, imported from here
    BaselineRow,
    Baselines,
    Batching,
    Checkpoint,
    Hardware,
    Part,
    Pretraining,
    Throughput,
    Versions,
    _of,
)
from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.init_from import InitFrom

SCHEMA_VERSION = 1
RECORD_NAME = "record.json"
#: the keys a board needs of a record (``record_problem``); every record the run ever wrote
#: holds them, with schema, run_id, config ...
REQUIRED = ("status", "task", "board")


def check_writable(directory: Path, what: str = "results directory",
                   fix: str = "choose another with results_dir=DIR") -> None:
    """Fail before anything is written if runs could not leave their records in ``directory``
    (``what``, and the ``fix`` a user takes, for the message): its nearest existing ancestor
    (itself, once it exists) must be a directory that takes a file. Nothing is created, so a
    command refused later leaves no empty results directory."""
    existing = Path(os.path.abspath(directory))
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise PlmbenchError(f"{what} {directory} is not writable ({err.strerror}): {fix}"
                            ) from None


def write_record(run_dir: Path, record: dict) -> Path:
    """Write ``record`` to ``run_dir/record.json`` atomically (``atomic_write_text``, flushed to
    disk) and return that path: a reader sees the old record or the new one, and a failed write
    leaves the previous record untouched. A full disk or an unwritable directory is one
    PlmbenchError line; many writers at once (a parallel sweep) each rename a whole file. The
    JSON is strict: a number that is not finite is null (``datamodules.strict_json``)."""
    text = record_text(record)  # before any file exists
    return atomic_write_text(Path(run_dir) / RECORD_NAME, text,
                             fix="free disk space or choose a writable results_dir=DIR")


def record_text(record: Mapping) -> str:
    """A record's file text: strict JSON (a non-finite number is null), sorted keys, two-space
    indent, a final newline."""
    return strict_json.dumps(record, indent=2, sort_keys=True) + "\n"


def load_record(path: str | Path) -> tuple[dict | None, str | None]:
    """(the JSON object at ``path``, None), or (None, why there is none): unreadable, not JSON
    (a truncated file), or not an object."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        return None, f"cannot be read ({err.strerror or err})"
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"
    except ValueError as err:
        return None, f"is not valid JSON ({err}): truncated or edited; re-run it"
    if not isinstance(record, dict):
        return None, f"holds a JSON {type(record).__name__}, not a record object"
    return record, None


def record_problem(record: Mapping) -> str | None:
    """Why a board cannot use ``record`` (None: it can): no status, task or board, or an ok record
    without metrics, or of a run asked to evaluate that holds no metric (it evaluated nothing)."""
    if record.get("status") not in ("ok", "failed"):
        return f"its status is {record.get('status')!r}, neither ok nor failed"
    for key in ("task", "board"):
        if not isinstance(record.get(key), str):
            return f"its {key} is {record.get(key)!r}, not a name"
    if record["status"] == "failed":
        return None
    metrics = record.get("metrics")
    if not isinstance(metrics, Mapping):
        return f"an ok record whose metrics are {metrics!r}, not a mapping"
    config = record.get("config")
    task = config.get("task") if isinstance(config, Mapping) else None
    if isinstance(task, Mapping) and evaluated_nothing(task, metrics, record.get("predictions")):
        return (f"an ok record with no metric on {task['splits']['eval']}: the run evaluated "
                "nothing; re-run it with rows to evaluate (task.max_eval_samples > 0)")
    return None


def evaluated_nothing(task: Mapping, metrics: Mapping, predictions: object) -> bool:
    """Whether a run of ``task`` asked to evaluate left no metric and predicted nothing. The
    predictions of a trained run's eval splits do not count: their files (with gold labels) are
    written even when no row was evaluated; those of a split without labels (GLUE's test sets, a
    task with no training split such as GLUE AX) do."""
    splits = task.get("splits")
    if not isinstance(splits, Mapping) or not splits.get("eval") or any(metrics.values()):
        return False
    evaluated = set(splits["eval"]) if splits.get("train") else set()
    return not set(predictions or ()) - evaluated


def read_record(path: str | Path) -> dict | None:
    """The record at ``path`` (a record.json or its run directory); None if unreadable."""
    return load_record(path)[0]


@dataclass(frozen=True)
class Unused:
    """A record a board could not use (``source``: its path, or what else it was), and why;
    every board lists these under its table, so no record is dropped in silence."""

    source: str
    why: str


def record_paths(root: Path) -> list[Path]:
    """Every record below ``root``, in path order. os.walk skips a directory that goes while it
    walks (a running run removes its checkpoints), where Path.rglob would raise: a board read
    while a sweep runs lists the records written so far."""
    return sorted(Path(folder) / RECORD_NAME for folder, _, files in os.walk(root)
                  if RECORD_NAME in files)


def read_records(results_dir: str | Path) -> tuple[list[dict], list[Unused]]:
    """Every ``record.json`` below ``results_dir`` in path order: (the usable records, each with
    its path under ``"_path"``; the others, with why they cannot be used)."""
    root = Path(results_dir)
    if not root.is_dir():
        raise PlmbenchError(
            f"results directory {root} does not exist; pass the results_dir your runs wrote to"
        )
    records, unused = [], []
    for path in record_paths(root):
        record, why = load_record(path)
        why = why or record_problem(record)
        if why is not None:
            unused.append(Unused(str(path), why))
        else:
            records.append({**record, "_path": str(path)})
    return records, unused


def iter_records(results_dir: str | Path) -> Iterator[dict]:
    """The usable records below ``results_dir`` (``read_records``), in path order."""
    yield from read_records(results_dir)[0]


@dataclass(frozen=True)
class Record(Part):
    """One run's ``record.json`` (DESIGN.md contract 7). Fields are the file's keys; one a file
    does not hold reads as the default. ``path``: the file it was read from (not written);
    ``baseline``: a reference row a board makes from kept baselines (``bench/boards/baselines.py``),
    never written to a file."""

    schema: int = field(default=SCHEMA_VERSION, metadata=_of(int))
    run_id: str | None = field(default=None, metadata=_of(str))
    run_dir: str | None = field(default=None, metadata=_of(str))
    model: str | None = None
    label: str | None = None
    task: str | None = field(default=None, metadata=_of(str))
    board: str | None = field(default=None, metadata=_of(str))
    seed: Any = None
    init_from: str | None = None
    checkpoint: Checkpoint | None = field(default=None, metadata={"part": Checkpoint})
    pretraining: Pretraining | None = field(default=None, metadata={"part": Pretraining})
    overrides: tuple[str, ...] = field(default=(), metadata=_of(list))
    variant: tuple[str, ...] = field(default=(), metadata=_of(list))
    config: Mapping[str, Any] = field(default_factory=dict, metadata=_of(dict))
    config_hash: str | None = field(default=None, metadata=_of(str))
    protocol_hash: str | None = field(default=None, metadata=_of(str))
    #: the protocol's name (conf/protocol/: paper, modernbert, glue_sane); None in a record of
    #: before protocols had names
    protocol: str | None = field(default=None, metadata=_of(str))
    versions: Versions | None = field(default=None, metadata={"part": Versions})
    hardware: Hardware | None = field(default=None, metadata={"part": Hardware})
    batching: Batching | None = field(default=None, metadata={"part": Batching})
    started_at: str | None = field(default=None, metadata=_of(str))
    finished_at: str | None = field(default=None, metadata=_of(str))
    wall_time_s: float | None = field(default=None, metadata=_of((int, float)))
    status: str | None = field(default=None, metadata=_of(str))
    error: str | None = field(default=None, metadata=_of(str))
    failure_kind: str | None = field(default=None, metadata=_of(str))
    # what the run measured (absent from a run that failed before it had a result)
    metrics: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict,
                                                              metadata=_of(dict))
    metric_signatures: Mapping[str, Mapping[str, str]] = field(default_factory=dict,
                                                               metadata=_of(dict))
    predictions: Mapping[str, str] = field(default_factory=dict, metadata=_of(dict))
    outputs: Mapping[str, Any] = field(default_factory=dict, metadata=_of(dict))
    notes: tuple[str, ...] = field(default=(), metadata=_of(list))
    throughput: Throughput | None = field(default=None, metadata={"part": Throughput})
    parameters: int | None = field(default=None, metadata=_of(int))
    trained_parameters: int | None = field(default=None, metadata=_of(int))
    encoder_parameters: int | None = field(default=None, metadata=_of(int))
    data: Mapping[str, str] = field(default_factory=dict, metadata=_of(dict))
    tokenizer: str | None = field(default=None, metadata=_of(str))
    analysis: Any = None
    steps: int | None = field(default=None, metadata=_of(int))
    epochs: int | None = field(default=None, metadata=_of(int))
    resumed_from: str | None = field(default=None, metadata=_of(str))
    recipe: Mapping[str, Any] | None = field(default=None, metadata=_of(dict))
    baselines: Baselines | None = field(default=None, metadata={"part": Baselines})
    # what a board adds, never in a file: a reference row (bench/boards/baselines.py: ``baseline``,
    # the digests of the gold labels it scored), the grid point best-on-dev chose
    # (bench/boards/selection.py: its settings)
    baseline: bool = False
    gold: Mapping[str, str] | None = None
    selected: Mapping[str, Any] | None = None
    path: str | None = field(default=None, compare=False, kw_only=True)
    _OWN: ClassVar[tuple[str, ...]] = ("absent", "extra", "path")

    @classmethod
    def new(cls, **given: Any) -> Record:
        """A record of the ``given`` fields alone (what a run knows at its start), each typed as
        its field holds it; the others absent, so not written. A name that is no field is a
        TypeError: a misspelt key fails where it is written, not in a reader's hands."""
        return cls(absent=frozenset(part.name for part in cls._fields())).updated(**given)

    @classmethod
    def from_json(cls, source: str | Path | Mapping) -> Record:
        """The record in a ``record.json`` file (or its run directory), or in an object already
        read; one line naming the file and what is wrong when it is not a record."""
        if isinstance(source, Mapping):
            return cls._checked(source, str(source.get("_path") or "record"), None)
        path = Path(source)
        if path.is_dir():
            path = path / RECORD_NAME
        value, why = load_record(path)
        if why is not None:
            raise PlmbenchError(f"{path} {why}")
        return cls._checked(value, str(path), str(path))

    @classmethod
    def _checked(cls, value: Mapping, where: str, path: str | None) -> Record:
        missing = [key for key in REQUIRED if key not in value]
        if missing:
            raise PlmbenchError(f"{where} is not a plmbench record: it has no "
                                f"{', '.join(missing)} (a run's record.json holds them)")
        schema = value.get("schema", SCHEMA_VERSION)  # hand-written records may omit it
        if not isinstance(schema, int) or schema > SCHEMA_VERSION:
            raise PlmbenchError(f"{where} has record schema {schema!r}; this plmbench "
                                f"reads schema {SCHEMA_VERSION} and older: upgrade plmbench")
        record = cls.of({k: v for k, v in value.items() if k != "_path"}, where)
        return record.at_path(path or value.get("_path"))

    def at_path(self, path: str | None) -> Record:
        """This record, read from ``path``."""
        return self if path is None else replace(self, path=path)

    def to_json(self) -> str:
        """The file's text: the JSON written since records exist (sorted keys, two-space indent,
        strict: a non-finite number is null), with the ``schema`` version."""
        return record_text(self.to_dict())

    def write(self, run_dir: str | Path) -> Path:
        """Write ``run_dir/record.json`` atomically (``write_record``)."""
        return write_record(Path(run_dir), self.to_dict())

    def at(self, dotted: str) -> Any:
        """The value at a dotted path (``metrics.validation.accuracy``, ``config.task.name``):
        what a board column's ``value`` names, a number indexing a list
        (``analysis.curve.3.score``); None where the record holds none."""
        value: Any = self
        for key in dotted.split("."):
            if isinstance(value, Part):
                value = value.value_of(key)
            elif isinstance(value, Mapping):
                value = value.get(key)
            elif isinstance(value, list | tuple) and key.isdigit() and int(key) < len(value):
                value = value[int(key)]
            else:
                return None
        return value

    @property
    def task_config(self) -> Mapping[str, Any]:
        """The resolved task section of the configuration that ran (empty where none)."""
        task = self.config.get("task")
        return task if isinstance(task, Mapping) else {}

    @property
    def home(self) -> Path | None:
        """Where the run's files are now: beside the record.json it was read from (a results
        folder moved or copied since the run), else the run directory it names."""
        if self.path:
            return Path(self.path).parent
        return Path(self.run_dir) if self.run_dir else None

    @property
    def source(self) -> str:
        """Where the record came from, for a message: its file, else its run directory."""
        return str(self.path or self.run_dir or self.run_id or "a record")


def records_in(results_dir: str | Path) -> tuple[list[Record], list[Unused]]:
    """Every record below ``results_dir`` in path order (``read_records``), typed:
    (the usable ones, the others with why they cannot be used)."""
    found, unused = read_records(results_dir)
    records = []
    for value in found:
        try:
            records.append(Record.from_json(value))
        except PlmbenchError as err:
            unused.append(Unused(value["_path"], str(err)))
    return records, unused


def as_record(record: Record | Mapping) -> Record:
    """``record`` typed: a mapping made in this process (a record a caller read as JSON, a
    test's own) as the ``Record`` it holds, its values checked (``Part.of``) but no key required:
    what a board cannot use it lists as unused. A file is read with ``Record.from_json``."""
    if isinstance(record, Record):
        return record
    typed = Record.of({k: v for k, v in record.items() if k != "_path"}, "record")
    return typed.at_path(record.get("_path"))


def record_at(path: str | Path) -> Record | None:
    """The record at ``path`` (a record.json or its run directory) for a run deciding what to
    do there (skip, resume, replace); None where there is none to go by: no file, or one that is
    no record (unreadable JSON, a value of the wrong type)."""
    found = read_record(path)
    try:
        return None if found is None else as_record(found)
    except PlmbenchError:
        return None


def as_records(records: Iterable[Record | Mapping]) -> list[Record]:
    """Each of ``records`` typed (``as_record``)."""
    return [as_record(record) for record in records]


def checkpoint_record(start: InitFrom) -> Record | None:
    """The ok record of the run a ``ckpt:<run dir>`` (or ``ckpt:<run dir>/model``) checkpoint
    names; None for any other checkpoint, or a run that did not end ok."""
    run_dir = start.run_dir()
    record = record_at(run_dir) if run_dir is not None else None
    return record if record is not None and record.status == "ok" else None
