"""Summarization data: (source document, reference summary) pairs for sequence-to-sequence
models (See et al. 2017's CNN/DailyMail, Hermann et al. 2015; AESLC, Zhang & Tetreault 2019;
DialogSum, Chen et al. 2021).

A task YAML names the dataset, its source and target columns, an optional id column, an optional
source prefix (T5's "summarize: ", Raffel et al. 2020, §2.4) and the source and target lengths.
Sources are encoded with the tokenizer's single-sequence template (BART: <s> x </s>) and cut to
``source_max_length``; targets the same way to ``target_max_length``: they are the labels, and the
decoder inputs are the labels shifted right after the model's decoder start token (teacher
forcing). Each example keeps its row ``index``, so generations are joined back to the raw id,
source and reference (``texts``), which ROUGE scores untruncated.
"""

import hashlib
import json
from collections.abc import Iterator, Mapping
from functools import partial

import datasets
from omegaconf import DictConfig

from datamodules.base import PlmDataModule, task_config
from datamodules.collate import pad_collate
from datamodules.sources import load_split
from datamodules.tokenization import TextTokenizer, tokenizer_fingerprint

REQUIRED_KEYS = (
    "name", "dataset", "config", "source_field", "target_field", "splits", "source_max_length",
    "target_max_length", "batch_size",
)


def _load(task: dict, split: str, cap: int | None) -> datasets.Dataset:
    columns = [task["source_field"], task["target_field"], *filter(None, [task.get("id_field")])]
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


class SummarizationDataModule(PlmDataModule):
    """Tokenized, dynamically padded (source, summary) pairs; ``texts[split]`` holds the raw
    ``id``, ``source`` and ``reference`` of each eval split's rows, by ``index``."""

    def __init__(self, task: Mapping | DictConfig, tokenizer: TextTokenizer,
                 decoder_start_token_id: int, seed: int = 0) -> None:
        collate = partial(pad_collate, pad_id=tokenizer.special.pad)
        super().__init__(task_config(task, REQUIRED_KEYS), collate, seed)
        self.source_encoder = tokenizer.truncating(self.task["source_max_length"])
        self.target_encoder = tokenizer.truncating(self.task["target_max_length"])
        self.decoder_start_token_id = decoder_start_token_id
        self.texts: dict[str, dict[str, list[str]]] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        train_split = self.task["splits"].get("train")
        if train_split:
            self.train_data = self._prepare(train_split, self.task.get("max_train_samples"))
        cap = self.task.get("max_eval_samples")
        self.eval_data = [self._prepare(split, cap) for split in self.eval_split_names]

    def _prepare(self, split: str, cap: int | None) -> datasets.Dataset:
        task = self.task
        raw = _load(task, split, cap)
        if split in self.eval_split_names:
            id_field = task.get("id_field")
            self.texts[split] = {
                "id": [str(i) for i in (raw[id_field] if id_field else range(len(raw)))],
                "source": raw[task["source_field"]],
                "reference": raw[task["target_field"]],
            }
        key = [tokenizer_fingerprint(self.source_encoder),
               tokenizer_fingerprint(self.target_encoder), self.decoder_start_token_id,
               task["name"], split, cap, raw._fingerprint, task.get("source_prefix", ""),
               task["source_field"], task["target_field"]]
        ids = datasets.Sequence(datasets.Value("int32"))
        features = datasets.Features(index=datasets.Value("int64"), input_ids=ids, labels=ids,
                                     decoder_input_ids=ids)
        return raw.map(
            self._encode, batched=True, with_indices=True, remove_columns=raw.column_names,
            features=features, new_fingerprint=hashlib.sha256(json.dumps(key).encode()
                                                              ).hexdigest()[:16],
            desc=f"tokenizing {task['name']} {split}",
        )

    def _encode(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        prefix = self.task.get("source_prefix") or ""
        sources = [prefix + text for text in batch[self.task["source_field"]]]
        labels = [e.ids for e in self.target_encoder.encode_batch(batch[self.task["target_field"]])]
        return {
            "index": indices,
            "input_ids": [e.ids for e in self.source_encoder.encode_batch(sources)],
            "labels": labels,
            "decoder_input_ids": [[self.decoder_start_token_id, *ids[:-1]] for ids in labels],
        }

    @property
    def fingerprints(self) -> dict[str, str]:
        evals = zip(self.eval_split_names, self.eval_data, strict=True)
        splits = {"train": self.train_data, **dict(evals)}
        return {split: data._fingerprint for split, data in splits.items() if data is not None}
