"""Checks of a composed run configuration before anything runs or is written.

Hydra composes whatever YAML and overrides it is given (``+trainer.max_step=3``,
``trainer.max_steps=abc``, a task YAML of one's own with ``text_fileds``) and the run would
fail later, or worse, train something else than asked. ``check_config`` refuses such a config in
one line (``PlmbenchError``: exit status 2, no record), each section against what reads it:

- keys: the top level and ``checkpoint`` against ``conf/config.yaml``; ``model`` against its
  architecture's config fields and the preset keys (``lit_models.core.build.check_preset``);
  ``trainer`` against Lightning's ``Trainer`` arguments (plus ``compile``, ``dataloader`` and
  ``threads``);
  ``task``, ``optim``, ``logger``, ``objective`` and ``protocol`` against the keys of the YAMLs of
  their group in ``conf/`` (a new key is known once a YAML of its group uses it); unknown keys name
  the nearest known one (``datamodules.keys``); ``finetune``'s keys are its method's arguments,
  checked as the run builds it;
- types: ``trainer`` values against ``Trainer``'s annotations, ``model`` values against the
  architecture's config dataclass;
- values: a learning rate that trains (> 0), sample caps and batch sizes that leave something
  to train on and to evaluate (``task.max_eval_samples=0`` would record an "ok" run that
  evaluated nothing), step and epoch budgets;
- paths: the label and the task name, which name the run's directory, stay inside
  ``results_dir`` (no ``..``, no absolute path); no part of them or of ``results_dir`` is
  longer than a file system's names (255 bytes); ``init_from`` names a directory that exists,
  with a Hugging Face checkpoint's config.json and weights where it names one, or a well-formed
  hub id (resolved when the run starts: no network here);
- seeds: within the range NumPy's RNG takes (0 .. 2**32 - 1);
- data: the task's training split (or its eval splits where it trains on none) is in the
  mirror, or the hub can give it;
- the launcher of a sweep (``check_launcher``): ``hydra/launcher=slurm`` where this machine has
  SLURM's commands.

These run before the run imports torch and Lightning (``bench.cli.cmd_run``), so what they
find is one line within a second, not after the seconds a run takes to load.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import shutil
import subprocess
import types
import typing
from collections.abc import Mapping, Sequence

import hydra
from omegaconf import DictConfig, OmegaConf

from bench.compose import CONF_DIR
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.keys import check_keys

#: config groups of the root config (conf/config.yaml's defaults) and the study block
GROUPS = ("model", "task", "trainer", "optim", "objective", "logger", "study", "finetune",
          "protocol")
#: run-config keys that are not Lightning Trainer arguments (bench/run/execute.py pops them)
TRAINER_EXTRAS = ("compile", "dataloader", "threads")
#: task keys whose values are checked by what reads them (Hydra's instantiate, the boards, the
#: word-vector family's word sets, named by the user: ``intrinsic.similarity.<set>``)
TASK_OPAQUE = ("family", "columns", "intrinsic")
#: the largest seed NumPy's legacy RNG (``np.random.seed``) accepts
MAX_SEED = 2**32 - 1
#: the longest file or directory name most file systems take (bytes; ext4, XFS, APFS, NTFS)
NAME_MAX = 255
#: bytes of a split's name kept for the suffixes of its prediction files (``.null_odds.json``)
SPLIT_ROOM = 32


def _load(path) -> dict:
    config = OmegaConf.to_container(OmegaConf.load(path))
    return config if isinstance(config, dict) else {}


def _merge_keys(tree: dict, config: Mapping, opaque: Sequence[str] = ()) -> dict:
    """``tree`` (key -> the tree of its keys, or None) grown by ``config``'s keys; a defaults
    entry placed at a package (``/task/pretrain/pubmed@corpora.pubmed``) adds its first key, whose
    entries are named by the YAML's author (not checked further)."""
    packaged = set()  # a whole config placed there: its keys are that config's, not checked
    for entry in config.get("defaults") or []:
        package = str(entry).partition("@")[2].split(".")[0].strip()
        if package and package != "_here_":
            tree[package] = None
            packaged.add(package)
    for key, value in config.items():
        if key == "defaults" or key in packaged:
            continue
        sub = tree.setdefault(key, None)
        if isinstance(value, Mapping) and key not in opaque:
            tree[key] = _merge_keys(sub or {}, value)
    return tree


