"""Task families: what a task YAML's ``family`` names (``_target_``, built by Hydra's
``instantiate``) and ``bench/run/execute.py`` calls without knowing which family it is.

A family is a DataModule + a LightningModule + what it writes besides metrics: it trains the
scratch vocabulary on its own training text, builds both modules from the composed config and the
run's ``Model`` (architecture, net, tokenizer: ``lit_models/archs/spec.py``), and after the run
writes its predictions and exports.
"""

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path

import hydra
import lightning as L
from omegaconf import DictConfig, OmegaConf
from torch import nn

from datamodules.base import PlmDataModule
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import Arch, Baseline, Model, models_of_kinds
from lit_models.archs.spec import KINDS
from lit_models.core.build import build_net


class TaskFamily:
    #: whether the net is built with its pretraining heads
    with_heads: bool = False
    #: whether a run pretrains (its record names its recipe: objective, masking, lengths ...)
    pretrains: bool = False
    #: the architecture kinds (``lit_models.archs.spec.KINDS``) this family can train
    kinds: tuple[str, ...] = ("encoder",)

    def for_arch(self, arch: Arch | Baseline, task: Mapping) -> "TaskFamily":
        """The family that trains ``arch`` on ``task``: this one, once ``check_arch`` passes."""
        self.check_arch(arch, task)
        return self

    def check_arch(self, arch: Arch | Baseline, task: Mapping) -> None:
        """Refuse, in one line, an architecture of a kind this family cannot train."""
        if arch.kind not in self.kinds:
            fitting = models_of_kinds(self.kinds)
            raise PlmbenchError(
                f"task {task['name']} trains {' or '.join(self.kinds)} models, and {arch.name} "
                f"is of kind {arch.kind}; pick a preset of {fitting}"
            )

    def vocabulary_corpus(self, task: Mapping) -> tuple[str, Iterable[str]]:
        """(a key identifying the text, the text) a scratch vocabulary is trained on."""
        raise NotImplementedError

    def build_net(self, cfg: Mapping, arch: Arch | Baseline, init_from: InitFrom) -> Model:
        """The run's net with its architecture (``arch``, the run's, resolved once) and
        tokenizer: a Transformer of the model preset from ``init_from`` (``cfg["init_from"]``
        as the run's config check parsed it; ``lit_models/core/build.py``); the families of
        baselines build their own (``lit_models.archs.Baseline``: their ``Model``'s tokenizer
        is their word inputs)."""
        return build_net(arch, cfg["model"], init_from, self.with_heads,
                         lambda: self.vocabulary_corpus(cfg["task"]))

    def build(self, cfg: Mapping, model: Model, init_from: InitFrom
              ) -> tuple[L.LightningModule, PlmDataModule]:
        """(LightningModule, DataModule) of the task ``cfg["task"]`` over ``model``, the net built
        from ``init_from`` (``cfg["init_from"]`` parsed: a fine-tuned checkpoint's head loads
        from it)."""
        raise NotImplementedError

    def pretrained_from(self, cfg: Mapping) -> list[str]:
        """The checkpoints the run's net was pretrained as (``init_from``; a BiLSTM's inputs:
        its word vectors, biLM, encoder), whose training cost the record sums; after
        ``build_net``."""
        return [cfg["init_from"]]

    def predict(self, trainer: L.Trainer, module: L.LightningModule, dm: PlmDataModule,
                run_dir: Path, cfg: Mapping) -> dict[str, str]:
        """Prediction files of the splits a run predicts without scoring them
        (``dm.predicted_splits()``: the eval splits of a task without a training split, else
        ``task.predict_splits``); split -> file relative to ``run_dir``."""
        task = cfg["task"]
        if task["splits"].get("train"):
            raise PlmbenchError(f"task {task['name']}: its family predicts no unlabelled splits; "
                                "remove task.predict_splits")
        raise PlmbenchError(f"task {task['name']} has no training split; give it one")

    def evaluation_outputs(self, module: L.LightningModule, run_dir: Path, cfg: Mapping
                           ) -> dict[str, str]:
        """Write what the last evaluation produced besides metrics (generated text ...);
        split -> file relative to ``run_dir``."""
        return {}

    def export(self, module: L.LightningModule, model: Model, run_dir: Path,
               cfg: Mapping) -> None:
        """Write what the run leaves besides its record (a trained model, ...); ``model.net``
        is the trained net."""

    def analysis(self, module: L.LightningModule) -> dict | None:
        """What an analysis found besides metrics (curves, statistics per layer and head), kept
        in the record's ``analysis``; None for a family that trains and evaluates only."""
        return None

    def baseline(self, task: Mapping) -> dict[str, dict[str, float]] | None:
        """Metrics per eval split of a reference computed from the task's data alone, with no
        training, that every score of the task is read against; None: the family has none."""
        return None

    def baselines(self, task: Mapping) -> dict[str | None, dict[str, dict[str, float]]]:
        """Every reference row of the task's board that needs no run: row name -> metrics per
        eval split; the name None is ``baseline``'s (a majority class), others name a method
        fitted on the task's data alone (a bag-of-words classifier)."""
        metrics = self.baseline(task)
        return {} if metrics is None else {None: metrics}

    def eval_labels(self, task: Mapping) -> dict[str, list] | None:
        """The gold labels of each eval split, capped as the task caps them, as the data reads
        now: what ``baseline`` scores, which a board checks against the labels the runs'
        prediction files hold; None where the family has no such labels."""
        return None


