"""Sequence classification and regression fine-tuning (Devlin et al. 2019, §4.1).

The architecture's classification head (``lit_models/nets/heads.py``) maps the encoder's output
to label scores, trained with cross-entropy (classification) or mean squared error (STS-B's 0..5
score, num_labels = 1). ``Classification`` is the task family: GLUE-style DataModule, this
module, GLUE-format prediction files of every evaluated split (with the gold labels, for
``plmbench significance``; ``datamodules/predictions.py``) and of the splits a run predicts
(unlabelled test sets), and the export of the fine-tuned model with ``save_model``. A fine-tuned
head loaded with ``init_from`` (GLUE AX from an MNLI model, or further fine-tuning) has its
classes put in the task's order by their names.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from datamodules import glue
from datamodules.collate import encoder_inputs
from datamodules.errors import PlmbenchError
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.predictions import submission_vocabulary, write_predictions
from lit_models.archs import Capabilities, Model
from lit_models.core.family import TaskFamily, check_max_length, check_predicted_rows
from lit_models.core.labels import NEW_HEAD, checkpoint_labels, label_order, reorder_rows
from lit_models.core.module import PlmModule
from lit_models.interop.hf import head_mismatch, load_head, to_hf
from lit_models.metrics.classification import (
    class_probabilities,
    hard_probabilities,
    label_metrics,
    label_predictions,
)


class LitClassifier(PlmModule):
    def __init__(
        self,
        encoder: nn.Module,
        capabilities: Capabilities,
        head: nn.Module,
        num_labels: int,
        metrics: Sequence[str],
        eval_splits: Sequence[str],
        optim: Mapping,
        class_weights: Sequence[float] | None = None,
    ) -> None:
        super().__init__(optim, encoder.config.num_hidden_layers)
        self.encoder = encoder
        self.head = head
        self.num_labels = num_labels
        self.eval_splits = list(eval_splits)
        #: encoders with global attention (Longformer, Beltagy et al. 2020 §6) give it to [CLS]
        self.global_attention = capabilities.global_attention
        #: token types go to nets that read segments (BERT's segment embeddings, XLNet's
        #: relative segments) only: GPT-2 would read the all-zero types of a one-segment
        #: vocabulary as extra token embeddings
        self.segments = capabilities.token_types
        self.split_metrics = nn.ModuleList(label_metrics(metrics, num_labels, indexed=True)
                                           for _ in eval_splits)
        #: split -> (example index, (prediction, gold label)) of the last evaluation, in order
        self.outputs: dict[str, list[tuple[int, tuple]]] = {}
        self._collected: list[list[torch.Tensor]] = []
        #: the cross-entropy's weight of each class (an imbalanced task's), None: all 1
        self.register_buffer("class_weights", None if class_weights is None
                             else torch.tensor(class_weights, dtype=torch.float))

    def encode(self, batch: Mapping[str, torch.Tensor]):
        """The encoder's output on the batch's sequences."""
        extra = {}
        if self.global_attention:  # the pooled first token attends to, and is seen by, all
            first = torch.zeros_like(batch["input_ids"])
            first[:, 0] = 1
            extra["global_attention_mask"] = first
        inputs = encoder_inputs(batch)
        if not self.segments:
            inputs["token_type_ids"] = None
        return self.encoder(**inputs, **extra)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        logits = self.head(self.encode(batch))
        return logits.squeeze(-1) if self.num_labels == 1 else logits

    def loss(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.num_labels == 1:
            return F.mse_loss(scores, labels.to(scores.dtype))
        weights = None if self.class_weights is None else self.class_weights.to(scores.dtype)
        return F.cross_entropy(scores, labels, weight=weights)

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        scores = self(batch)
        loss = self.distilled(self.loss(scores, batch["labels"]), scores, batch)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        scores = self(batch)
        split = self.eval_splits[dataloader_idx]
        loss = self.loss(scores, batch["labels"])
        self.log(f"{split}/loss", loss, add_dataloader_idx=False, sync_dist=True)
        metrics = self.split_metrics[dataloader_idx]
        if self.num_labels == 1:
            metrics.update(batch["labels"], scores=scores.float())
        else:
            predicted = label_predictions(class_probabilities(scores, self.num_labels),
                                          self.num_labels)
            if "index" in batch:  # what pairs examples by index reads (AX-g's gender parity)
                predicted["indexed_labels"] = torch.stack(
                    [batch["index"].long(), predicted["labels"].long()], 1)
            metrics.update(batch["labels"], **predicted)
        if "index" in batch:  # kept on the device: read once, at the epoch's end
            chosen = scores.float() if self.num_labels == 1 else scores.argmax(-1)
            self._collected[dataloader_idx].append(torch.stack(
                [batch["index"].to(chosen.dtype), chosen, batch["labels"].to(chosen.dtype)], 1))

    def on_validation_epoch_start(self) -> None:
        self._collected = [[] for _ in self.eval_splits]

    def on_validation_epoch_end(self) -> None:
        for i, (split, metrics) in enumerate(zip(self.eval_splits, self.split_metrics,
                                                 strict=True)):
            if not self.trainer.sanity_checking:
                self.record_metrics(split, metrics.compute())
                self.outputs[split] = self.gather_indexed(self._example_outputs(i))
            metrics.reset()

    def _example_outputs(self, split_index: int) -> list[tuple[int, tuple]]:
        """This process's (example index, (prediction, gold)) pairs of one eval split."""
        rows = self._collected[split_index]
        if not rows:
            return []
        convert = float if self.num_labels == 1 else int
        return [(int(index), (convert(prediction), convert(gold)))
                for index, prediction, gold in torch.cat(rows).tolist()]

    def predict_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        scores = self(batch)
        return scores if self.num_labels == 1 else scores.argmax(-1)


