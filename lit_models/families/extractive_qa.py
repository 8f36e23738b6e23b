"""Extractive question answering over any registered encoder (Devlin et al. 2019, §4.2-4.3).

A start vector S and an end vector E (one Linear to two outputs, transformers' ``qa_outputs``)
score every token of a window: start logits S·T_i, end logits E·T_i; training minimises the mean
of the cross-entropies of the true start and end positions (the start token for the null answer).
Evaluation collects the logits of every window of every question, decodes one span per question
(``lit_models.families.qa_decode``), scores it with the task's metrics as the official SQuAD v1.1 /
v2.0 scripts do (``lit_models.metrics.squad``) and writes ``<run dir>/predictions/<split>.json``
({question id: answer}) and, for v2.0, ``<split>.null_odds.json`` ({question id: null odds}),
which the official scripts read as they are. ``save_model=true`` exports the reader as the
architecture's ``*ForQuestionAnswering``, and ``init_from`` of such a checkpoint keeps its span
head. An encoder with global attention (Longformer, Beltagy et al. 2020, §3.1 and §6.1: its
``Capabilities.global_attention``) gets it on the question tokens.
"""

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from datamodules import squad, strict_json
from datamodules.collate import encoder_inputs
from datamodules.files import atomic_write_text
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.predictions import PREDICTIONS_DIR
from lit_models.archs import Capabilities, Model
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.module import PlmModule
from lit_models.families.qa_decode import Spans, Windows, best_spans
from lit_models.interop.hf import QA_HEAD_NAMES, check_task_export, load_head, to_hf
from lit_models.metrics import build_metrics
from lit_models.metrics.squad import abstain


class LitExtractiveQA(PlmModule):
    def __init__(self, encoder: nn.Module, capabilities: Capabilities,
                 eval_splits: Sequence[str], decoding: Mapping, version_2: bool, optim: Mapping,
                 metrics: Sequence[str] = ()) -> None:
        """``metrics``: the task's, which ``evaluate`` computes (none: a subclass scores
        otherwise)."""
        super().__init__(optim, encoder.config.num_hidden_layers)
        self.encoder = encoder
        self.qa_outputs = nn.Linear(encoder.config.hidden_size, 2)
        nn.init.normal_(self.qa_outputs.weight, std=encoder.config.initializer_range)
        nn.init.zeros_(self.qa_outputs.bias)
        self.eval_splits = list(eval_splits)
        self.decoding = dict(decoding)
        self.version_2 = version_2
        self.metrics = build_metrics(metrics, "answers_with_null_odds" if version_2 else "answers")
        self.global_attention = capabilities.global_attention
        #: per eval split, (window index, [2, length] start/end logits) of the last evaluation
        self.logits: list[list[tuple[int, torch.Tensor]]] = [[] for _ in self.eval_splits]

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        extra = {"global_attention_mask": batch["question_mask"]} if self.global_attention else {}
        out = self.encoder(**encoder_inputs(batch), **extra)
        start, end = self.qa_outputs(out.last_hidden_state).unbind(-1)
        return start, end

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        start, end = self(batch)
        loss = (F.cross_entropy(start, batch["start_positions"].long())
                + F.cross_entropy(end, batch["end_positions"].long())) / 2
        loss = self.distilled(loss, (start, end), batch)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        start, end = self(batch)
        logits = torch.stack([start, end], 1).float().cpu()
        self.logits[dataloader_idx].extend(zip(batch["index"].tolist(), logits, strict=True))

    def on_validation_epoch_end(self) -> None:
        collected, self.logits = self.logits, [[] for _ in self.eval_splits]
        dm = self.trainer.datamodule
        for i, split, windows in self.gathered_splits(collected):
            metrics, answers, odds = self.evaluate(windows, dm.eval_windows[i],
                                                   dm.eval_examples[i], dm.task)
            self.record_metrics(split, metrics)
            if self.run_dir is not None and self.trainer.is_global_zero:
                self.write_predictions(split, answers, odds)

    def decode(self, window_logits: list[torch.Tensor], windows, num_examples: int) -> Spans:
        """The best span of each example from the [2, length] start/end logits of each of its
        windows, in window order."""
        spans = Windows.from_rows(*(windows[column] for column in (
            "example_index", "cls_index", "offset_start", "offset_end")))
        length = spans.offset_start.shape[1]
        if len(window_logits) != len(spans.offset_start):
            raise RuntimeError(f"{len(window_logits)} windows scored of {len(spans.offset_start)}")
        logits = torch.stack([F.pad(w, (0, length - w.shape[-1]), value=float("-inf"))
                              for w in window_logits])
        return best_spans(logits[:, 0], logits[:, 1], spans, num_examples,
                          self.decoding["n_best"], self.decoding["max_answer_length"])

    def evaluate(self, window_logits: list[torch.Tensor], windows, examples, task: Mapping):
        """(the task's metrics, {id: answer}, {id: null odds} or None) of one eval split, from
        the [2, length] start/end logits of each of its windows, in window order."""
        decoded = self.decode(window_logits, windows, len(examples))
        texts = decoded.texts(examples[task["context_field"]])
        references = [a["text"] for a in examples[task["answers_field"]]]
        ids = examples[task["id_field"]]
        if self.version_2:  # scored at the null threshold that maximises F1, then abstaining
            odds = decoded.null_odds.tolist()
            self.metrics.update(references, answers_with_null_odds=list(zip(texts, odds,
                                                                            strict=True)))
            values = self.metrics.compute()
            texts = abstain(texts, odds, values["null_threshold"])
            odds = dict(zip(ids, odds, strict=True))
        else:
            self.metrics.update(references, answers=texts)
            values, odds = self.metrics.compute(), None
        self.metrics.reset()
        return values, dict(zip(ids, texts, strict=True)), odds

    def write_predictions(self, split: str, answers: Mapping, odds: Mapping | None) -> None:
        """The official scripts' inputs: ``<split>.json`` and, v2.0, ``<split>.null_odds.json``."""
        directory = self.run_dir / PREDICTIONS_DIR
        path = atomic_write_text(directory / f"{split}.json",
                                 strict_json.dumps(answers, ensure_ascii=False))
        self.predictions[split] = str(path.relative_to(self.run_dir))
        if odds is not None:
            atomic_write_text(directory / f"{split}.null_odds.json", strict_json.dumps(odds))


class ExtractiveQA(TaskFamily):
    """SQuAD v1.1 / v2.0 and SQuAD-format evaluation sets (XQuAD)."""

    def vocabulary_corpus(self, task):
        return squad.vocabulary_corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        check_max_length(task, model.net)
        check_task_export(cfg, model.arch, "qa")
        dm = squad.SquadDataModule(task, model.tokenizer, seed=cfg["seed"])
        decoding = {"n_best": task["n_best"], "max_answer_length": task["max_answer_length"]}
        module = LitExtractiveQA(model.net, model.arch.capabilities, dm.eval_split_names,
                                 decoding, task["version_2_with_negative"], cfg["optim"],
                                 task["metrics"])
        if not init_from.scratch:  # a fine-tuned reader keeps its span head
            load_head(nn.ModuleDict({"qa_outputs": module.qa_outputs}), init_from.directory(),
                      QA_HEAD_NAMES)
        return module, dm

    def export(self, module, model: Model, run_dir, cfg):
        """``save_model=true``: the reader as the architecture's ``*ForQuestionAnswering``."""
        if cfg["save_model"]:
            to_hf(model, run_dir / EXPORT_DIR, module, task="qa")
