"""One run: Hydra composes the config, we build tokenizer + DataModule + LightningModule, the
Lightning Trainer fits and validates, and the run's ``record.json`` is written atomically.

``plmbench run [overrides]`` and ``plmbench run -m [sweep overrides]`` both land in ``main``;
a run whose record already says ok is skipped (``skip_completed``), so a re-run sweep resumes, and
a run killed part-way continues from its last checkpoint (``resume=auto``,
bench/run/checkpoints.py).
``only_failed=true`` (``plmbench run --rerun-failed``) runs only the points whose record failed.
"""

import logging
import signal
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from bench.board_index import record_finished
from bench.compose import CONF_DIR, normalize, resolve_target
from bench.config_identity import config_hash, task_keys_of
from bench.record import SCHEMA_VERSION, Pretraining, Record, evaluated_nothing, record_at
from bench.run.checkpoints import (
    FiniteLoss,
    RngState,
    checkpoint_callbacks,
    checkpoint_dir,
    discard,
    resume_from,
    rows_before,
)
from bench.run.config_check import check_config, check_threads
from bench.run.hub_start import resolve_checkpoints
from bench.run.launch import check_accelerator, check_batching, own_processes, run_batching
from bench.run.progress import EpochBar
from bench.run.provenance import (
    pretraining_costs,
    protocol_config,
    software_versions,
    undefined_metric_notes,
)
from bench.run.recipe import recipe_of
from bench.run.run_dir import (
    LOG_NAME,
    claimed,
    completed,
    effective_overrides,
    run_dir_of,
    run_log,
)
from bench.signals import Terminated, described
from bench.task_baselines import of_task
from bench.task_family import instantiated, task_family
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import get_model
from lit_models.core.finetune import FinetuneMethod
from lit_models.measure.footprint import parameter_count
from lit_models.measure.throughput import Throughput

log = logging.getLogger("plmbench")

#: (one line, was it bad input) per failed run of this process: the CLI exits non-zero after a
#: sweep, with 2 when every failure was bad input (PlmbenchError) and 1 when something crashed
FAILURES: list[tuple[str, bool]] = []


def make_logger(cfg: DictConfig, run_dir: Path, resumed: Path | None = None):
    """The run's metrics logger; a resumed run's CSV keeps the rows logged before its
    checkpoint (Lightning's CSVLogger would start the file afresh)."""
    from lightning.pytorch import loggers

    if cfg.name == "csv":
        logger = loggers.CSVLogger(run_dir, name="logs", version="")
        if resumed and rank_zero_only.rank == 0:  # other ranks' loggers write nothing
            earlier = rows_before(Path(logger.log_dir) / "metrics.csv", resumed)
            logger.experiment.metrics[:0] = earlier  # written back with the run's first rows
        return logger
    if cfg.name == "tensorboard":
        return loggers.TensorBoardLogger(run_dir, name="logs", version="")
    if cfg.name == "wandb":
        return loggers.WandbLogger(project=cfg.project, save_dir=run_dir, name=str(run_dir))
    raise PlmbenchError(f"logger={cfg.name} is unknown: use csv, tensorboard or wandb")


def finetune_method(cfg: DictConfig) -> FinetuneMethod:
    """The run's fine-tuning method, as ``conf/finetune/<name>.yaml`` names it (``_target_``)."""
    return instantiated(cfg.finetune, FinetuneMethod, "finetune",
                        "pick finetune=full|frozen|adapters|ulmfit and its keys")


#: torch's intra-op threads before any run set them
DEFAULT_THREADS = torch.get_num_threads()


def steps_decide(trainer_args: dict) -> None:
    """``trainer.max_steps`` > 0 overrides ``trainer.max_epochs`` (conf/trainer): Lightning stops
    at whichever limit comes first, so the epochs are left unbounded, and the log says so."""
    steps, epochs = trainer_args.get("max_steps", -1), trainer_args.get("max_epochs")
    if steps > 0 and epochs not in (None, -1):
        log.info("trainer.max_steps=%d overrides trainer.max_epochs=%s: training stops after %d "
                 "steps, however many epochs they take", steps, epochs, steps)
        trainer_args["max_epochs"] = -1