def fine_tuned_head(head: nn.Module, task: Mapping, init_from: InitFrom,
                    names: Mapping[str, str]) -> bool:
    """Load ``init_from``'s classification head into ``head`` (``names``: the architecture's
    ``classifier_names``) with its rows in the task's label order (``lit_models/core/labels.py``);
    False, ``head`` untouched, where there is none to load: scratch, a checkpoint without a head
    or with another label count, or ``task.checkpoint_labels=new``."""
    given = task.get("checkpoint_labels")
    if init_from.scratch or given == NEW_HEAD:
        return False
    directory = init_from.directory()
    if not load_head(head, directory, names):
        return False
    if task["num_labels"] > 1:  # a regression head has one row
        order = label_order(checkpoint_labels(directory), task.get("label_names") or [],
                            f"init_from={init_from}", given)
        reorder_rows(head.out, order)
    return True


def unfit_head(head: nn.Module, task: Mapping, init_from: InitFrom,
               names: Mapping[str, str]) -> str | None:
    """What the run must say where ``init_from``'s classification head was not loaded because it
    does not fit the task (another label count): a new head starts untrained. None where there
    is nothing to say (scratch, a checkpoint without a head, a new head asked for)."""
    if init_from.scratch or task.get("checkpoint_labels") == NEW_HEAD:
        return None
    mismatch = head_mismatch(head, init_from.directory(), names)
    if mismatch is None:
        return None
    return (f"init_from={init_from}: its classifier head does not fit the {task['num_labels']} "
            f"label(s) of {task['name']} ({mismatch}): a new head starts untrained")


def no_training_split(task) -> PlmbenchError:
    return PlmbenchError(
        f"task {task['name']} has no training split, so init_from must be a classifier "
        f"fine-tuned with {task['num_labels']} labels (for GLUE AX: an MNLI run saved "
        "with save_model=true, as init_from=ckpt:<run dir>)"
    )