@functools.cache
def known_tree(group: str) -> dict:
    """The keys (nested) the YAMLs of ``conf/<group>/`` use, shared bases included."""
    tree: dict = {}
    for path in sorted((CONF_DIR / group).rglob("*.yaml")):
        _merge_keys(tree, _load(path), TASK_OPAQUE if group == "task" else ())
    return tree


def check_tree(config: Mapping, tree: dict, where: str, prefix: str) -> None:
    """``config``'s keys, nested, against ``tree`` (``known_tree``)."""
    check_keys(config, tree, where, prefix)
    for key, value in config.items():
        if isinstance(value, Mapping) and tree.get(key):
            check_tree(value, tree[key], where, f"{prefix}{key}.")


def conforms(value: object, hint: object) -> bool:
    """Whether ``value`` (a YAML scalar, list or mapping) fits the type annotation ``hint``;
    True for annotations it cannot judge (a class, a callable)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arg) for arg in args)
    if origin is typing.Literal:
        return any(value == arg and type(value) is type(arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple, Sequence, typing.Sequence):
        inner = args[0] if args else typing.Any
        return isinstance(value, list | tuple) and all(conforms(v, inner) for v in value)
    if origin in (dict, Mapping, typing.Mapping):
        return isinstance(value, Mapping)
    return True


def check_types(config: Mapping, hints: Mapping[str, object], prefix: str) -> None:
    for key, value in config.items():
        hint = hints.get(key)
        if hint is not None and not conforms(value, hint):
            shown = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
            raise PlmbenchError(f"{prefix}{key}={value!r} is not of type {shown}; give it a "
                                "value of that type")


@functools.cache
def trainer_hints() -> dict[str, object]:
    import lightning as L

    return typing.get_type_hints(L.Trainer.__init__)


def check_threads(threads: object) -> None:
    """``trainer.threads``: a number of torch threads >= 1, or null (torch's default)."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise PlmbenchError(f"trainer.threads={threads!r}: give a number of threads >= 1, or null "
                            "for torch's default")


def check_trainer(trainer: Mapping) -> None:
    from datamodules.base import LoaderOptions

    check_keys(trainer, {*trainer_hints(), *TRAINER_EXTRAS} - {"return"}, "trainer", "trainer.")
    loaders = trainer.get("dataloader") or {}
    check_keys(loaders, {f.name for f in dataclasses.fields(LoaderOptions)}, "trainer",
               "trainer.dataloader.")
    check_types({k: v for k, v in trainer.items() if k not in TRAINER_EXTRAS}, trainer_hints(),
                "trainer.")
    check_threads(trainer.get("threads"))
    for key in ("max_steps", "max_epochs"):
        value = trainer.get(key)
        if isinstance(value, int) and value < -1:
            raise PlmbenchError(f"trainer.{key}={value}: use a number of {key[4:]} >= 0, or -1 "
                                "for no limit")


def check_model(model: Mapping) -> None:
    """A Transformer preset against its architecture's config fields; a model that is no
    Transformer (``Baseline``: its family reads the preset) against the keys presets use."""
    from lit_models.archs import Baseline, get_arch, get_model
    from lit_models.core.build import check_preset

    if isinstance(get_model(model.get("arch")), Baseline):
        check_tree(model, known_tree("model"), f"model={model.get('name')}", "model.")
        return
    arch = get_arch(model.get("arch"))
    check_preset(arch, model)
    check_types(model, typing.get_type_hints(arch.config), "model.")


def _positive(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def check_optim(optim: Mapping) -> None:
    check_tree(optim, known_tree("optim"), "optim", "optim.")
    lr = optim.get("lr")
    if not _positive(lr):
        raise PlmbenchError(f"optim.lr={lr!r}: a learning rate is a positive number (0 trains "
                            "nothing); e.g. optim.lr=1e-4, or leave it to the preset's")
    for key in ("weight_decay", "warmup_ratio"):
        value = optim.get(key, 0)
        if not (isinstance(value, int | float) and 0 <= value and (key != "warmup_ratio"
                                                                   or value <= 1)):
            bound = "between 0 and 1" if key == "warmup_ratio" else ">= 0"
            raise PlmbenchError(f"optim.{key}={value!r}: use a number {bound}")


def check_task(task: Mapping) -> None:
    check_tree(task, known_tree("task"), f"task {task.get('name')}", "task.")
    for key in ("max_train_samples", "max_eval_samples"):
        value = task.get(key)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool)
                                      and value > 0):
            what = "train on" if key == "max_train_samples" else "evaluate"
            raise PlmbenchError(f"task.{key}={value!r} leaves nothing to {what}: cap it at a "
                                f"positive number of rows, or null for the whole split")
    for key in ("batch_size", "eval_batch_size", "max_length"):
        value = task.get(key)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool)
                                      and value > 0):
            raise PlmbenchError(f"task.{key}={value!r}: use a positive whole number")


