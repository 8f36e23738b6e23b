"""Summarization data: (source document, reference summary) pairs for sequence-to-sequence
models (See et al. 2017's CNN/DailyMail, Hermann et al. 2015; AESLC, Zhang & Tetreault 2019;
DialogSum, Chen et al. 2021).

A task YAML names the dataset, its source and target columns, an optional id column, an optional
source prefix (T5's "summarize: ", Raffel et al. 2020, §2.4) and the source and target lengths.
Sources are encoded with the tokenizer's single-sequence template (BART: <s> x </s>) and cut to
``source_max_length``; targets the same way to ``target_max_length``. For an encoder-decoder the
targets are the labels, and the decoder inputs are the labels shifted right after the model's
decoder start token (teacher forcing). A decoder-only model (GPT-2; Radford et al. 2019, §3.6
summarised by continuing the article) reads one sequence, the source then the target without
its leading <s> (the source's closing </s> separates them); the labels are the next tokens of
the target part only, and ``prompt_length`` marks where generation starts: eval batches carry
the sources left-padded as ``prompt_ids`` / ``prompt_mask``. Each example keeps its row
``index``, so generations are joined back to the raw id, source and reference (``texts``), which
the metrics score untruncated.
"""

import hashlib
import json
from collections.abc import Iterator, Mapping
from functools import partial

import datasets
import torch
from omegaconf import DictConfig

from datamodules.base import PlmDataModule, task_config
from datamodules.collate import IGNORE_INDEX, pad_collate
from datamodules.sources import load_split
from datamodules.tokenization import TextTokenizer, tokenizer_fingerprint

REQUIRED_KEYS = (
    "name", "dataset", "config", "source_field", "target_field", "splits", "source_max_length",
    "target_max_length", "batch_size",
)


def _load(task: dict, split: str, cap: int | None, columns: list[str] | None = None
          ) -> datasets.Dataset:
    """The first ``cap`` rows of ``split``: ``columns`` (by default source and target) and ids."""
    columns = [*(columns or [task["source_field"], task["target_field"]]),
               *filter(None, [task.get("id_field")])]
    raw = load_split(task["dataset"], task["config"], split, columns, task.get("hub_id"))
    return raw if cap is None else raw.select(range(min(cap, len(raw))))


