"""Sequence-to-sequence fine-tuning with evaluation by generation (summarization).

Training minimises the negative log-likelihood of the reference under teacher forcing (Sutskever
et al. 2014; Lewis et al. 2020, §3.4 for BART on summarization), logits computed only at label
positions. Evaluation generates with the task's settings (``task.generation``: beams, length
penalty, no-repeat n-grams, min/max length; ``lit_models/core/generation.py``) and scores the
decoded
text against the raw references with the metrics the task names (``metrics``: ROUGE-1/2/L/Lsum,
``lit_models/metrics/rouge.py``; BLEU ...), or another scorer of texts
(``lit_models/families/text_to_text.py``: GLUE labels as words); every evaluation's
generations go to ``<run dir>/predictions/<split>.jsonl`` (id, source, prediction, reference).
Encoder-decoders (BART, T5) read the source and decode the target; a decoder-only model (GPT-2)
reads source and target as one sequence and generates after the source's separator (Radford et
al. 2019, §3.6). ``Seq2Seq`` is the task family: summarization DataModule, this module, the
prediction files and, with ``save_model``, the fine-tuned model in the Hugging Face layout.
"""

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from datamodules import summarization
from datamodules.collate import at_positions, label_positions
from datamodules.errors import PlmbenchError
from datamodules.init_from import EXPORT_DIR, InitFrom
from datamodules.predictions import write_jsonl
from lit_models.archs import Model
from lit_models.core.family import TaskFamily
from lit_models.core.generation import GenerationConfig, generate
from lit_models.core.module import PlmModule
from lit_models.interop.hf import to_hf
from lit_models.metrics import build_metrics
from lit_models.metrics.registry import local

#: the model inputs of a batch: an encoder-decoder's and a decoder-only model's
MODEL_INPUTS = ("input_ids", "attention_mask", "decoder_input_ids")


class Generated(NamedTuple):
    """One evaluation example's outputs: its generation and its reference's token NLL."""

    text: str
    nll_sum: float  # summed over the reference's tokens, under teacher forcing
    tokens: int  # the reference's token count
    length: int  # generated tokens


class LitSeq2Seq(PlmModule):
    """``scorer(split)`` makes the metrics of an eval split (``lit_models.metrics.Metrics``):
    ``update(references, texts=generations)``, ``compute()`` -> {name: value},
    ``signatures()`` -> {name: how it was computed} (recorded with the values)."""

    def __init__(self, model: Model, generation: GenerationConfig, eval_splits: Sequence[str],
                 texts: Mapping[str, Mapping[str, list[str]]], optim: Mapping,
                 scorer: Callable[[str], nn.Module]) -> None:
        super().__init__(optim, model.net.config.num_hidden_layers)
        self.arch, self.net, self.tokenizer = model
        self.generation = generation
        self.eval_splits = list(eval_splits)
        self.texts = texts  # the DataModule's raw id / source / reference per eval split
        # scored at the epoch's end from every process's generations: no sync of their own
        self.scores = nn.ModuleList(local(scorer(split)) for split in self.eval_splits)
        self.eval_loss = nn.ModuleList(local(MeanMetric()) for _ in self.eval_splits)
        self.eval_length = nn.ModuleList(local(MeanMetric()) for _ in self.eval_splits)
        #: split -> (row index, what was generated and scored for it) of the last evaluation
        self.generations: dict[str, list[tuple[int, Generated]]] = {}

    def token_nll(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(NLL of each label token, the row each belongs to), label positions only."""
        inputs = {key: batch[key] for key in MODEL_INPUTS if key in batch}
        hidden = self.net(**inputs).last_hidden_state
        positions = label_positions(batch)
        logits = self.net.logits(at_positions(hidden, positions))
        nll = F.cross_entropy(logits, at_positions(batch["labels"], positions), reduction="none")
        return nll, positions // batch["labels"].shape[1]

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss = self.token_nll(batch)[0].mean()
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def on_validation_epoch_start(self) -> None:
        self.generations = {split: [] for split in self.eval_splits}

    def generate_texts(self, batch) -> tuple[torch.Tensor, list[str]]:
        """(generated ids, their decoded texts) of a batch; a decoder-only model continues its
        left-padded sources (prompts)."""
        prompt = batch.get("prompt_ids", batch["input_ids"])
        mask = batch.get("prompt_mask", batch.get("attention_mask"))
        ids = generate(self.arch, self.net, prompt, mask, self.generation)
        texts = self.tokenizer.backend.decode_batch(ids.tolist(), skip_special_tokens=True)
        return ids, [text.strip() for text in texts]

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        nll, rows = self.token_nll(batch)
        size = len(batch["input_ids"])
        nll_sums = nll.new_zeros(size).index_add_(0, rows, nll.float())
        tokens = rows.bincount(minlength=size)
        ids, texts = self.generate_texts(batch)
        lengths = (ids != self.net.config.pad_token_id).sum(1)
        self.generations[self.eval_splits[dataloader_idx]].extend(
            (i, Generated(text, nll_sum, n, length)) for i, text, nll_sum, n, length
            in zip(batch["index"].tolist(), texts, nll_sums.tolist(), tokens.tolist(),
                   lengths.tolist(), strict=True))

    def predict_step(self, batch, batch_idx: int, dataloader_idx: int = 0
                     ) -> list[tuple[int, str]]:
        """(row index, generated text) of every example of the batch."""
        return list(zip(batch["index"].tolist(), self.generate_texts(batch)[1], strict=True))

    def on_validation_epoch_end(self) -> None:
        """Score every process's generations together (the task's metrics, token-weighted NLL,
        length)."""
        for i, split in enumerate(self.eval_splits):
            self.generations[split] = self.gather_indexed(self.generations[split])
            if self.trainer.sanity_checking or not self.generations[split]:
                continue
            indices, outputs = zip(*self.generations[split], strict=True)
            score, loss, length = self.scores[i], self.eval_loss[i], self.eval_length[i]
            score.update([self.texts[split]["reference"][j] for j in indices],
                         texts=[o.text for o in outputs])
            nll_sums, tokens, lengths = torch.tensor(
                [o[1:] for o in outputs], dtype=torch.float, device=self.device).T
            loss.update(nll_sums / tokens, weight=tokens)
            length.update(lengths)
            values = score.compute()
            values |= {"loss": float(loss.compute()), "generated_tokens": float(length.compute())}
            self.record_metrics(split, values, score.signatures())
            for metric in (score, loss, length):
                metric.reset()

    def prediction_rows(self, split: str) -> list[dict]:
        """The last evaluation's generations of ``split`` in row order, with their texts."""
        texts = self.texts[split]
        return [{"id": texts["id"][i], "source": texts["source"][i], "prediction": out.text,
                 "reference": texts["reference"][i]}
                for i, out in self.generations.get(split, [])]


