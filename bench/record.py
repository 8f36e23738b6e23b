"""The run record as a type: ``Record``, what one ``record.json`` holds (DESIGN.md contract 7).

The run is the only writer of a record (``bench/run/execute.py`` builds one and
``Record.write``s it); boards, studies and submissions read it through this type's attributes.
``Record.from_json`` reads every record plmbench has written: schema 1 gained keys over time
(``overrides`` and ``predictions``, then ``variant``, ``notes``, ``epochs``, ``recipe``,
``outputs``, ``metric_signatures``, ``analysis``, ``trained_parameters``, ``checkpoint``,
``baselines``, ``protocol``, ``batching``; a failed run has no result keys at all), and a key a file
does not hold reads as its default here (an empty list or mapping, None). ``to_json`` writes back
exactly the keys the record was given, so a record read and written again is the same bytes, and the
JSON users' own scripts read keeps its form. A file that is not a record is one ``PlmbenchError``
line naming it and what is wrong.

The parts with a structure of their own (versions, hardware, batching, the checkpoint's identity,
the pretraining cost, the kept baselines, the throughput) are ``Part`` dataclasses with the same
round trip; the open-ended ones (metrics per split, the resolved config, data fingerprints) are
mappings, as the board's dotted column paths (``metrics.validation.accuracy``, ``Record.at``)
address them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from bench.records import (
    RECORD_NAME,
    SCHEMA_VERSION,
    Unused,
    load_record,
    read_record,
    read_records,
    record_text,
    write_record,
)
from datamodules.errors import PlmbenchError

#: the keys a board needs of a record (``bench.records.record_problem``); every record the run
#: ever wrote holds them, with schema, run_id, config ...
REQUIRED = ("status", "task", "board")


def _typed(part: Field, value: Any, where: str) -> Any:
    """``value`` as the field ``part`` holds it: a nested ``Part`` built, a list as a tuple,
    checked against the field's ``kind`` (one line naming ``where`` when it does not fit)."""
    if value is None:
        return None
    if "part" in part.metadata:
        return part.metadata["part"].of(value, where)
    if "parts" in part.metadata:  # a list of objects
        if not isinstance(value, list):
            raise PlmbenchError(f"{where} is a JSON {type(value).__name__}, not a list")
        return tuple(part.metadata["parts"].of(item, f"{where}[{i}]")
                     for i, item in enumerate(value))
    kind = part.metadata.get("kind")
    if kind is not None and not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise PlmbenchError(f"{where} is {value!r}, not {names}")
    return tuple(value) if isinstance(value, list) else value


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it: parts as objects, tuples as lists."""
    if isinstance(value, Part):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


def _of(kind: Any) -> dict:
    """A field's metadata: the JSON type (or types) its value must have."""
    return {"kind": kind}


@dataclass(frozen=True)
class Part:
    """A JSON object with known keys: those it was given (``absent``: the known keys it lacked,
    which ``to_dict`` leaves out) and any it does not know (``extra``, kept as they are)."""

    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False, kw_only=True)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False,
                                     kw_only=True)
    _OWN: ClassVar[tuple[str, ...]] = ("absent", "extra")

    @classmethod
    def _fields(cls) -> list[Field]:
        return [f for f in fields(cls) if f.name not in cls._OWN]

    @classmethod
    def of(cls, value: Any, where: str) -> Part:
        """The part the JSON object ``value`` holds; one line naming ``where`` if it is none."""
        if not isinstance(value, Mapping):
            raise PlmbenchError(f"{where} is a JSON {type(value).__name__}, not an object")
        kwargs, absent = {}, set()
        for part in cls._fields():
            key = part.name
            if key in value:
                kwargs[part.name] = _typed(part, value[key], f"{where}.{key}")
            else:
                absent.add(key)
        known = {part.name for part in cls._fields()}
        extra = {key: item for key, item in value.items() if key not in known}
        return cls(**kwargs, absent=frozenset(absent), extra=extra)

    def to_dict(self) -> dict:
        """The JSON object this part was read from (or is written as)."""
        out = dict(self.extra)
        for part in self._fields():
            if part.name not in self.absent:
                out[part.name] = _plain(getattr(self, part.name))
        return out

    def value_of(self, key: str) -> Any:
        """The value a JSON object's ``key`` holds here (None when it holds none): how a dotted
        column path (``throughput.train_tokens_per_s``) steps into a part (``Record.at``)."""
        for part in self._fields():
            if part.name == key:
                return None if key in self.absent else getattr(self, part.name)
        return self.extra.get(key)

    def updated(self, **changes: Any) -> Part:
        """This part with the fields ``changes`` names set (and held, however it was read)."""
        return replace(self, **changes, absent=self.absent - set(changes))

    def has(self, key: str) -> bool:
        """Whether the JSON object held ``key`` (a key older records lack reads as a default)."""
        return key not in self.absent and (key in self.extra or any(
            part.name == key for part in self._fields()))