def set_threads(threads: int | None) -> None:
    """``trainer.threads``: torch's intra-op threads for the run (null: torch's default, one per
    core, whatever an earlier run of the process set)."""
    check_threads(threads)
    torch.set_num_threads(threads or DEFAULT_THREADS)
    log.info("torch threads: %d", torch.get_num_threads())


def train_and_evaluate(cfg: DictConfig, run_dir: Path, config_hash: str, init_from: InitFrom,
                       pretraining: Pretraining | None) -> dict:
    """Build the task family's modules (the net from ``init_from``, parsed), fit (from
    the last checkpoint of this configuration with ``resume=auto``) and validate at the end, or,
    without a training split, predict; write the family's exports; the record's outcome fields
    (``Record`` field names: a misspelt one fails ``Record.updated``). ``pretraining``: what
    ``init_from`` cost, kept unless the family's net starts from other checkpoints."""
    set_threads(cfg.trainer.get("threads"))
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    arch = get_model(cfg.model.arch)  # resolved once: the family, the net, the export use it
    family = task_family(cfg.task).for_arch(arch, cfg.task)
    finetune = finetune_method(cfg)
    finetune.check(family, cfg)
    model = family.build_net(cfg, arch, init_from)
    net = model.net
    finetune.prepare(net)
    module, dm = family.build(cfg, model, init_from)
    finetune.apply(module, net)
    module.write_predictions_to(run_dir)
    for note in module.result().notes:  # how the family set the run up (a head left untrained)
        log.warning(note)
    trainer_args = OmegaConf.to_container(cfg.trainer, resolve=True)
    steps_decide(trainer_args)
    dm.configure_loaders(**trainer_args.pop("dataloader", {}))
    trainer_args.pop("threads", None)
    compile_backend = trainer_args.pop("compile", False)
    if compile_backend:  # true: inductor; or a torch.compile backend's name
        compiled = module.compile_encoders("inductor" if compile_backend is True
                                           else compile_backend)
        log.info("torch.compile (%s): %s", compile_backend, ", ".join(compiled))
    dm.setup("fit")  # bad data fails here, in one line, before the Trainer starts
    throughput = Throughput()
    checkpoints = checkpoint_dir(run_dir, config_hash)
    resumed = None if cfg.task.splits.train is None else resume_from(cfg.resume, checkpoints)
    trainer = L.Trainer(
        **trainer_args,
        default_root_dir=run_dir,
        logger=make_logger(cfg.logger, run_dir, resumed),
        callbacks=[throughput, LearningRateMonitor(logging_interval="step"), RngState(),
                   FiniteLoss(), *checkpoint_callbacks(cfg.checkpoint, checkpoints),
                   *([EpochBar()] if trainer_args.get("enable_progress_bar", True) else [])],
    )
    batching = run_batching(cfg.task, trainer)
    predictions = {}
    if cfg.task.splits.train is None:  # nothing to fit: predict the eval splits
        predictions = family.predict(trainer, module, dm, run_dir, cfg)
    else:
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
        family.export(module, model, run_dir, cfg)
        if not cfg.checkpoint.keep:
            discard(checkpoints)
    result = module.result()  # the family's part of the record (lit_models/core/outcome.py)
    return {
        "net_config": {"arch": arch.name, **asdict(net.config)},
        "predictions": {**result.predictions, **predictions},
        "outputs": result.outputs,
        "metrics": result.metrics,
        # split -> metric -> how it was computed, where its scorer says (sacreBLEU's signature)
        "metric_signatures": result.metric_signatures,
        "throughput": throughput.summary(),
        # weights, a quantized Linear's counted as its float ones (lit_models/measure/footprint.py)
        "parameters": parameter_count(module),
        # what the fine-tuning method trained (conf/finetune: all, the head, adapters ...)
        "trained_parameters": finetune.trained_parameters(module),
        # the backbone alone, without the task's head (a model's size across tasks); a
        # pretraining net's heads are part of what it trains, so it has none
        "encoder_parameters": None if family.with_heads else parameter_count(net),
        "data": dm.fingerprints,
        "tokenizer": model.tokenizer.fingerprint,
        "analysis": family.analysis(module),
        # processes, and how the recipe's global batch was split over them (a run that trains)
        "batching": batching,
        "steps": trainer.global_step,
        "epochs": trainer.current_epoch,
        "notes": list(result.notes),
        "resumed_from": None if resumed is None else str(resumed),
        # of every checkpoint the net starts from: init_from, or a BiLSTM's pretrained inputs
        "pretraining": pretrained_cost(family.pretrained_from(cfg), cfg.init_from, pretraining),
        # what the run's own pretraining was (masking, pair task, lengths, batch, schedule)
        "recipe": recipe_of(OmegaConf.to_container(cfg, resolve=True)) if family.pretrains
        else None,
        # the task's reference rows with no training (majority class, mean score ...), kept
        # so that a board is a function of records alone (bench/task_baselines.py)
        "baselines": task_baselines(cfg.task),
    }


