"""Sequence classification and regression fine-tuning (Devlin et al. 2019, §4.1).

The architecture's classification head (``lit_models/nets/heads.py``) maps the encoder's output
to label scores, trained with cross-entropy (classification) or mean squared error (STS-B's 0..5
score, num_labels = 1). ``Classification`` is the task family: GLUE-style DataModule, this
module, GLUE-format prediction files for tasks without a training split, and the export of the
fine-tuned model with ``save_model``.
"""

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from datamodules import glue
from datamodules.collate import encoder_inputs
from datamodules.errors import PlmbenchError
from datamodules.predictions import write_predictions
from datamodules.tokenization import TextTokenizer
from lit_models.archs import arch_of_net
from lit_models.core.build import EXPORT_DIR, checkpoint_dir
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.hf import head_mismatch, load_head, to_hf
from lit_models.core.module import PlmModule
from lit_models.metrics.classification import build_metrics


class LitClassifier(PlmModule):
    def __init__(
        self,
        encoder: nn.Module,
        head: nn.Module,
        num_labels: int,
        metrics: Sequence[str],
        eval_splits: Sequence[str],
        optim: Mapping,
    ) -> None:
        super().__init__(optim, encoder.config.num_hidden_layers)
        self.encoder = encoder
        self.head = head
        self.num_labels = num_labels
        self.eval_splits = list(eval_splits)
        #: encoders with global attention (Longformer, Beltagy et al. 2020 §6) give it to [CLS]
        self.global_attention = "global_attention_mask" in inspect.signature(
            encoder.forward).parameters
        #: token types go to nets with segment embeddings only: GPT-2 would read the all-zero
        #: types of a one-segment vocabulary as extra token embeddings
        self.segments = hasattr(encoder.config, "type_vocab_size")
        self.split_metrics = nn.ModuleList(build_metrics(metrics, num_labels) for _ in eval_splits)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        extra = {}
        if self.global_attention:  # the pooled first token attends to, and is seen by, all
            first = torch.zeros_like(batch["input_ids"])
            first[:, 0] = 1
            extra["global_attention_mask"] = first
        inputs = encoder_inputs(batch)
        if not self.segments:
            inputs["token_type_ids"] = None
        out = self.encoder(**inputs, **extra)
        logits = self.head(out)
        return logits.squeeze(-1) if self.num_labels == 1 else logits

    def loss(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.num_labels == 1:
            return F.mse_loss(scores, labels.to(scores.dtype))
        return F.cross_entropy(scores, labels)

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.loss(self(batch), batch["labels"])
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        scores = self(batch)
        split = self.eval_splits[dataloader_idx]
        loss = self.loss(scores, batch["labels"])
        self.log(f"{split}/loss", loss, add_dataloader_idx=False, sync_dist=True)
        predictions = scores.float() if self.num_labels == 1 else scores.argmax(-1)
        self.split_metrics[dataloader_idx].update(predictions, batch["labels"])

    def on_validation_epoch_end(self) -> None:
        for split, metrics in zip(self.eval_splits, self.split_metrics, strict=True):
            if not self.trainer.sanity_checking:
                self.record_metrics(split, metrics.compute())
            metrics.reset()

    def predict_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        scores = self(batch)
        return scores if self.num_labels == 1 else scores.argmax(-1)


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

    def vocabulary_corpus(self, task):
        if not task["splits"].get("train"):
            raise no_training_split(task)
        return glue.vocabulary_corpus(task)

    def build(self, cfg, net, tokenizer):
        task = cfg["task"]
        check_max_length(task, net)
        dm = glue.GlueDataModule(task, tokenizer, seed=cfg["seed"])
        arch = arch_of_net(net)
        head = arch.classification_head(net.config, task["num_labels"], task["classifier_dropout"])
        fine_tuned, mismatch = False, None
        if cfg["init_from"] != "scratch":
            directory = checkpoint_dir(cfg["init_from"])
            fine_tuned = load_head(head, directory, arch.hf.classifier_names)
            mismatch = None if fine_tuned else head_mismatch(head, directory,
                                                            arch.hf.classifier_names)
        if not task["splits"].get("train") and not fine_tuned:
            raise no_training_split(task)
        module = LitClassifier(net, head, task["num_labels"], task["metrics"],
                               dm.eval_split_names, cfg["optim"])
        if mismatch:
            module.notes.append(
                f"init_from={cfg['init_from']}: its classifier head does not fit the "
                f"{task['num_labels']} label(s) of {task['name']} ({mismatch}): a new head "
                "starts untrained")
        return module, dm

    def predict(self, trainer: L.Trainer, module, dm, run_dir: Path, cfg) -> dict[str, str]:
        """GLUE-format prediction files of every eval split."""
        dm.setup("predict")
        loaders = dm.val_dataloader()
        outputs = trainer.predict(module, dataloaders=loaders)
        per_split = outputs if len(loaders) > 1 else [outputs]
        label_names = cfg["task"]["label_names"]
        return {
            split: str(write_predictions(run_dir, split, torch.cat(batches), label_names)
                       .relative_to(run_dir))
            for split, batches in zip(dm.eval_split_names, per_split, strict=True)
        }

    def baseline(self, task):
        """The majority class of the training labels predicted for every eval example; for
        regression the mean score, a constant, whose Pearson and Spearman correlations are 0."""
        if not task["splits"].get("train"):
            return None
        if task["num_labels"] == 1:
            return {split: dict.fromkeys(task["metrics"], 0.0) for split in task["splits"]["eval"]}
        train = torch.tensor(glue.labels(task, task["splits"]["train"], "max_train_samples"))
        majority = train.bincount().argmax()
        metrics = {}
        for split in task["splits"]["eval"]:
            labels = torch.tensor(glue.labels(task, split, "max_eval_samples"))
            computed = build_metrics(task["metrics"], task["num_labels"])
            values = computed(majority.expand(len(labels)), labels)
            metrics[split] = {name: float(value) for name, value in values.items()}
        return metrics

    def export(self, module, tokenizer: TextTokenizer, run_dir: Path, cfg) -> None:
        if cfg["save_model"]:
            to_hf(module.encoder, tokenizer, run_dir / EXPORT_DIR, module.head,
                  list(cfg["task"]["label_names"]))