def check_objective(objective: Mapping | None) -> None:
    if objective is None:
        return
    target = objective.get("_target_")
    known = {key for path in (CONF_DIR / "objective").glob("*.yaml")
             if (config := _load(path)).get("_target_") == target for key in config}
    try:
        parameters = inspect.signature(hydra.utils.get_class(target)).parameters
    except Exception:  # noqa: BLE001 - instantiate names a bad target in its own line
        parameters = {}
    known |= {name for name, p in parameters.items() if p.kind != p.VAR_KEYWORD}
    check_keys(objective, known | {"_target_"}, f"objective {objective.get('name')}",
               "objective.")


def check_seeds(config: Mapping, prefix: str = "") -> None:
    """Every ``seed`` of the config (the run's, and a task's draws: ``task.seed``,
    ``task.corpus.seed``) is a whole number the RNGs accept: NumPy's (and so Lightning's
    ``seed_everything``) take 0 .. 2**32 - 1. A null ``seed`` below the top level is none."""
    for key, value in config.items():
        if isinstance(value, Mapping):
            check_seeds(value, f"{prefix}{key}.")
        elif key == "seed" and (value is not None or not prefix):
            if not isinstance(value, int) or isinstance(value, bool):
                raise PlmbenchError(f"{prefix}seed={value!r}: a seed is a whole number")
            if not 0 <= value <= MAX_SEED:
                raise PlmbenchError(f"{prefix}seed={value} is out of the range NumPy's RNG "
                                    f"accepts: use a seed from 0 to {MAX_SEED} (2**32 - 1)")


def check_name_lengths(path: object, key: str, room: int = 0) -> None:
    """Every part of ``path`` fits a file system's name (``NAME_MAX`` bytes, ``room`` of them
    kept for what a run adds: a split's ``.null_odds.json``)."""
    for part in str(path).split("/"):
        size = len(part.encode("utf-8", "surrogateescape"))
        if size + room > NAME_MAX:
            shown = part if len(part) <= 40 else f"{part[:40]}..."
            kept = f", {room} of them kept for file suffixes" if room else ""
            raise PlmbenchError(f"{key}: its part {shown!r} is {size} bytes, longer than a file "
                                f"system's names take ({NAME_MAX} bytes{kept}); use a shorter "
                                f"{key}")


def check_path_part(value: object, key: str, room: int = 0) -> None:
    """``value`` names directories under ``results_dir`` (``glue/rte``, ``bert-tiny-scratch/tapt``):
    relative, with no empty, ``.`` or ``..`` part, so the run stays inside its results dir, and
    no part longer than a file system's name (``check_name_lengths``)."""
    text = str(value)
    parts = text.split("/")
    if not text or text.startswith(("/", "~")) or "\0" in text or any(
            part in ("", ".", "..") for part in parts):
        raise PlmbenchError(f"{key}={text!r} would place the run outside results_dir (or in an "
                            f"unnamed directory); use a name of plain parts such as "
                            f"{key}=my-run or {key}=group/my-run")
    check_name_lengths(text, key, room)


