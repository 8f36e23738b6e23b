"""Sequence-to-sequence fine-tuning with evaluation by generation (summarization).

Training minimises the negative log-likelihood of the reference under teacher forcing (Sutskever
et al. 2014; Lewis et al. 2020, §3.4 for BART on summarization), logits computed only at label
positions. Evaluation generates with the task's settings (``task.generation``: beams, length
penalty, no-repeat n-grams, min/max length; ``lit_models/generation.py``) and scores the decoded
text against the raw references with ROUGE-1/2/L/Lsum (``lit_models/rouge.py``); every
evaluation's generations go to ``<run dir>/predictions/<split>.jsonl`` (id, source, prediction,
reference). ``Seq2Seq`` is the task family: summarization DataModule, this module, the prediction
files and, with ``save_model``, the fine-tuned model in the Hugging Face layout.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from datamodules import summarization
from datamodules.collate import at_positions, label_positions
from datamodules.errors import PlmbenchError
from datamodules.predictions import write_jsonl
from datamodules.tokenization import TextTokenizer
from lit_models.build import EXPORT_DIR
from lit_models.family import TaskFamily
from lit_models.generation import GenerationConfig, generate
from lit_models.hf import to_hf
from lit_models.module import PlmModule
from lit_models.rouge import Rouge


class LitSeq2Seq(PlmModule):
    def __init__(self, net: nn.Module, tokenizer: TextTokenizer, generation: GenerationConfig,
                 eval_splits: Sequence[str], texts: Mapping[str, Mapping[str, list[str]]],
                 optim: Mapping) -> None:
        super().__init__(optim, net.config.num_hidden_layers)
        self.net, self.tokenizer, self.generation = net, tokenizer, generation
        self.eval_splits = list(eval_splits)
        self.texts = texts  # the DataModule's raw id / source / reference per eval split
        self.rouge = nn.ModuleList(Rouge() for _ in self.eval_splits)
        self.eval_loss = nn.ModuleList(MeanMetric() for _ in self.eval_splits)
        self.eval_length = nn.ModuleList(MeanMetric() for _ in self.eval_splits)
        #: split -> (row index, generated text) of the last evaluation
        self.generations: dict[str, list[tuple[int, str]]] = {}

    def loss(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean token NLL of the labels, number of label tokens)."""
        hidden = self.net(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                          decoder_input_ids=batch["decoder_input_ids"]).last_hidden_state
        positions = label_positions(batch)
        logits = self.net.logits(at_positions(hidden, positions))
        return F.cross_entropy(logits, at_positions(batch["labels"], positions)), len(positions)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss, _ = self.loss(batch)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def on_validation_epoch_start(self) -> None:
        self.generations = {split: [] for split in self.eval_splits}

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        split = self.eval_splits[dataloader_idx]
        loss, tokens = self.loss(batch)
        self.eval_loss[dataloader_idx].update(loss, weight=tokens)
        ids = generate(self.net, batch["input_ids"], batch.get("attention_mask"), self.generation)
        texts = self.tokenizer.backend.decode_batch(ids.tolist(), skip_special_tokens=True)
        texts = [text.strip() for text in texts]
        indices = batch["index"].tolist()
        references = [self.texts[split]["reference"][i] for i in indices]
        self.rouge[dataloader_idx].update(texts, references)
        lengths = (ids != self.net.config.pad_token_id).sum(1).float()
        self.eval_length[dataloader_idx].update(lengths)
        self.generations[split].extend(zip(indices, texts, strict=True))

    def on_validation_epoch_end(self) -> None:
        for i, split in enumerate(self.eval_splits):
            if not self.trainer.sanity_checking:
                values = {k: float(v) for k, v in self.rouge[i].compute().items()}
                values |= {"loss": float(self.eval_loss[i].compute()),
                           "generated_tokens": float(self.eval_length[i].compute())}
                self.record_metrics(split, values)
            for metric in (self.rouge[i], self.eval_loss[i], self.eval_length[i]):
                metric.reset()

    def prediction_rows(self, split: str) -> list[dict]:
        """The last evaluation's generations of ``split`` in row order, with their texts."""
        texts = self.texts[split]
        return [{"id": texts["id"][i], "source": texts["source"][i], "prediction": prediction,
                 "reference": texts["reference"][i]}
                for i, prediction in sorted(self.generations.get(split, []))]


class Seq2Seq(TaskFamily):
    """Summarization: source -> summary, evaluated by generation and ROUGE."""

    with_heads = True  # the language-modelling head generates
    kinds = ("encoder-decoder",)

    def vocabulary_corpus(self, task):
        if not task["splits"].get("train"):
            raise PlmbenchError(f"task {task['name']} has no training split; give it one "
                                "(splits.train)")
        return summarization.vocabulary_corpus(task)

    def build(self, cfg, net, tokenizer):
        task = cfg["task"]
        for key in ("source_max_length", "target_max_length"):
            if task[key] > net.config.max_length:
                raise PlmbenchError(
                    f"task.{key}={task[key]} exceeds the {net.config.max_length} positions of "
                    f"the model; set task.{key}<={net.config.max_length}"
                )
        generation = GenerationConfig(**task["generation"])
        dm = summarization.SummarizationDataModule(
            task, tokenizer, net.config.decoder_start_token_id, cfg["seed"])
        module = LitSeq2Seq(net, tokenizer, generation, dm.eval_split_names, dm.texts,
                            cfg["optim"])
        return module, dm

    def evaluation_outputs(self, module: LitSeq2Seq, run_dir: Path, cfg) -> dict[str, str]:
        return {split: str(write_jsonl(run_dir, split, module.prediction_rows(split))
                           .relative_to(run_dir))
                for split in module.eval_splits if module.generations.get(split)}

    def export(self, module, tokenizer, run_dir, cfg) -> None:
        if cfg["save_model"]:
            to_hf(module.net, tokenizer, run_dir / EXPORT_DIR)
