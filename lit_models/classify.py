"""Sequence classification and regression fine-tuning (Devlin et al. 2019, §4.1).

A linear layer over the pooled [CLS] representation C in R^H gives label scores W C, trained with
cross-entropy (classification) or mean squared error (STS-B's 0..5 score, num_labels = 1).
"""

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lit_models.metrics import build_metrics
from lit_models.module import PlmModule


class LitClassifier(PlmModule):
    def __init__(
        self,
        encoder: nn.Module,
        num_labels: int,
        metrics: Sequence[str],
        eval_splits: Sequence[str],
        optim: Mapping,
        classifier_dropout: float = 0.1,
        classifier_state: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        config = encoder.config
        super().__init__(optim, config.num_hidden_layers)
        self.encoder = encoder
        self.num_labels = num_labels
        self.dropout = nn.Dropout(classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        nn.init.normal_(self.classifier.weight, std=config.initializer_range)
        nn.init.zeros_(self.classifier.bias)
        # a fine-tuned head of a checkpoint is kept when it has this task's label count
        shape = self.classifier.weight.shape
        self.fine_tuned_head = bool(classifier_state) and classifier_state["weight"].shape == shape
        if self.fine_tuned_head:
            self.classifier.load_state_dict(classifier_state)
        self.eval_splits = list(eval_splits)
        self.split_metrics = nn.ModuleList(build_metrics(metrics, num_labels) for _ in eval_splits)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        out = self.encoder(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch.get("token_type_ids"),
        )
        pooled = out.pooler_output if out.pooler_output is not None else out.last_hidden_state[:, 0]
        logits = self.classifier(self.dropout(pooled))
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