class ByKind(TaskFamily):
    """One family per architecture kind, as a task YAML names them (``family: {_target_:
    lit_models.core.family.ByKind, encoder: {...}, encoder-decoder: {...}}``): GLUE is
        classification for encoders and decoders, text-to-text for encoder-decoders (T5)."""

    def __init__(self, **families: TaskFamily) -> None:
        unknown = sorted(set(families) - set(KINDS))
        if unknown:
            raise PlmbenchError(f"family kinds {unknown} are unknown: use {list(KINDS)}")
        self.families = families
        self.kinds = tuple(families)

    def for_arch(self, arch: Arch | Baseline, task: Mapping) -> TaskFamily:
        self.check_arch(arch, task)
        return self.families[arch.kind].for_arch(arch, task)

    def baseline(self, task: Mapping) -> dict[str, dict[str, float]] | None:
        """The families of one task read the same data: the first baseline any of them has."""
        return next((b for f in self.families.values() if (b := f.baseline(task))), None)

    def baselines(self, task: Mapping) -> dict[str | None, dict[str, dict[str, float]]]:
        """The first family's with any."""
        return next((b for f in self.families.values() if (b := f.baselines(task))), {})

    def eval_labels(self, task: Mapping) -> dict[str, list] | None:
        """The first family's with any."""
        return next((b for f in self.families.values() if (b := f.eval_labels(task))), None)


#: a target task's settings an analysis or compression task overrides where it sets them
TARGET_OVERRIDES = ("max_eval_samples", "max_train_samples", "eval_batch_size", "batch_size",
                    "max_length")


def target_task(task: Mapping, train: bool = False) -> dict:
    """The task an analysis or a compression works on (its ``target``, which ``bench`` resolves
    to a task config: a named task's, or the one its fine-tuned run trained on), as a plain dict,
    with the settings of ``TARGET_OVERRIDES`` that ``task`` sets, ``task``'s eval splits and,
    unless ``train``, no training split (an analysis only evaluates)."""
    target = task.get("target")
    if not isinstance(target, Mapping):
        raise PlmbenchError(f"task {task['name']} has no resolved target task; set task.target "
                            "to a task name or init_from=ckpt:<a fine-tuned run>")
    target = OmegaConf.to_container(target, resolve=True) if isinstance(target, DictConfig) \
        else copy.deepcopy(dict(target))
    target.update({key: task[key] for key in TARGET_OVERRIDES if task.get(key) is not None})
    target["splits"] = {"train": target["splits"]["train"] if train else None,
                        "eval": list(task["splits"]["eval"])}
    return target


def target_family(target: Mapping, arch: Arch) -> "TaskFamily":
    """The family of a target task, for ``arch``."""
    return hydra.utils.instantiate(target["family"]).for_arch(arch, target)


def check_predicted_rows(task: Mapping, split: str, predicted: int, examples: int) -> None:
    """A prediction file holds one row per example of its split, or is not written (a
    submission missing rows is refused by the benchmark's server)."""
    if predicted != examples:
        raise PlmbenchError(
            f"task {task['name']}: {predicted} predictions for the {examples} examples of split "
            f"{split}; a prediction file needs one row per example: check the split's data"
        )


def check_max_length(task: Mapping, net: nn.Module) -> None:
    """A task may not cut inputs longer than the net's position embeddings cover."""
    if task["max_length"] > net.config.max_length:
        raise PlmbenchError(
            f"task.max_length={task['max_length']} exceeds the {net.config.max_length} positions "
            f"of the model; set task.max_length<={net.config.max_length}"
        )



class NotExported:
    """Mixed into a family whose model (``model_name``) transformers has no class for:
    ``save_model=true`` is refused before anything runs, and nothing is exported."""

    model_name: str

    def check_export(self, cfg: Mapping, model: Model) -> None:
        if cfg["save_model"]:
            raise PlmbenchError(f"task {cfg['task']['name']}: transformers has no "
                                f"{self.model_name} to export to; run without save_model=true")

    def export(self, module, model, run_dir, cfg) -> None:
        """Nothing: ``check_export`` refused ``save_model=true``."""