class Classification(TaskFamily):
    """GLUE-style sentence (pair) classification and regression, by encoders and by decoders
    (whose classification head reads the last token)."""

    kinds = ("encoder", "decoder")
    #: how the task's rows are read and encoded (a ``GlueDataModule`` or a subclass)
    datamodule: type[glue.GlueDataModule] = glue.GlueDataModule
    #: what ``head`` found that the run must say: a checkpoint's head that does not fit
    head_note: str | None = None

    def vocabulary_corpus(self, task):
        if not task["splits"].get("train"):
            raise no_training_split(task)
        return self.datamodule.vocabulary_corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        check_max_length(task, model.net)
        self.check_export(cfg, model)
        dm = self.datamodule(task, model.tokenizer, seed=cfg["seed"])
        module = self.module(cfg, model, self.head(cfg, model, init_from), dm)
        module.notes += [self.head_note] if self.head_note else []
        return module, dm

    def check_export(self, cfg, model: Model) -> None:
        """Refuse, before anything runs, a ``save_model=true`` that ``export`` cannot honour."""

    def head(self, cfg, model: Model, init_from: InitFrom) -> nn.Module:
        """The architecture's classification head, a fine-tuned checkpoint's when ``init_from``
        is one with as many labels."""
        task, (arch, net, _) = cfg["task"], model
        head = arch.classification_head(net.config, task["num_labels"], task["classifier_dropout"])
        names = arch.hf.classifier_names
        fine_tuned = fine_tuned_head(head, task, init_from, names)
        self.head_note = None if fine_tuned else unfit_head(head, task, init_from, names)
        if not task["splits"].get("train") and not fine_tuned:
            raise no_training_split(task)
        return head

    def module(self, cfg, model: Model, head: nn.Module, dm) -> LitClassifier:
        task = cfg["task"]
        return LitClassifier(model.net, model.arch.capabilities, head, task["num_labels"],
                             task["metrics"], dm.eval_split_names, cfg["optim"],
                             self.class_weights(task))

    def class_weights(self, task) -> list[float] | None:
        """The cross-entropy's weight of each class; None: all 1."""
        return None

    def predict(self, trainer: L.Trainer, module, dm, run_dir: Path, cfg) -> dict[str, str]:
        """GLUE submission files of the splits the run predicts (the eval splits of a task
        without a training split, such as AX; else ``task.predict_splits``, GLUE's unlabelled
        test sets), each with one row per example of its split and no gold column. A task without
        a training split whose eval splits are labelled (it names metrics: SuperGLUE's AX-b and
        AX-g, predicted by an RTE model) is validated instead: its metrics, and each example's
        prediction beside its gold label (``evaluation_outputs``)."""
        if not cfg["task"]["splits"].get("train") and cfg["task"]["metrics"]:
            trainer.validate(module, datamodule=dm, verbose=False)
            return {}
        dm.setup("predict")
        dm.trainer = trainer  # each process predicts its share of the examples
        splits = dm.predicted_splits()
        outputs = trainer.predict(module, dataloaders=[loader for *_, loader in splits])
        per_split = outputs if len(splits) > 1 else [outputs]
        vocabulary = submission_vocabulary(cfg["task"])
        files = {}
        for (split, examples, _), batches in zip(splits, per_split, strict=True):
            predicted = torch.cat(module.gather_batches(batches)).tolist()
            check_predicted_rows(cfg["task"], split, len(predicted), len(examples))
            path = write_predictions(run_dir, split, range(len(predicted)), predicted, vocabulary)
            files[split] = str(path.relative_to(run_dir))
        return files

    def evaluation_outputs(self, module: LitClassifier, run_dir: Path, cfg) -> dict[str, str]:
        """The last evaluation's predictions of every labelled eval split, with gold labels."""
        vocabulary = submission_vocabulary(cfg["task"])
        files = {}
        for split, rows in module.outputs.items():
            indices = [index for index, _ in rows]
            predicted, gold = zip(*(pair for _, pair in rows), strict=True) if rows else ((), ())
            path = write_predictions(run_dir, split, indices, predicted, vocabulary, gold)
            files[split] = str(path.relative_to(run_dir))
        return files

    def baseline(self, task):
        """The majority class of the training labels predicted for every eval example; for
        regression the mean score, a constant, whose Pearson and Spearman correlations are 0 (as
        ``Correlation`` reports a constant's); CoLA's Matthews reads 0, scikit-learn's value."""
        if not task["splits"].get("train"):
            return None
        if task["num_labels"] == 1:
            return {split: dict.fromkeys(task["metrics"], 0.0) for split in task["splits"]["eval"]}
        train = torch.tensor(self.datamodule.labels(task, task["splits"]["train"],
                                                    "max_train_samples"))
        majority = train.bincount().argmax()
        metrics = {}
        for split, labels in self.eval_labels(task).items():
            labels = torch.tensor(labels)
            computed = label_metrics(task["metrics"], task["num_labels"])
            computed.update(labels, **label_predictions(hard_probabilities(
                majority.expand(len(labels)), task["num_labels"]), task["num_labels"]))
            metrics[split] = computed.compute()
        return metrics

    def eval_labels(self, task):
        """The label ids (scores) of each eval split, capped by ``max_eval_samples``."""
        return {split: self.datamodule.labels(task, split, "max_eval_samples")
                for split in task["splits"]["eval"]}

    def export(self, module, model: Model, run_dir: Path, cfg) -> None:
        if cfg["save_model"]:
            to_hf(model, run_dir / EXPORT_DIR, module.head, list(cfg["task"]["label_names"]))
