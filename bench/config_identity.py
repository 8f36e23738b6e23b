"""A run's configuration identity: what makes two runs "the same experiment" (DESIGN.md
contract 10). ``canonical_config`` is the configuration as the hashes see it (no seed, paths,
label or logging; absolute paths shortened), ``config_hash`` its digest (a re-run skips only a
record of the same hash) and, with the task left out but for the keys a command line changed
(``task_keys_of``), the protocol hash that makes one row of a board; ``run_variant`` names the run
directory of the overrides that change the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from datamodules.errors import PlmbenchError

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
#: config keys that a run's checkpoint decides, not its protocol (a pruned checkpoint's heads, each
#: seed's own): left out of the protocol hash, whose ``init_from`` names the checkpoint's protocol
#: (``bench.run.provenance.protocol_config``)
CHECKPOINT_OUTCOMES = frozenset({"model.pruned_heads"})
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
    command line changed, such as a grid's ``task.batch_size``) and the ``CHECKPOINT_OUTCOMES``:
    the training recipe. The
    default fine-tuning method (``finetune=full``, every weight trains) is what every run did
    before the ``finetune`` group existed: it is left out, so their records keep their hashes;
    so is the default protocol (``protocol=paper``, each preset's own recipe: conf/protocol/),
    whose settings are those runs' own."""
    dropped = VOLATILE_KEYS | ({"task"} | CHECKPOINT_OUTCOMES if ignore_task else set())
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
