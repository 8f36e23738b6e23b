"""Pretraining: masked LM, optionally with next sentence prediction (Devlin et al. 2019, §3.1).

The loss is L = L_MLM + L_NSP: cross-entropy of the original token at each selected position
(vocabulary logits are computed only there) plus the IsNext / NotNext cross-entropy on the
pooled [CLS] state. Validation reports the MLM loss per predicted token and its perplexity.
"""

import math
from collections.abc import Mapping

import torch
from torchmetrics import MeanMetric

from lit_models.flops import EncoderShape, mlm_training_flops
from lit_models.module import PlmModule
from lit_models.objectives.mlm import masked_lm_loss
from lit_models.objectives.nsp import next_sentence_loss


class LitPretrain(PlmModule):
    def __init__(self, net, nsp: bool, optim: Mapping, eval_splits: list[str]) -> None:
        super().__init__(optim, net.config.num_hidden_layers)
        self.net = net  # an encoder with .mlm_head and .nsp_head (e.g. BertForPreTraining)
        self.nsp = nsp
        self.eval_splits = eval_splits
        self.eval_loss = torch.nn.ModuleList(MeanMetric() for _ in eval_splits)
        self.shape = EncoderShape.of(net.config)

    def losses(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = self.net(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch.get("token_type_ids"),
        )
        losses = {"mlm_loss": masked_lm_loss(out.last_hidden_state, batch["labels"],
                                             self.net.mlm_head)}
        if self.nsp:
            losses["nsp_loss"] = next_sentence_loss(out.pooler_output,
                                                    batch["next_sentence_label"], self.net.nsp_head)
        return losses

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        losses = self.losses(batch)
        loss = sum(losses.values())
        self.log_dict({f"train/{k}": v for k, v in losses.items()}, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        mlm_loss = self.losses(batch)["mlm_loss"]
        predicted = (batch["labels"] != -100).sum()
        self.eval_loss[dataloader_idx].update(mlm_loss, weight=predicted)

    def on_validation_epoch_end(self) -> None:
        for split, metric in zip(self.eval_splits, self.eval_loss, strict=True):
            if not self.trainer.sanity_checking:
                loss = float(metric.compute())
                self.record_metrics(split, {"mlm_loss": loss, "perplexity": math.exp(loss)})
            metric.reset()

    def flops_per_batch(self, batch: Mapping[str, torch.Tensor]) -> float:
        batch_size, seq_len = batch["input_ids"].shape
        predicted = int((batch["labels"] != -100).sum())
        return mlm_training_flops(self.shape, batch_size, seq_len, predicted)
