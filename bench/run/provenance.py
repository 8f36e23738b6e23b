"""Where a run's result came from, as its record keeps it: the software it ran on
(``software_versions``: python, torch, lightning, plmbench, the git commit and whether the
checkout had uncommitted changes), notes on metrics undefined on its evaluation set, and what
training the checkpoint it starts from cost (``pretraining_costs``: summed along the chain of
``ckpt:`` runs behind it, read from their typed records), and the protocol of each checkpoint it
starts from (``protocol_config``).
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.record import Pretraining, checkpoint_record
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.strict_json import nonfinite

#: the checkout plmbench runs from (bench/run/provenance.py's grandparent's parent)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
#: what a run's training cost, by the key it has in a record's ``pretraining`` and its own place
TRAINING_COST = {"tokens": "throughput.train_tokens", "flops": "throughput.train_flops",
                 "wall_time_s": "wall_time_s"}


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _git_commit() -> str | None:
    """HEAD of the git checkout this package runs from; None when it is not a checkout."""
    package_root = PACKAGE_ROOT
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
    package_root = PACKAGE_ROOT
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


def undefined_metric_notes(metrics: Mapping) -> list[str]:
    """A note per metric that is undefined on its evaluation set (NaN or infinite: AUROC over
    examples of one class, the correlation of a constant), which the record holds as null."""
    return [f"metrics.{path} is undefined on this evaluation set (it computed NaN or an "
            "infinity: e.g. AUROC over examples of one class, a correlation of constant "
            "predictions or labels); the record holds null" for path in nonfinite(metrics)]


def _summed(total: dict | None, cost: dict | None) -> dict | None:
    """Two costs added key by key (None where either lacks a value); None where either is."""
    if total is None or cost is None:
        return None
    summed = {"runs": [*(total.get("runs") or ()), *(cost.get("runs") or ())],
              "recipe": cost.get("recipe") or total.get("recipe")}
    for key in TRAINING_COST:
        mine, theirs = total.get(key), cost.get(key)
        summable = isinstance(mine, int | float) and isinstance(theirs, int | float)
        summed[key] = mine + theirs if summable else None
    return summed


def _cost(start: InitFrom, seen: frozenset[str] = frozenset()) -> dict | None:
    """What training the checkpoint ``start`` names cost: the tokens, FLOPs and wall time of the
    ``ckpt:`` run it names plus that run's own ``pretraining`` (summed along the chain: general
    pretraining, then continued pretraining or distillation, ...), with the run directories of
    the chain, oldest first; zeros from ``scratch``; None for a checkpoint of unknown cost
    (``hf:``, a run without an ok record, a chain that returns to a run it passed). A value some
    run of the chain did not record is None."""
    if start.scratch:
        return {**dict.fromkeys(TRAINING_COST, 0), "runs": []}
    source = checkpoint_record(start)
    where = str(start.run_dir())
    if source is None or where in seen:
        return None
    before = source.pretraining.to_dict() if source.pretraining is not None else {}
    if not before:  # a record from before runs kept their pretraining: its chain, traced
        try:
            before = _cost(InitFrom.parse(source.init_from), seen | {where})
        except PlmbenchError:  # a record with no init_from it can be traced by
            return None
    own = {key: source.at(dotted) for key, dotted in TRAINING_COST.items()}
    # the recipe of the last pretraining of the chain (a fine-tuning run passes its own on)
    return _summed(before, {**own, "runs": [source.run_dir or str(start.path)],
                            "recipe": source.recipe})


def pretraining_costs(sources: Sequence[InitFrom]) -> Pretraining | None:
    """The summed training cost of the checkpoints a run starts from (``init_from``, or a
    BiLSTM's word vectors and biLM); zeros for ``scratch`` or none; None where any is of unknown
    cost. Its ``recipe`` is the last one the sources name (a word-vector run has none: the
    biLM's, or an encoder's)."""
    total: dict | None = {**dict.fromkeys(TRAINING_COST, 0), "runs": [], "recipe": None}
    for source in sources:
        total = _summed(total, _cost(source))
    return None if total is None else Pretraining.of(total, "pretraining")


#: config keys that name a checkpoint a run starts from (a distillation's teacher too)
CHECKPOINT_KEYS = (("init_from",), ("task", "teacher"))


def protocol_config(config: Mapping) -> dict:
    """``config`` as its protocol hash reads it: each checkpoint a plmbench run left (``init_from``,
    a distillation's ``task.teacher``: ``ckpt:<run dir>``) named by that run's task and protocol
    hash (``run:<task>:<hash>``) rather than its path, which names a seed. The seeds of a protocol
    that each start from their own seed's run of another (each fine-tuned seed pruned or
    distilled: a study's ``{entry@seed}``) are then one protocol, one row of a board, as seeds
    that start from one checkpoint are; checkpoints of one protocol on other tasks (each end
    task's TAPT model) stay apart, and any other checkpoint stays as its path names it."""
    config = dict(config)
    for path in CHECKPOINT_KEYS:
        parent = config
        for key in path[:-1]:
            if not isinstance(parent.get(key), Mapping):
                break
            parent[key] = parent = dict(parent[key])
        else:
            value = parent.get(path[-1])
            if isinstance(value, str) and value.startswith("ckpt:"):
                try:
                    record = checkpoint_record(InitFrom.parse(value, ".".join(path)))
                except PlmbenchError:
                    record = None
                if record is not None and record.protocol_hash:
                    parent[path[-1]] = f"run:{record.task}:{record.protocol_hash}"
    return config