@dataclass(frozen=True)
class Versions(Part):
    """The software a run ran on (``bench.records.software_versions``); ``git_dirty`` since
    records say whether the checkout had uncommitted changes."""

    python: str | None = None
    torch: str | None = None
    lightning: str | None = None
    plmbench: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None


@dataclass(frozen=True)
class Hardware(Part):
    """The trainer's accelerator, devices and precision (``conf/trainer``)."""

    accelerator: str | None = None
    devices: Any = None  # a count, a list of device ids, or "auto"
    precision: Any = None


@dataclass(frozen=True)
class Batching(Part):
    """How the run's processes shared its work (``datamodules/batching.py``): ``world_size``
    processes; where the run trains, each forward pass of a process held ``per_process_batch``
    examples and an optimizer step accumulated ``accumulate_grad_batches`` of them on every
    process, ``global_batch`` (``task.batch_size``, the recipe's) in all. Records written before it
    have none."""

    world_size: int | None = field(default=None, metadata=_of(int))
    per_process_batch: int | None = field(default=None, metadata=_of(int))
    accumulate_grad_batches: int | None = field(default=None, metadata=_of(int))
    global_batch: int | None = field(default=None, metadata=_of(int))


@dataclass(frozen=True)
class Checkpoint(Part):
    """Which weights an ``init_from=hf:`` run started from (``InitFrom.identity``): a hub id's
    id, revision and commit, or a directory; the weights file and its sha256."""

    id: str | None = None
    revision: str | None = None
    commit: str | None = None
    directory: str | None = None
    weights: str | None = None
    weights_sha256: str | None = None


@dataclass(frozen=True)
class Pretraining(Part):
    """What training the checkpoint a run starts from cost, summed along its chain of ``ckpt:``
    runs (``bench.records.pretraining_cost``): None where some run did not record it."""

    tokens: float | None = None
    flops: float | None = None
    wall_time_s: float | None = None
    runs: tuple[str, ...] = field(default=(), metadata=_of(list))
    recipe: Mapping | None = field(default=None, metadata=_of(dict))


@dataclass(frozen=True)
class Throughput(Part):
    """The run's training totals and rates (``lit_models/core/throughput.py``); empty for a run
    that trained no step."""

    train_tokens: float | None = None
    train_samples: float | None = None
    train_tokens_per_s: float | None = None
    train_samples_per_s: float | None = None
    train_step_seconds: float | None = None
    train_padding_fraction: float | None = None
    train_flops: float | None = None
    train_flops_per_s: float | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class BaselineRow(Part):
    """One reference row with no training: its name (None: the majority class or mean score,
    ``bench.boards.baselines.BASELINE_LABEL``) and its metrics per eval split."""

    name: str | None = None
    metrics: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict,
                                                              metadata=_of(dict))


@dataclass(frozen=True)
class Baselines(Part):
    """The task's baselines a run computed when it ran (``bench.task_baselines.of_task``), with the
    digest of the gold labels they scored per eval split; or why they could not be computed."""

    rows: tuple[BaselineRow, ...] = field(default=(), metadata={"parts": BaselineRow})
    gold: Mapping[str, str] | None = field(default=None, metadata=_of(dict))
    error: str | None = None


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
        """Write ``run_dir/record.json`` atomically (``bench.records.write_record``)."""
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
    """Every record below ``results_dir`` in path order (``bench.records.read_records``), typed:
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