class Seq2Seq(TaskFamily):
    """Summarization: source -> summary, evaluated by generation and the task's metrics (ROUGE).
    Another task of text pairs (translation) names its DataModule and vocabulary text."""

    with_heads = True  # the language-modelling head generates
    kinds = ("encoder-decoder", "decoder")

    #: the text pairs' DataModule, and the text a scratch vocabulary is trained on
    data = summarization.SummarizationDataModule
    corpus = staticmethod(summarization.vocabulary_corpus)

    def vocabulary_corpus(self, task):
        if not task["splits"].get("train"):
            raise PlmbenchError(f"task {task['name']} has no training split; give it one "
                                "(splits.train)")
        return self.corpus(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        generation = GenerationConfig(**task["generation"])
        check_lengths(task, model, generation)
        dm = self.data(task, model.tokenizer, decoder_start(model), cfg["seed"])
        module = LitSeq2Seq(model, generation, dm.eval_split_names, dm.texts, cfg["optim"],
                            lambda split: build_metrics(task["metrics"], "texts",
                                                        bleu=task.get("bleu")))
        return module, dm

    def evaluation_outputs(self, module: LitSeq2Seq, run_dir: Path, cfg) -> dict[str, str]:
        return {split: str(write_jsonl(run_dir, split, module.prediction_rows(split))
                           .relative_to(run_dir))
                for split in module.eval_splits if module.generations.get(split)}

    def export(self, module, model: Model, run_dir, cfg) -> None:
        if cfg["save_model"]:
            to_hf(model, run_dir / EXPORT_DIR)


def decoder_start(model: Model) -> int | None:
    """An encoder-decoder's decoder start token; None for a decoder-only model."""
    return model.net.config.decoder_start_token_id if model.arch.encoder_decoder else None


def check_lengths(task: Mapping, model: Model, generation: GenerationConfig) -> None:
    """Sources and targets fit the model's positions (a decoder-only model's, one after the
    other, the generated tokens after the longest source)."""
    limit = model.net.config.max_length
    if not model.arch.encoder_decoder:
        total = task["source_max_length"] + max(task["target_max_length"],
                                                generation.max_new_tokens)
        if total > limit:
            raise PlmbenchError(
                f"task.source_max_length + the target length ({total}) exceeds the {limit} "
                "positions of the model, which reads source and target as one sequence; lower "
                "task.source_max_length"
            )
    for key in ("source_max_length", "target_max_length"):
        if task[key] > limit:
            raise PlmbenchError(f"task.{key}={task[key]} exceeds the {limit} positions of the "
                                f"model; set task.{key}<={limit}")
