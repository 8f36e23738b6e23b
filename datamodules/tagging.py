"""Sequence labelling data: named entities as BIO tags over words (CoNLL-2003, NCBI-disease).

Devlin et al. 2019 (BERT), §5.3: the words are tokenized into sub-tokens and the tag of a word
is predicted at its first sub-token; the other sub-tokens (and special tokens) carry no label
(-100, which the loss ignores). Each word is tokenized on its own, as transformers'
token-classification recipe does (``is_split_into_words=True``; byte-level BPE words after a
space, its ``add_prefix_space=True``: ``TextTokenizer.words_encoder``), so an export labels the
sub-tokens transformers' own pipeline labels; each first sub-token keeps its word's index
(``word_ids``). Words the model does not see (past ``max_length`` tokens, or that tokenize to
nothing) are predicted "O", so every prediction covers the whole sentence.
"""

import hashlib
import json
from collections.abc import Iterator, Mapping
from functools import partial

import datasets
import numpy as np
import pyarrow.compute as pc
from omegaconf import DictConfig
from tokenizers import Tokenizer

from datamodules.base import PlmDataModule, task_config
from datamodules.collate import IGNORE_INDEX, pad_collate
from datamodules.errors import PlmbenchError
from datamodules.sources import load_split, split_source
from datamodules.tokenization import TextTokenizer, tokenizer_fingerprint

#: the word each first sub-token starts (-1 elsewhere): evaluation maps predictions to words by it
PAD_VALUES = {"word_ids": -1}
REQUIRED_KEYS = ("name", "dataset", "config", "splits", "tokens_field", "tags_field",
                 "label_names", "max_length", "batch_size")


def _task_dict(task: Mapping | DictConfig) -> dict:
    config = task_config(task, REQUIRED_KEYS)
    names = config["label_names"]
    wrong = [n for n in names if n != "O" and not n.startswith(("B-", "I-"))]
    if wrong or "O" not in names:
        raise PlmbenchError(f"task {config['name']}: label_names must be BIO tags with an 'O' "
                            f"(got {wrong or names}); fix the task YAML")
    return config


def load_sentences(task: Mapping, split: str, cap: int | None) -> datasets.Dataset:
    columns = [task["tokens_field"], task["tags_field"]]
    raw = load_split(task["dataset"], task["config"], split, columns, task.get("hub_id"))
    return raw if cap is None else raw.select(range(min(cap, len(raw))))