def vocabulary_corpus(task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
    """(what identifies it, the texts) of the capped training split: sources and targets."""
    task = task_config(task, REQUIRED_KEYS)
    cap, split = task.get("max_train_samples"), task["splits"]["train"]
    raw = _load(task, split, cap)
    fields = [task["source_field"], task["target_field"]]
    key = json.dumps([task["dataset"], task["config"], split, raw._fingerprint, fields, cap])
    return key, (text for field in fields for text in raw[field])


def collate(examples: list[dict], pad_id: int) -> dict:
    """Right-padded batch; with ``prompt_length`` (decoder-only) also each row's first
    ``prompt_length`` tokens left-padded as ``prompt_ids`` / ``prompt_mask``."""
    batch = pad_collate(examples, pad_id)
    lengths = batch.pop("prompt_length", None)
    if lengths is not None:
        width = int(lengths.max())
        columns = torch.arange(width)[None]
        start = width - lengths[:, None]  # where each row's prompt begins
        source = (columns - start).clamp(min=0)
        batch["prompt_mask"] = (columns >= start).long()
        batch["prompt_ids"] = batch["input_ids"].gather(1, source).masked_fill(
            batch["prompt_mask"] == 0, pad_id)
    return batch


class SummarizationDataModule(PlmDataModule):
    """Tokenized, dynamically padded (source, summary) pairs; ``texts[split]`` holds the raw
    ``id``, ``source`` and ``reference`` of each eval split's rows, by ``index``.
    ``decoder_start_token_id`` None: the decoder-only layout (module docstring). Subclasses
    read other tasks as text pairs through ``columns``, ``sources``, ``targets`` and
    ``references``."""

    required_keys = REQUIRED_KEYS

    def __init__(self, task: Mapping | DictConfig, tokenizer: TextTokenizer,
                 decoder_start_token_id: int | None, seed: int = 0) -> None:
        super().__init__(task_config(task, self.required_keys),
                         partial(collate, pad_id=tokenizer.special.pad), seed)
        self.source_encoder = tokenizer.truncating(self.task["source_max_length"],
                                                  setting="task.source_max_length")
        self.target_encoder = tokenizer.truncating(self.task["target_max_length"],
                                                  setting="task.target_max_length")
        self.decoder_start_token_id = decoder_start_token_id
        self.bos = tokenizer.special.cls
        self.texts: dict[str, dict[str, list[str]]] = {}

    def columns(self) -> list[str]:
        """The raw columns the text pairs are made of."""
        return [self.task["source_field"], self.task["target_field"]]

    def sources(self, rows: dict[str, list]) -> list[str]:
        """The source texts of a batch of raw rows, as the model reads them."""
        prefix = self.task.get("source_prefix") or ""
        return [prefix + text for text in rows[self.task["source_field"]]]

    def targets(self, rows: dict[str, list]) -> list[str]:
        """The texts the model learns to generate."""
        return rows[self.task["target_field"]]

    def references(self, rows: dict[str, list]) -> list[str]:
        """What the generated texts are scored against."""
        return self.targets(rows)

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        train_split = self.task["splits"].get("train")
        if train_split:
            self.train_data = self._prepare(train_split, self.task.get("max_train_samples"))
        cap = self.task.get("max_eval_samples")
        self.eval_data = [self._prepare(split, cap) for split in self.eval_split_names]
        self.predict_data = [self._prepare(split, None) for split in self.predict_split_names]

    def _raw(self, split: str, cap: int | None) -> datasets.Dataset:
        """The rows of ``split`` (its first ``cap``): the columns the pairs are made of, and ids."""
        return _load(self.task, split, cap, self.columns())

    def _prepare(self, split: str, cap: int | None) -> datasets.Dataset:
        task = self.task
        raw = self._raw(split, cap)
        if split in self.eval_split_names:
            id_field = task.get("id_field")
            rows = raw.to_dict()
            self.texts[split] = {
                "id": [str(i) for i in (raw[id_field] if id_field else range(len(raw)))],
                "source": self.sources(rows),
                "reference": self.references(rows),
            }
        key = [tokenizer_fingerprint(self.source_encoder),
               tokenizer_fingerprint(self.target_encoder), self.decoder_start_token_id,
               task["name"], split, cap, raw._fingerprint, task.get("source_prefix", ""),
               *self.columns(), type(self).__name__]
        ids = datasets.Sequence(datasets.Value("int32"))
        layout = ({"prompt_length": datasets.Value("int64")} if self.decoder_start_token_id is None
                  else {"decoder_input_ids": ids})
        features = datasets.Features(index=datasets.Value("int64"), input_ids=ids, labels=ids,
                                     **layout)
        return raw.map(
            self._encode, batched=True, with_indices=True, remove_columns=raw.column_names,
            features=features, new_fingerprint=hashlib.sha256(json.dumps(key).encode()
                                                              ).hexdigest()[:16],
            desc=f"tokenizing {task['name']} {split}",
        )

    def _encode(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        sources = [e.ids for e in self.source_encoder.encode_batch(self.sources(batch))]
        targets = [e.ids for e in self.target_encoder.encode_batch(self.targets(batch))]
        if self.decoder_start_token_id is not None:
            return {
                "index": indices, "input_ids": sources, "labels": targets,
                "decoder_input_ids": [[self.decoder_start_token_id, *ids[:-1]] for ids in targets],
            }
        # decoder-only: source then target (its <s> dropped); position i predicts token i + 1
        targets = [ids[1:] if ids[:1] == [self.bos] else ids for ids in targets]
        return {
            "index": indices,
            "input_ids": [source + target for source, target in zip(sources, targets, strict=True)],
            "labels": [[IGNORE_INDEX] * (len(source) - 1) + target + [IGNORE_INDEX]
                       for source, target in zip(sources, targets, strict=True)],
            "prompt_length": [len(source) for source in sources],
        }

    @property
    def fingerprints(self) -> dict[str, str]:
        evals = zip(self.eval_split_names, self.eval_data, strict=True)
        splits = {"train": self.train_data, **dict(evals)}
        return {split: data._fingerprint for split, data in splits.items() if data is not None}
