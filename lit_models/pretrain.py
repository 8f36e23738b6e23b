"""Pretraining: masked LM, optionally with next sentence prediction (Devlin et al. 2019, §3.1).

The loss is L = L_MLM + L_NSP: cross-entropy of the original token at each selected position
(vocabulary logits are computed only there) plus the IsNext / NotNext cross-entropy on the
pooled [CLS] state. Validation reports the MLM loss per predicted token and its perplexity.
``Pretraining`` is the task family: the objective's example builder and collator handed to the
corpus DataModule, this module, and the export of the pretrained net for fine-tuning.
"""

import math
from collections.abc import Mapping
from dataclasses import fields
from functools import partial

import torch
from torchmetrics import MeanMetric

from datamodules import pretrain
from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer
from lit_models.build import EXPORT_DIR
from lit_models.family import TaskFamily, check_max_length
from lit_models.flops import EncoderShape, mlm_training_flops
from lit_models.hf import to_hf
from lit_models.module import PlmModule
from lit_models.objectives.mlm import MaskingConfig, MLMCollator, masked_lm_loss
from lit_models.objectives.nsp import make_segment_pairs, next_sentence_loss


class LitPretrain(PlmModule):
    def __init__(self, net, nsp: bool, optim: Mapping, eval_splits: list[str]) -> None:
        super().__init__(optim, net.config.num_hidden_layers)
        self.net = net  # an encoder with .mlm_head (and .nsp_head for NSP)
        self.nsp = nsp
        self.eval_splits = list(eval_splits)
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


#: the objective config's keys that configure the masking
MASKING_KEYS = [f.name for f in fields(MaskingConfig)]


def pretraining_datamodule(task: Mapping, tokenizer: TextTokenizer, masking: MaskingConfig,
                           nsp: bool, num_workers: int = 0, seed: int = 0
                           ) -> pretrain.PretrainDataModule:
    """The corpus DataModule with BERT's inputs: NSP pairs (``nsp``) or FULL-SENTENCES, masked
    in the collate (dynamic) or once per copy (static, ``dupe_factor`` copies)."""
    special = tokenizer.special
    if special.cls is None or special.sep is None:
        raise PlmbenchError("pretraining inputs need the tokenizer's cls/bos and sep/eos "
                            "tokens; name them in its tokenizer_config.json")
    examples = partial(make_segment_pairs, max_tokens=task["max_length"], nsp=nsp,
                       cls_id=special.cls, sep_id=special.sep)
    return pretrain.PretrainDataModule(
        task, tokenizer, examples, MLMCollator(tokenizer, masking, seed),
        copies=masking.dupe_factor if masking.static else 1, seeded=masking.static,
        num_workers=num_workers, seed=seed,
    )


class Pretraining(TaskFamily):
    """Masked LM (+ NSP) on a document corpus; the pretrained net is exported for fine-tuning."""

    with_heads = True

    def vocabulary_corpus(self, task):
        return pretrain.vocabulary_corpus(task)

    def build(self, cfg, net, tokenizer):
        task, objective = cfg["task"], cfg["objective"]
        check_max_length(task, net)
        if objective["nsp"] and not hasattr(net, "nsp_head"):
            raise PlmbenchError(
                f"model {cfg['model']['name']} has no next-sentence-prediction head; use "
                "objective=mlm"
            )
        masking = MaskingConfig(**{k: objective[k] for k in MASKING_KEYS})
        dm = pretraining_datamodule(task, tokenizer, masking, objective["nsp"],
                                    num_workers=cfg["num_workers"], seed=cfg["seed"])
        return LitPretrain(net, objective["nsp"], cfg["optim"], dm.eval_split_names), dm

    def export(self, module, tokenizer, run_dir, cfg) -> None:
        to_hf(module.net, tokenizer, run_dir / EXPORT_DIR)
