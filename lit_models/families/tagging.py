"""Sequence labelling (named entities) over any registered encoder (Devlin et al. 2019, §5.3).

A linear layer over each token's final hidden state scores the BIO tags (Ramshaw & Marcus 1995);
the loss is the cross-entropy on each word's first sub-token. Predicted tags are read as
conlleval reads them: an I-X that continues no X entity opens one, so it is written as B-X and
every predictions file is valid BIO. The task's metrics, entity-level precision, recall and F1
(an entity counts when its type and both boundaries match; Tjong Kim Sang & De Meulder 2003),
come from ``seqeval``, the conlleval reimplementation, micro-averaged over entities. Each
evaluation writes ``<run dir>/predictions/<split>.jsonl``: one sentence per line, its tokens,
gold and predicted tags. ``save_model=true`` exports the tagger as the architecture's
``*ForTokenClassification`` (the tags in config.json's ``id2label``), and ``init_from`` of such a
checkpoint with the same tags keeps its head, its rows in the task's order
(``lit_models/families/entity_tagger.py`` finds
REALM's salient entities with it).
"""

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from datamodules import tagging
from datamodules.collate import IGNORE_INDEX, encoder_inputs
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.predictions import write_jsonl
from lit_models.archs import Model
from lit_models.core.family import TaskFamily, check_max_length
from lit_models.core.labels import label_order, normalized, reorder_rows
from lit_models.core.module import PlmModule
from lit_models.interop.hf import (
    TAGGER_HEAD_NAMES,
    check_task_export,
    load_head,
    task_labels,
    to_hf,
)
from lit_models.metrics import build_metrics
from lit_models.metrics.tagging import bio_decode


class LitTagger(PlmModule):
    def __init__(self, encoder: nn.Module, label_names: Sequence[str], eval_splits: Sequence[str],
                 dropout: float, optim: Mapping, metrics: Sequence[str] = ()) -> None:
        super().__init__(optim, encoder.config.num_hidden_layers)
        self.encoder = encoder
        self.label_names = list(label_names)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(encoder.config.hidden_size, len(label_names))
        nn.init.normal_(self.classifier.weight, std=encoder.config.initializer_range)
        nn.init.zeros_(self.classifier.bias)
        self.eval_splits = list(eval_splits)
        self.metrics = build_metrics(metrics, "tags")
        self.collected: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in eval_splits]

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        out = self.encoder(**encoder_inputs(batch))
        return self.classifier(self.dropout(out.last_hidden_state))

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        logits = self(batch)
        loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(),
                               ignore_index=IGNORE_INDEX)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        predicted = self(batch).argmax(-1).cpu()
        self.collected[dataloader_idx].append((predicted, batch["word_ids"].cpu()))

    def on_validation_epoch_end(self) -> None:
        collected, self.collected = self.collected, [[] for _ in self.eval_splits]
        if self.trainer.sanity_checking:
            return
        dm = self.trainer.datamodule
        for i, split in enumerate(self.eval_splits):
            sentences = dm.eval_sentences[i]
            words = sentences[dm.task["tokens_field"]]
            tags = sentences[dm.task["tags_field"]]
            gold = [[self.label_names[t] for t in sentence] for sentence in tags]
            predicted = self.word_tags(self.gather_batches(collected[i]),
                                       [len(w) for w in words])
            self.metrics.update(gold, tags=predicted)
            self.record_metrics(split, self.metrics.compute())
            self.metrics.reset()
            if self.run_dir is not None and self.trainer.is_global_zero:
                self.write_predictions(split, words, gold, predicted)

    def word_tags(self, batches: list[tuple[torch.Tensor, torch.Tensor]], lengths: list[int]
                  ) -> list[list[str]]:
        """Each sentence's predicted tags, word by word ("O" for words the model did not see)."""
        tags = [["O"] * n for n in lengths]
        sentence = 0
        for predicted, word_ids in batches:
            for row_tags, row_words in zip(predicted.tolist(), word_ids.tolist(), strict=True):
                for tag, word in zip(row_tags, row_words, strict=True):
                    if word >= 0:
                        tags[sentence][word] = self.label_names[tag]
                tags[sentence] = bio_decode(tags[sentence])
                sentence += 1
        return tags

    def write_predictions(self, split: str, words, gold, predicted) -> None:
        rows = [dict(zip(("tokens", "gold", "predicted"), row, strict=True))
                for row in zip(words, gold, predicted, strict=True)]
        path = write_jsonl(self.run_dir, split, rows)
        self.predictions[split] = str(path.relative_to(self.run_dir))


class Tagging(TaskFamily):
    """Named-entity recognition with BIO tags (CoNLL-2003, NCBI-disease)."""

    def vocabulary_corpus(self, task):
        return tagging.vocabulary_corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        check_max_length(task, model.net)
        check_task_export(cfg, model.arch, "tagger")
        dm = tagging.TaggingDataModule(task, model.tokenizer, seed=cfg["seed"])
        module = LitTagger(model.net, task["label_names"], dm.eval_split_names,
                           task["classifier_dropout"], cfg["optim"], task["metrics"])
        if not init_from.scratch:  # a tagger of the same tags keeps its head
            directory = init_from.directory()
            theirs = task_labels(directory, "tagger") or []
            if sorted(map(normalized, theirs)) == sorted(map(normalized, module.label_names)):
                load_head(nn.ModuleDict({"classifier": module.classifier}), directory,
                          TAGGER_HEAD_NAMES)  # its rows in our order of the tags
                reorder_rows(module.classifier, label_order(theirs, module.label_names,
                                                            f"init_from={init_from}"))
        return module, dm

    def export(self, module, model: Model, run_dir, cfg):
        """``save_model=true``: the tagger as the architecture's ``*ForTokenClassification``."""
        if cfg["save_model"]:
            to_hf(model, run_dir / EXPORT_DIR, module, module.label_names, task="tagger")