def vocabulary_corpus(task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
    """The capped training sentences as text, for a scratch vocabulary."""
    task = _task_dict(task)
    split, cap = task["splits"]["train"], task.get("max_train_samples")
    raw = load_sentences(task, split, cap)
    key = json.dumps([task["dataset"], task["config"], split, raw._fingerprint, cap])
    return key, (" ".join(words) for words in raw[task["tokens_field"]])


def first_subtokens(word_ids: list[int | None]) -> list[int]:
    """Per token: the index of the word it starts, -1 on special tokens and later sub-tokens
    (``word_ids``: each token's word, None on special tokens)."""
    out, previous = [], None
    for word in word_ids:
        out.append(word if word is not None and word != previous else -1)
        previous = word
    return out


def encode_words(encoder: Tokenizer, sentences: list[list[str]]) -> list[dict[str, list]]:
    """Per sentence of words: ``input_ids``, ``token_type_ids`` and ``word_ids`` (the word each
    first sub-token starts, -1 elsewhere), each word tokenized on its own (``encoder``:
    ``TextTokenizer.words_encoder``)."""
    encodings = encoder.encode_batch([list(words) for words in sentences], is_pretokenized=True)
    return [{"input_ids": e.ids, "token_type_ids": e.type_ids,
             "word_ids": first_subtokens(e.word_ids)} for e in encodings]


class TaggingDataModule(PlmDataModule):
    """Tokenized sentences with first-sub-token labels; ``eval_sentences`` keeps the words and
    gold tags of each eval split for scoring and prediction files."""

    def __init__(self, task: Mapping | DictConfig, tokenizer: TextTokenizer,
                 seed: int = 0) -> None:
        collate = partial(pad_collate, pad_id=tokenizer.special.pad, pad_values=PAD_VALUES)
        super().__init__(_task_dict(task), collate, seed)
        self.tokenizer = tokenizer
        self.encoder = tokenizer.words_encoder(self.task["max_length"], "task.max_length")
        self.eval_sentences: list[datasets.Dataset] = []

    @property
    def num_labels(self) -> int:
        return len(self.task["label_names"])

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:  # Lightning calls it once per stage
            return
        train_split = self.task["splits"].get("train")
        if train_split:
            raw = load_sentences(self.task, train_split, self.task.get("max_train_samples"))
            self.train_data = self._prepare(raw, train_split)
        for split in self.eval_split_names:
            raw = load_sentences(self.task, split, self.task.get("max_eval_samples"))
            self.eval_sentences.append(raw)
            self.eval_data.append(self._prepare(raw, split))

    def check_tags(self, raw: datasets.Dataset, split: str) -> None:
        """Every tag of ``split`` is an id of the task's ``label_names`` (the loss would index
        past its classes); the first that is not names the file, column, row and word."""
        task, count = self.task, self.num_labels
        tags = raw.with_format("arrow")[task["tags_field"]].combine_chunks()
        flat = pc.list_flatten(tags)
        bad = pc.or_kleene(pc.is_null(flat), pc.or_(pc.less(flat, 0),
                                                    pc.greater_equal(flat, count)))
        at = pc.index(bad, True).as_py()
        if at < 0:
            return
        row = pc.list_parent_indices(tags)[at].as_py()
        word = at - (tags.offsets[row].as_py() - tags.offsets[0].as_py())
        where = split_source(task["dataset"], task["config"], split, task.get("hub_id"))
        raise PlmbenchError(
            f"{where} column {task['tags_field']} row {row} word {word} holds tag "
            f"{flat[at].as_py()!r}, outside task {task['name']}'s labels (ids 0 to {count - 1}: "
            f"{', '.join(task['label_names'])}); fix the row, or the task's label_names")

    def _prepare(self, raw: datasets.Dataset, split: str) -> datasets.Dataset:
        task = self.task
        self.check_tags(raw, split)
        key = [tokenizer_fingerprint(self.encoder), task["name"], split, task["max_length"],
               raw._fingerprint]
        fingerprint = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        ids = datasets.Sequence(datasets.Value("int32"))
        features = datasets.Features(input_ids=ids, token_type_ids=datasets.Sequence(
            datasets.Value("int8")), labels=datasets.Sequence(datasets.Value("int16")),
            word_ids=datasets.Sequence(datasets.Value("int32")))
        return raw.map(self._encode, batched=True, remove_columns=raw.column_names,
                       features=features, new_fingerprint=fingerprint,
                       desc=f"tokenizing {task['name']} {split}")

    def _encode(self, batch: dict[str, list]) -> dict[str, list]:
        sentences, tags = batch[self.task["tokens_field"]], batch[self.task["tags_field"]]
        rows = encode_words(self.encoder, sentences)
        # index -1 picks the appended IGNORE_INDEX: no label off first sub-tokens
        labels = [np.asarray([*t, IGNORE_INDEX])[row["word_ids"]]
                  for row, t in zip(rows, tags, strict=True)]
        columns = ("input_ids", "token_type_ids", "word_ids")
        return {**{key: [row[key] for row in rows] for key in columns}, "labels": labels}

    @property
    def fingerprints(self) -> dict[str, str]:
        evals = zip(self.eval_split_names, self.eval_data, strict=True)
        splits = {"train": self.train_data, **dict(evals)}
        return {split: data._fingerprint for split, data in splits.items() if data is not None}
