"""Extractive question answering over any registered encoder (Devlin et al. 2019, §4.2-4.3).

A start vector S and an end vector E (one Linear to two outputs, transformers' ``qa_outputs``)
score every token of a window: start logits S·T_i, end logits E·T_i; training minimises the mean
of the cross-entropies of the true start and end positions (the start token for the null answer).
Evaluation collects the logits of every window of every question, decodes one span per question
(``lit_models.qa_decode``), scores it as the official SQuAD v1.1 / v2.0 scripts do
(``lit_models.squad_metrics``) and writes ``<run dir>/predictions/<split>.json``
({question id: answer}) and, for v2.0, ``<split>.null_odds.json`` ({question id: null odds}),
which the official scripts read as they are. An encoder whose forward takes a
``global_attention_mask`` (Longformer, Beltagy et al. 2020, §3.1 and §6.1) gets global attention
on the question tokens.
"""

import inspect
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from datamodules import squad
from datamodules.collate import encoder_inputs
from datamodules.predictions import PREDICTIONS_DIR
from lit_models.family import TaskFamily, check_max_length
from lit_models.module import PlmModule
from lit_models.qa_decode import Windows, best_spans
from lit_models.squad_metrics import squad_v1, squad_v2


def write_json(path: Path, content: Mapping) -> Path:
    """Write ``content`` as JSON atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as tmp:
        json.dump(content, tmp, ensure_ascii=False)
    os.replace(tmp.name, path)
    return path


class LitExtractiveQA(PlmModule):
    def __init__(self, encoder: nn.Module, eval_splits: Sequence[str], decoding: Mapping,
                 version_2: bool, optim: Mapping) -> None:
        super().__init__(optim, encoder.config.num_hidden_layers)
        self.encoder = encoder
        self.qa_outputs = nn.Linear(encoder.config.hidden_size, 2)
        nn.init.normal_(self.qa_outputs.weight, std=encoder.config.initializer_range)
        nn.init.zeros_(self.qa_outputs.bias)
        self.eval_splits = list(eval_splits)
        self.decoding = dict(decoding)
        self.version_2 = version_2
        self.global_attention = "global_attention_mask" in inspect.signature(
            encoder.forward).parameters
        self.logits: list[list[torch.Tensor]] = [[] for _ in self.eval_splits]

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        extra = {"global_attention_mask": batch["question_mask"]} if self.global_attention else {}
        out = self.encoder(**encoder_inputs(batch), **extra)
        start, end = self.qa_outputs(out.last_hidden_state).unbind(-1)
        return start, end

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        start, end = self(batch)
        loss = (F.cross_entropy(start, batch["start_positions"].long())
                + F.cross_entropy(end, batch["end_positions"].long())) / 2
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        start, end = self(batch)
        self.logits[dataloader_idx].append(torch.stack([start, end], 1).float().cpu())

    def on_validation_epoch_end(self) -> None:
        collected, self.logits = self.logits, [[] for _ in self.eval_splits]
        if self.trainer.sanity_checking:
            return
        dm = self.trainer.datamodule
        for i, split in enumerate(self.eval_splits):
            metrics, answers, odds = self.evaluate(collected[i], dm.eval_windows[i],
                                                   dm.eval_examples[i], dm.task)
            self.record_metrics(split, metrics)
            if self.run_dir is not None and self.trainer.is_global_zero:
                self.write_predictions(split, answers, odds)

    def evaluate(self, batches: list[torch.Tensor], windows, examples, task: Mapping):
        """(metrics, {id: answer}, {id: null odds} or None) of one eval split."""
        spans = Windows.from_rows(*(windows[column] for column in (
            "example_index", "cls_index", "offset_start", "offset_end")))
        length = spans.offset_start.shape[1]
        logits = torch.cat([F.pad(b, (0, length - b.shape[-1]), value=float("-inf"))
                            for b in batches])
        decoded = best_spans(logits[:, 0], logits[:, 1], spans, len(examples),
                             self.decoding["n_best"], self.decoding["max_answer_length"])
        texts = decoded.texts(examples[task["context_field"]])
        references = [a["text"] for a in examples[task["answers_field"]]]
        ids = examples[task["id_field"]]
        if self.version_2:
            metrics, final = squad_v2(texts, decoded.null_odds, references)
            odds = dict(zip(ids, decoded.null_odds.tolist(), strict=True))
            return metrics, dict(zip(ids, final, strict=True)), odds
        return squad_v1(texts, references), dict(zip(ids, texts, strict=True)), None

    def write_predictions(self, split: str, answers: Mapping, odds: Mapping | None) -> None:
        """The official scripts' inputs: ``<split>.json`` and, v2.0, ``<split>.null_odds.json``."""
        directory = self.run_dir / PREDICTIONS_DIR
        path = write_json(directory / f"{split}.json", answers)
        self.predictions[split] = str(path.relative_to(self.run_dir))
        if odds is not None:
            write_json(directory / f"{split}.null_odds.json", odds)


class ExtractiveQA(TaskFamily):
    """SQuAD v1.1 / v2.0 and SQuAD-format evaluation sets (XQuAD)."""

    def vocabulary_corpus(self, task):
        return squad.vocabulary_corpus(task)

    def build(self, cfg, net, tokenizer):
        task = cfg["task"]
        check_max_length(task, net)
        dm = squad.SquadDataModule(task, tokenizer, seed=cfg["seed"])
        decoding = {"n_best": task["n_best"], "max_answer_length": task["max_answer_length"]}
        module = LitExtractiveQA(net, dm.eval_split_names, decoding,
                                 task["version_2_with_negative"], cfg["optim"])
        return module, dm
