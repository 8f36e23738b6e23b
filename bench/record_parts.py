"""The parts of a run record with a structure of their own (DESIGN.md contract 7): versions,
hardware, the checkpoint's identity, the pretraining cost, the kept baselines, the throughput.

A ``Part`` is a JSON object with known keys, read by ``Part.of`` (each value checked against its
field: one ``PlmbenchError`` line naming where it is wrong) and written back by ``to_dict`` with
exactly the keys it was given, so a record read and written again is the same bytes. ``Record``
(``bench/record.py``) is the part that is the whole file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, ClassVar

from datamodules.errors import PlmbenchError


def _typed(part: Field, value: Any, where: str) -> Any:
    """``value`` as the field ``part`` holds it: a nested ``Part`` built, a list as a tuple,
    checked against the field's ``kind`` (one line naming ``where`` when it does not fit)."""
    if value is None or isinstance(value, Part):
        return value
    if "part" in part.metadata:
        return part.metadata["part"].of(value, where)
    if "parts" in part.metadata:  # a list of objects
        if not isinstance(value, list | tuple):
            raise PlmbenchError(f"{where} is a JSON {type(value).__name__}, not a list")
        return tuple(item if isinstance(item, Part) else
                     part.metadata["parts"].of(item, f"{where}[{i}]")
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


#: each part's JSON fields, by class (``Part._fields``)
_FIELDS: dict[type, list[Field]] = {}


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
        """The fields a JSON object's keys fill (once per class: a board reads thousands)."""
        return _FIELDS[cls] if cls in _FIELDS else _FIELDS.setdefault(
            cls, [f for f in fields(cls) if f.name not in cls._OWN])

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
        """This part with the fields ``changes`` names set (and held, however it was read), each
        value typed as its field holds it (a mapping of a part as that part); a name that is no
        field is a TypeError, so a misspelt key never reaches a file."""
        kinds = {part.name: part for part in self._fields()}
        typed = {key: _typed(kinds[key], value, f"{type(self).__name__.lower()}.{key}")
                 if key in kinds else value for key, value in changes.items()}
        return replace(self, **typed, absent=self.absent - set(changes))

    def has(self, key: str) -> bool:
        """Whether the JSON object held ``key`` (a key older records lack reads as a default)."""
        return key not in self.absent and (key in self.extra or any(
            part.name == key for part in self._fields()))


@dataclass(frozen=True)
class Versions(Part):
    """The software a run ran on (``bench.run.provenance.software_versions``); ``git_dirty`` since
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
    runs (``bench.run.provenance.pretraining_costs``): None where some run did not record it."""

    tokens: float | None = None
    flops: float | None = None
    wall_time_s: float | None = None
    runs: tuple[str, ...] = field(default=(), metadata=_of(list))
    recipe: Mapping | None = field(default=None, metadata=_of(dict))


@dataclass(frozen=True)
class Throughput(Part):
    """The run's training totals and rates (``lit_models/measure/throughput.py``); empty for a run
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