def check_config(cfg: DictConfig, overrides: Sequence[str] = ()) -> InitFrom:
    """Every check of the module on the composed ``cfg``; one PlmbenchError line at the first
    problem. ``overrides`` only serve the message of a config that does not resolve. Returns
    ``init_from`` parsed, once: what the run passes on typed (the config keeps its text)."""
    try:
        config = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # noqa: BLE001 - an interpolation that fails, in one line
        reason = " ".join(str(err).split("\n")[0].split())
        raise PlmbenchError(f"{' '.join(overrides)}: the config does not resolve ({reason}); "
                            "fix the override or YAML it names") from None
    root = {k: v for k, v in _load(CONF_DIR / "config.yaml").items() if k != "defaults"}
    check_keys(config, {*root, *GROUPS, "hydra"}, "the run config")
    # what reads only files comes first: the checks below load the architectures (torch)
    start = check_init_from(config)
    check_data(config["task"])
    check_keys(config.get("checkpoint") or {}, root["checkpoint"], "checkpoint", "checkpoint.")
    check_tree(config.get("logger") or {}, known_tree("logger"), "logger", "logger.")
    # a protocol's files are global (they set optim, task, trainer too): its own block's keys
    check_tree(config.get("protocol") or {}, known_tree("protocol")["protocol"], "protocol",
               "protocol.")
    check_model(config["model"])
    check_trainer(config["trainer"])
    check_optim(config["optim"])
    check_task(config["task"])
    check_objective(config.get("objective"))
    check_seeds({key: value for key, value in config.items() if key != "hydra"})
    check_name_lengths(config.get("results_dir"), "results_dir")
    check_path_part(config["label"], "label")
    check_path_part(config["task"].get("name"), "task.name")
    splits = config["task"].get("splits") or {}
    evals = splits.get("eval") or []
    for split in [splits.get("train"), *([evals] if isinstance(evals, str) else evals)]:
        if split is not None:  # eval splits name prediction files: <run dir>/predictions/<split>
            check_path_part(split, "task.splits", room=SPLIT_ROOM)
    check_start(config)
    return start


#: the submitit launcher's class (hydra-submitit-launcher), and the SLURM commands it runs
SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
SLURM_COMMANDS = ("sbatch", "srun", "squeue", "scontrol")


def check_launcher(hydra: Mapping) -> None:
    """A sweep sent to SLURM (``hydra/launcher=slurm``) from a machine without SLURM's commands,
    or whose SLURM controller does not answer (``scontrol ping``): one line, where submitit would
    end in a traceback ("Could not detect srun", sbatch's own errors)."""
    if (hydra.get("launcher") or {}).get("_target_") != SLURM_LAUNCHER:
        return
    missing = [command for command in SLURM_COMMANDS if shutil.which(command) is None]
    if missing:
        raise PlmbenchError(
            f"hydra/launcher=slurm: this machine has no SLURM ({', '.join(missing)} not on PATH); "
            "submit from a cluster's login node, or leave out hydra/launcher=slurm to run the "
            "sweep here (hydra/launcher=local: parallel local jobs)")
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        said = " ".join((ping.stdout + ping.stderr).split()) or f"exit status {ping.returncode}"
        answered = ping.returncode == 0 and "DOWN" not in said
    except subprocess.TimeoutExpired:
        said, answered = "no answer in 30 s", False
    if not answered:
        raise PlmbenchError(
            f"hydra/launcher=slurm: SLURM's controller does not answer (scontrol ping: "
            f"{said[:300]}); start slurmctld or submit from a node where `sinfo` works")


def check_data(task: Mapping) -> None:
    """The task's training split (from ``train_source`` where it names one: XQuAD, the open-QA
    readers), or without one its eval splits, can be loaded (``datamodules.sources.check_split``),
    for a task that reads its own dataset (an analysis reads its target's). A family may derive
    eval splits from the training data (pretraining's ``heldout``) or from word sets
    (``embeddings/*``): they are checked as they load."""
    from datamodules.sources import check_split

    splits = task.get("splits")
    if not isinstance(splits, Mapping):
        return
    evals = splits.get("eval") or []
    source = (task.get("train_source") if splits.get("train") else None) or task
    dataset, config = (source.get(key) if isinstance(source, Mapping) else None
                       for key in ("dataset", "config"))
    if not isinstance(dataset, str) or not isinstance(config, str):
        return
    read = [splits["train"]] if splits.get("train") else [evals] if isinstance(evals, str) \
        else evals
    for split in read:
        if isinstance(split, str):
            check_split(dataset, config, split, source.get("hub_id"))


def check_init_from(config: Mapping) -> InitFrom:
    """``init_from`` parsed: a checkpoint directory that is there, with a Hugging Face
    checkpoint's config.json and weights where it names one, or a well-formed hub id."""
    start = InitFrom.parse(config.get("init_from"))
    start.check()  # one line where there is none
    return start


def check_start(config: Mapping) -> None:
    """Where the run starts: ``resume`` a known mode (``init_from``: ``check_init_from``)."""
    from bench.run.checkpoints import RESUME_MODES

    if config.get("resume") not in RESUME_MODES:
        raise PlmbenchError(f"resume={config.get('resume')!r} is unknown: use "
                            f"{' or '.join(RESUME_MODES)}")