def pretrained_cost(sources: list[str], init_from: str, cost: Pretraining | None
                    ) -> Pretraining | None:
    """The training cost of the checkpoints a net starts from: ``cost`` (``init_from``'s,
    computed once at the run's start) where they are ``init_from`` alone, else theirs summed (a
    BiLSTM's word vectors and biLM); None where one is no checkpoint setting."""
    if list(sources) == [init_from]:
        return cost
    try:
        return pretraining_costs([InitFrom.parse(s, "pretrained input") for s in sources])
    except PlmbenchError:  # not a checkpoint of ours: of unknown cost
        return None


def task_baselines(task: DictConfig) -> dict | None:
    """The task's baselines as its record keeps them (``bench.task_baselines.of_task``); one that
    cannot be computed is kept as its error, which the board lists, and never fails the run."""
    try:
        return of_task(task_family(task), OmegaConf.to_container(task, resolve=True))
    except Exception as err:  # noqa: BLE001 - the run's own result stands
        error = " ".join(f"{type(err).__name__}: {err}".split())
        log.warning("the task's baseline could not be computed: %s", error)
        return {"error": f"the baseline could not be computed: {error}"}


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM (``scancel``, ``scontrol requeue``, a preemption, ``kill``)
    ended a run, whose record says ``failure_kind: interrupted``; the command stops there (a
    sweep's later points do not start) with this one line, and exits 128 + ``signum``."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = signum


def interrupting_signal(err: BaseException) -> str | None:
    """The signal that ended a run, where ``err`` is its doing: SIGINT for a KeyboardInterrupt
    (or what was raised while handling one: Lightning's Trainer answers it with "attempting
    graceful shutdown" and ``sys.exit(1)``), SIGTERM for Lightning's ``SIGTERMException`` (its
    handler stops the loop at the next batch); None for anything else."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, Terminated):  # plmbench's own SIGTERM handler (bench/signals.py)
            return "SIGTERM"
        if isinstance(err, KeyboardInterrupt):
            return "SIGINT"
        if isinstance(err, SIGTERMException):
            return "SIGTERM"
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def interrupted(err: BaseException) -> bool:
    """Whether a signal ended the run (``interrupting_signal``): Ctrl-C or SIGTERM."""
    return interrupting_signal(err) is not None


def original(err: BaseException) -> BaseException:
    """The failure ``err`` arose from: the exception that was being handled when ``err`` was
    raised (an error in Lightning's teardown after a DDP rank failed, or in logging a failure),
    followed back to the first; ``err`` itself where it says what went wrong on purpose (a
    ``PlmbenchError``'s one line, ``raise ... from``, ``from None``)."""
    seen = {id(err)}
    while (not isinstance(err, PlmbenchError) and err.__cause__ is None
           and not err.__suppress_context__
           and err.__context__ is not None and id(err.__context__) not in seen):
        err = err.__context__
        seen.add(id(err))
    return err


def failure_kind(err: BaseException) -> str:
    """Whose failure it is, as a failed record keeps it: a ``PlmbenchError``'s own kind (input,
    or configuration for a diverging loss), ``environment`` (the machine: a full disk, memory),
    ``interrupted`` (Ctrl-C, SIGTERM), or ``crash`` (anything else). A re-run skips only
    ``configuration``; an interrupted run resumes from its last checkpoint."""
    if isinstance(err, PlmbenchError):
        return err.kind
    if isinstance(err, OSError | MemoryError | torch.cuda.OutOfMemoryError):
        return "environment"
    return "interrupted" if interrupted(err) else "crash"


def record_error(err: BaseException) -> str:
    """One line: bad input is its own message, anything else is prefixed by its type."""
    signal_name = None if isinstance(err, PlmbenchError) else interrupting_signal(err)
    if signal_name is not None:
        by = described(signal.Signals[signal_name])
        return (f"interrupted by {by}; run the same command again to resume it from its last "
                "checkpoint")
    text = str(err) if isinstance(err, PlmbenchError) else f"{type(err).__name__}: {err}"
    return " ".join(text.split())


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def check_evaluated(cfg: DictConfig, record: Record) -> None:
    """A run asked to evaluate that left no metric (and no predictions) is no result."""
    if evaluated_nothing(cfg.task, record.metrics, record.predictions):
        raise PlmbenchError(f"the run evaluated nothing: no metric on {list(cfg.task.splits.eval)}"
                            "; check that the eval splits have rows (task.max_eval_samples, the "
                            "data files)")


def execute(cfg: DictConfig, run_dir: Path, overrides: list[str] | None = None,
            variant: Sequence[str] = (), config: dict | None = None,
            hash_: str | None = None, init_from: InitFrom | None = None) -> Record:
    """Run and record; a failure still writes a complete record with status failed, with its
    kind (``failure_kind``). ``variant``: the overrides that change the configuration
    (``bench.run.run_dir.effective_overrides``); the task keys among them are part of its protocol.

    The record is a ``Record`` from its first line: what the run knows at its start, then its
    outcome and status (``Record.updated``: each value typed, a name that is no field an error).
    Its ``config`` holds the configuration that ran: its ``model`` section is the net actually
    built (a checkpoint's sizes, not the preset's, for ``init_from=hf:``/``ckpt:``), while
    ``config_hash`` identifies the configuration as composed, before anything ran. ``config``,
    ``hash_`` and ``init_from``: the resolved ``cfg``, its hash and its ``init_from`` parsed
    (``check_config``), where the caller has them.
    """
    if config is None:
        config = OmegaConf.to_container(cfg, resolve=True)
        hash_ = config_hash(config)
    if init_from is None:  # a caller that checked nothing (a test's composed config)
        init_from = InitFrom.parse(cfg.init_from)
    record = Record.new(
        schema=SCHEMA_VERSION,
        run_id=f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
        run_dir=str(run_dir),
        model=cfg.model.name,
        label=cfg.label,
        task=cfg.task.name,
        board=cfg.task.board,
        seed=cfg.seed,
        init_from=cfg.init_from,
        pretraining=pretraining_costs([init_from]),  # of the checkpoint it starts from
        # which weights: a hub id's id, revision, commit and weights sha256 (datamodules.hub)
        checkpoint=init_from.identity(),
        overrides=list(overrides or []),
        variant=list(variant),
        config=config,
        config_hash=hash_,
        protocol_hash=config_hash(protocol_config(config), ignore_task=True,
                                  task_keys=task_keys_of(variant)),
        protocol=(config.get("protocol") or {}).get("name"),  # conf/protocol/
        versions=software_versions(),
        hardware={"accelerator": cfg.trainer.accelerator, "devices": cfg.trainer.devices,
                  "precision": cfg.trainer.precision},
        started_at=now(),
    )
    start = time.perf_counter()
    try:
        outcome = train_and_evaluate(cfg, run_dir, hash_, init_from, record.pretraining)
        built = {**config["model"], **outcome.pop("net_config")}
        record = record.updated(**outcome, config={**config, "model": built})
        for note in undefined_metric_notes(record.metrics):  # null in the record, and why
            log.warning(note)
            record = record.updated(notes=[*record.notes, note])
        check_evaluated(cfg, record)
        record = record.updated(status="ok", error=None)
    except BaseException as err:
        first = original(err)  # not what went wrong while handling it
        record = record.updated(status="failed", error=record_error(first),
                                failure_kind=failure_kind(first))
        raise
    finally:
        record = record.updated(wall_time_s=round(time.perf_counter() - start, 3),
                                finished_at=now())
        if rank_zero_only.rank == 0:  # under DDP every rank runs this; one record per run
            record_finished(cfg.results_dir, record.write(run_dir))  # boards read it at once
    return record


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    # the search path's directories of the command line (--config-dir, hydra.searchpath)
    dirs = [source.path for source in hydra_cfg.runtime.config_sources
            if "command-line" in source.provider and source.schema == "file"]
    run_one(cfg, list(hydra_cfg.overrides.task), dirs)


def run_one(cfg: DictConfig, overrides: list[str], dirs: Sequence[str] = ()) -> Path | None:
    """Run the composed ``cfg`` (``overrides`` are the command line's, which name its directory;
    ``dirs`` its ``--config-dir`` search path) unless its record says it ran or another process
    runs it (``bench.run.run_dir.claimed``); its run directory (None: the config was refused before
    it had one). A failure is logged and kept in ``FAILURES``, not raised, so a sweep goes on.
    Under DDP the run starts its own ranks, which run it alone (bench/run/launch.py)."""
    try:
        resolve_target(cfg)  # an analysis's target task, which the config's checks resolve
        init_from = check_config(cfg, overrides)
        normalize(cfg)
        check_accelerator(cfg.trainer)
        check_batching(cfg.task, cfg.trainer)
        config = OmegaConf.to_container(cfg, resolve=True)
        current = config_hash(config)  # once per run: the claim and the record use it
        variant = effective_overrides(overrides, cfg, current, dirs)
        run_dir = run_dir_of(cfg, variant)
        if not completed(run_dir, current, cfg.skip_completed):  # offline, a done point skips
            resolve_checkpoints(cfg, config, init_from)
    except PlmbenchError as err:  # nothing written: the configuration never had a directory
        FAILURES.append((record_error(err), True))
        return None
    try:
        with claimed(run_dir, current, cfg.skip_completed, cfg.only_failed) as go:
            if not go:
                return run_dir
            search = [arg for d in dirs for arg in ("--config-dir", d)]
            with run_log(run_dir), own_processes([__file__, *search, *overrides]):
                record = execute(cfg, run_dir, overrides, variant, config, current, init_from)
    except BaseException as err:
        if interrupted(err):  # the whole command stops: one line (bench.cli), status 130
            previous = record_at(run_dir)
            said = previous is not None and previous.failure_kind == "interrupted"
            raise Interrupted(f"{run_dir}: {record_error(err)}" + (
                " (its record says failure_kind: interrupted)" if said else ""),
                signal.Signals[interrupting_signal(err)]) from None
        if not isinstance(err, Exception):
            raise
        err = original(err)  # as its record says it
        bad_input = isinstance(err, PlmbenchError)
        if not bad_input:
            log.error("run %s failed: %s (traceback in %s)", run_dir, record_error(err),
                      run_dir / LOG_NAME)
        FAILURES.append((f"{run_dir}: {record_error(err)}", bad_input))
        return run_dir
    if rank_zero_only.rank == 0:
        metrics = record.metrics.items()
        shown = {split: {k: round(v, 4) for k, v in values.items()} for split, values in metrics}
        log.info("%s ok in %.0f s: %s", run_dir, record.wall_time_s, shown)
    return run_dir


if __name__ == "__main__":  # Lightning's DDP launcher re-runs this file for each extra rank
    main()
