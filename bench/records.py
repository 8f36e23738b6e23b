"""Run records: the one ``record.json`` every run leaves in its run directory.

A record is what makes a leaderboard reproducible without re-running anything (DESIGN.md,
contracts 7 and 8; schema version 1 in the sprint contract, section D). This module writes a
record atomically (``datamodules.files.atomic_write_text``: a reader sees the old record or the new
one, never half of one), reads records back while skipping corrupt ones, and
computes the config hash that says "same experiment" across checkouts and seeds.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.init_from import InitFrom
from datamodules.strict_json import nonfinite

SCHEMA_VERSION = 1
RECORD_NAME = "record.json"

# Config keys (dotted for nested ones) that say where, under which name or how verbosely a run
# happens, not what it computes.
VOLATILE_KEYS = frozenset({
    "seed", "results_dir", "run_name", "label", "logger", "hydra", "skip_completed",
    "only_failed", "resume", "checkpoint",  # resuming ends where an uninterrupted run ends
    "trainer.dataloader", "trainer.enable_progress_bar", "trainer.log_every_n_steps",
    "trainer.threads", "model.inputs.feature_cache_mb",  # how fast, not what: results unchanged
    "task.columns",  # how the leaderboard shows the task, not what the run computes
    # a protocol's account of itself and of what its study sweeps and boards read (conf/protocol/):
    # its name and the settings it fixes stay, the rest changes no run's result
    "protocol.description", "protocol.statistic", "protocol.selection", "protocol.seeds",
    "protocol.round_two_from", "protocol.grid", "protocol.sweep", "protocol.runs",
})
#: the protocol every run followed before protocols had names (conf/protocol/paper.yaml): each
#: preset's own recipe; a record without a ``protocol`` was made by it or by an unnamed one
DEFAULT_PROTOCOL = "paper"


#: overrides a run's directory names already (task, label, seed), or that pick a named bundle:
#: a model preset's name is the default label, an experiment sets its own results_dir
PATH_KEYS = frozenset({"task", "model", "label", "seed", "experiment"})
#: what a variant directory name may not hold (Hydra's override grammar, unquoted values)
UNSAFE = re.compile(r"[^\w.:@%+\-]")
#: the longest variant directory name; a longer one is cut and ends in a hash of the whole
MAX_VARIANT = 96
#: ... and the most bytes it may take (a file system's name holds 255; \w takes non-ASCII letters)
MAX_VARIANT_BYTES = 255
# An absolute path, optionally behind a scheme such as "hf:" or "ckpt:" (init_from values).
_ABSOLUTE_PATH = re.compile(r"^(?P<scheme>[A-Za-z][\w+.-]*:)?/")


def _portable_path(value: str, results_dir: str | None = None) -> str:
    """Replace an absolute path by its last two components, keeping any scheme prefix; a path
    inside the (absolute) ``results_dir`` by its path relative to it, which tells apart the runs
    of a study whose directories end alike (``.../tapt/chemprot/.../seed0`` and
    ``.../tapt/sci_cite/.../seed0``) wherever the results directory is.

    ``/home/a/ckpts/run1/last.ckpt`` and ``/scratch/b/ckpts/run1/last.ckpt`` both become
    ``run1/last.ckpt``; ``hf:/models/bert-base-scratch`` becomes ``hf:models/bert-base-scratch``.
    """
    match = _ABSOLUTE_PATH.match(value)
    if match is None:
        return value
    scheme = match.group("scheme") or ""
    inside = PurePosixPath(value[len(scheme):])
    if results_dir and PurePosixPath(results_dir).is_absolute():
        if inside.is_relative_to(results_dir) and inside != PurePosixPath(results_dir):
            return f"{scheme}<results_dir>/{inside.relative_to(results_dir)}"
    parts = [part for part in PurePosixPath(value[len(scheme):]).parts if part != "/"]
    return scheme + "/".join(parts[-2:])


def _canonical(value: Any, where: str, results_dir: str | None = None) -> Any:
    """Turn a config (plain dict or OmegaConf container) into JSON-able, path-free values."""
    if isinstance(value, Mapping):
        return {str(key): _canonical(item, f"{where}.{key}", results_dir)
                for key, item in value.items()}
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        return _portable_path(value, results_dir)
    if isinstance(value, Sequence):
        return [_canonical(item, f"{where}[{i}]", results_dir) for i, item in enumerate(value)]
    if value is None or isinstance(value, bool | int | float):
        return value
    raise PlmbenchError(
        f"config value {where} has type {type(value).__name__}, which cannot be hashed; "
        "pass a resolved plain config (OmegaConf.to_container(cfg, resolve=True))"
    )


def _without(config: Mapping, dotted: frozenset[str] | set[str]) -> dict:
    """``config`` without the keys named by dotted paths (``trainer.log_every_n_steps``)."""
    kept = {}
    for key, item in config.items():
        if key in dotted:
            continue
        nested = {d.split(".", 1)[1] for d in dotted if d.startswith(f"{key}.")}
        kept[key] = _without(item, nested) if nested and isinstance(item, Mapping) else item
    return kept


def canonical_config(config: Mapping, ignore_task: bool = False,
                     task_keys: Iterable[str] = ()) -> dict:
    """``config`` as the hashes see it: without the ``VOLATILE_KEYS`` (seed, results_dir, label,
    logger ...), absolute path prefixes shortened (the results directory's, for paths inside it);
    with ``ignore_task`` also without the task group but for its ``task_keys`` (the task keys a
    command line changed, such as a grid's ``task.batch_size``): the training recipe. The
    default fine-tuning method (``finetune=full``, every weight trains) is what every run did
    before the ``finetune`` group existed: it is left out, so their records keep their hashes;
    so is the default protocol (``protocol=paper``, each preset's own recipe: conf/protocol/),
    whose settings are those runs' own."""
    dropped = VOLATILE_KEYS | ({"task"} if ignore_task else set())
    finetune = config.get("finetune")
    if isinstance(finetune, Mapping) and finetune.get("name") == "full":
        dropped |= {"finetune"}
    protocol = config.get("protocol")
    if isinstance(protocol, Mapping) and protocol.get("name") == DEFAULT_PROTOCOL:
        dropped |= {"protocol"}
    kept = _without(config, dropped)
    task = config.get("task")
    if ignore_task and isinstance(task, Mapping):
        recipe = {key: task[key] for key in task_keys if key in task}
        if recipe:
            kept["task"] = recipe
    results_dir = config.get("results_dir")
    results_dir = os.fspath(results_dir) if isinstance(results_dir, str | os.PathLike) else None
    return _canonical(kept, "config", results_dir)


def config_hash(config: Mapping, ignore_task: bool = False, task_keys: Iterable[str] = ()) -> str:
    """First 16 hex chars of sha256 over the canonical JSON of ``config`` (``canonical_config``).

    With ``ignore_task`` (and the ``task_keys`` its command line changed) it is the protocol
    hash: the same training recipe applied to different tasks, one row of a board; grid points
    that differ in a task key (``task.batch_size=16,32``) are different protocols.
    """
    text = json.dumps(canonical_config(config, ignore_task, task_keys), sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: task keys that choose what data a task is measured on, not how a model is trained on it: a
#: command line that sets them (SQuAD v2.0 trained on its dev split, a capped dev set) runs the
#: same protocol
TASK_DATA_KEYS = frozenset({"name", "dataset", "config", "hub_id", "board", "columns", "metrics",
                            "splits", "max_eval_samples", "eval_batch_size"})


def task_keys_of(overrides: Sequence[str]) -> list[str]:
    """The task keys of the training recipe the overrides change (``task.batch_size=16`` ->
    ``batch_size``), not those that choose the task's data (``TASK_DATA_KEYS``)."""
    keys = []
    for override in overrides:
        key = override.lstrip("+~").partition("=")[0]
        if key.startswith("task.") and key.split(".")[1] not in TASK_DATA_KEYS:
            keys.append(key.split(".")[1])
    return sorted(set(keys))


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _git_commit() -> str | None:
    """HEAD of the git checkout this package runs from; None when it is not a checkout."""
    package_root = Path(__file__).resolve().parent.parent
    try:
        result = subprocess.run(
            ["git", "-C", str(package_root), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.split()
    if result.returncode != 0 or len(lines) != 2:
        return None
    # An installed copy inside some other repository (e.g. a venv in a checkout) is no checkout.
    top_level, commit = lines
    return commit if Path(top_level).resolve() == package_root else None


def _git_dirty() -> bool | None:
    """Whether the checkout has uncommitted changes to tracked files (None: not a checkout)."""
    package_root = Path(__file__).resolve().parent.parent
    try:
        result = subprocess.run(
            ["git", "-C", str(package_root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(result.stdout.strip()) if result.returncode == 0 else None


def software_versions() -> dict:
    """Versions of python, torch, lightning and plmbench, the git commit (or None) and whether
    the checkout had uncommitted changes (``git_dirty``: the commit alone does not say what ran)."""
    versions = {"python": platform.python_version()}
    for name in ("torch", "lightning", "plmbench"):
        versions[name] = _distribution_version(name)
    versions["git_commit"] = _git_commit()
    versions["git_dirty"] = _git_dirty() if versions["git_commit"] else None
    return versions


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


def undefined_metric_notes(metrics: Mapping) -> list[str]:
    """A note per metric that is undefined on its evaluation set (NaN or infinite: AUROC over
    examples of one class, the correlation of a constant), which the record holds as null."""
    return [f"metrics.{path} is undefined on this evaluation set (it computed NaN or an "
            "infinity: e.g. AUROC over examples of one class, a correlation of constant "
            "predictions or labels); the record holds null" for path in nonfinite(metrics)]


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


def checkpoint_record(init_from: str) -> dict | None:
    """The ok record of the run a ``ckpt:<run dir>`` (or ``ckpt:<run dir>/model``) names; None
    for any other checkpoint or value, or a run that did not end ok."""
    try:
        run_dir = InitFrom.parse(init_from).run_dir()
    except PlmbenchError:  # no checkpoint setting at all: no run of ours either
        return None
    record = read_record(run_dir) if run_dir is not None else None
    return record if record is not None and record.get("status") == "ok" else None


#: what a run's training cost, by the key it has in a record's ``pretraining`` and its own place
TRAINING_COST = {"tokens": "throughput.train_tokens", "flops": "throughput.train_flops",
                 "wall_time_s": "wall_time_s"}


def pretraining_cost(init_from: str) -> dict | None:
    """What training the checkpoint a run starts from cost: the tokens, FLOPs and wall time of
    the ``ckpt:`` run it names plus that run's own ``pretraining`` (summed along the chain:
    general pretraining, then continued pretraining or distillation, ...), with the run
    directories of the chain, oldest first; zeros from ``scratch``; None for a checkpoint of
    unknown cost (``hf:``, or a run without an ok record). A value some run of the chain did not
    record is None."""
    if str(init_from) == "scratch":
        return {**dict.fromkeys(TRAINING_COST, 0), "runs": []}
    source = checkpoint_record(init_from)
    if source is None:
        return None
    before = source.get("pretraining") or pretraining_cost(source.get("init_from") or "")
    if before is None:
        return None
    cost = {"runs": [*before["runs"], source.get("run_dir") or str(InitFrom.parse(init_from).path)],
            # the recipe of the last pretraining of the chain (a fine-tuning run passes its own on)
            "recipe": source.get("recipe") or before.get("recipe")}
    for key, dotted in TRAINING_COST.items():
        own: Any = source
        for part in dotted.split("."):
            own = own.get(part) if isinstance(own, Mapping) else None
        summable = isinstance(own, int | float) and isinstance(before[key], int | float)
        cost[key] = before[key] + own if summable else None
    return cost


def pretraining_costs(sources: list[str]) -> dict | None:
    """The summed ``pretraining_cost`` of several checkpoints a run reads (a BiLSTM's word
    vectors and biLM); zeros for none; None where any is of unknown cost. Its ``recipe`` is the
    last one the sources name (a word-vector run has none: the biLM's, or an encoder's)."""
    total = pretraining_cost("scratch")
    for source in sources:
        cost = pretraining_cost(source)
        if cost is None:
            return None
        for key in TRAINING_COST:
            summable = isinstance(total[key], int | float) and isinstance(cost[key], int | float)
            total[key] = total[key] + cost[key] if summable else None
        total["runs"] += cost["runs"]
        total["recipe"] = cost.get("recipe") or total.get("recipe")
    return total



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


def run_variant(overrides: Sequence[str]) -> str:
    """The run directory's variant name: the command-line overrides that change the result and
    that the path does not name already, sorted, as ``key:value`` joined by "+" ("" for none),
    e.g. ``optim.lr:0.0003+trainer.max_steps:100``. Values are Hydra's parsed values, so a single
    run and a sweep's job (which Hydra writes back as ``0.0003``, with ``\\:`` escapes) of one
    configuration share a directory. Characters a Hydra override value cannot hold unquoted
    ("/", "=", ",", brackets ...) become "_", so a run directory can be passed back as
    ``init_from=ckpt:<run dir>``; a name over ``MAX_VARIANT`` characters (or
    ``MAX_VARIANT_BYTES`` bytes) is cut and ends in a hash of the whole, so it stays unique."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # boards need none

    kept = []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group
        if key in PATH_KEYS or key.startswith("hydra.") or is_volatile(key):
            continue
        value = override.value()
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        if override.is_delete():
            text = "~"
        kept.append(UNSAFE.sub("_", f"{key}:{text}"))
    name = "+".join(sorted(kept))
    if len(name) > MAX_VARIANT or len(name.encode()) > MAX_VARIANT_BYTES:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = name[: MAX_VARIANT - 9]
        while len(name.encode()) > MAX_VARIANT_BYTES - 9:  # non-ASCII letters: 2-4 bytes each
            name = name[:-1]
        name = f"{name}@{digest}"
    return name


def is_volatile(key: str) -> bool:
    """Whether a dotted config key is one of the ``VOLATILE_KEYS`` or below one."""
    parts = key.split(".")
    return any(".".join(parts[: i + 1]) in VOLATILE_KEYS for i in range(len(parts)))
