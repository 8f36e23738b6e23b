"""Extractive question answering data: SQuAD v1.1 / v2.0 and SQuAD-format sets (XQuAD).

Rajpurkar et al. 2016 (SQuAD v1.1) and 2018 (v2.0, unanswerable questions); inputs as in Devlin
et al. 2019 (BERT), §4.2-4.3: the question and a window of the context packed as one pair
("[CLS] question [SEP] context [SEP]" in BERT's roles, "<s> q </s></s> c </s>" in RoBERTa's),
the answer a start and an end token of the context. A context longer than ``max_length`` is cut
into overlapping windows (the fast tokenizer's overflowing encodings: ``doc_stride`` tokens shared
by consecutive windows, as Hugging Face's ``run_qa.py`` counts it); a window that does not hold
the whole answer, and every window of an unanswerable v2.0 question, is trained to point at the
start token (the null answer, §4.3). ``doc_stride: null`` keeps only the first window (long-input
encoders such as Longformer read up to ``max_length`` tokens with no windows).

Every window keeps, per token, the character span it covers in the original context (-1 outside
the context), so predicted token spans map back to context text. Nothing here names an
architecture: special tokens are found by role and segments by the tokenizer's sequence ids.
"""

import hashlib
import json
from collections.abc import Iterator, Mapping
from functools import partial

import datasets
import numpy as np
from omegaconf import DictConfig
from tokenizers import Tokenizer

from datamodules.base import PlmDataModule, task_config
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.sources import load_split
from datamodules.tokenization import TextTokenizer, tokenizer_fingerprint

REQUIRED_KEYS = (
    "name", "dataset", "config", "splits", "id_field", "context_field", "question_field",
    "answers_field", "max_length", "doc_stride", "max_query_length", "batch_size",
)
#: what the model reads; the rest of an eval window's columns are for post-processing
MODEL_KEYS = ("input_ids", "token_type_ids", "question_mask")
PAD_VALUES = {"question_mask": 0}
#: bumped when the windows' features change meaning, so cached windows are not reused
FEATURES_VERSION = 2


def _source(task: Mapping, train: bool) -> tuple[str, str, str | None]:
    """(dataset, config, hub id) a split is read from: ``train_source`` may name another dataset
    for training (XQuAD: trained on SQuAD v1.1, evaluated on XQuAD)."""
    source = task.get("train_source") if train else None
    source = source or task
    return source["dataset"], source["config"], source.get("hub_id")


def load_examples(task: Mapping, split: str, cap: int | None, train: bool) -> datasets.Dataset:
    """The raw rows of ``split`` (id, context, question, answers), its first ``cap`` if capped."""
    fields = [task[k] for k in ("id_field", "context_field", "question_field", "answers_field")]
    dataset, config, hub_id = _source(task, train)
    raw = load_split(dataset, config, split, fields, hub_id)
    return raw if cap is None else raw.select(range(min(cap, len(raw))))


def _task_dict(task: Mapping | DictConfig) -> dict:
    config = task_config(task, REQUIRED_KEYS)
    stride, room = config["doc_stride"], config["max_length"] - config["max_query_length"] - 4
    if stride is not None and not 0 <= stride < room:
        raise PlmbenchError(
            f"task {config['name']}: doc_stride={stride} must be below max_length - "
            f"max_query_length - 4 = {room} (the context tokens of a window); lower doc_stride"
        )
    return config


def vocabulary_corpus(task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
    """Questions and (distinct) contexts of the capped training split, for a scratch vocabulary."""
    task = _task_dict(task)
    split, cap = task["splits"]["train"], task.get("max_train_samples")
    raw = load_examples(task, split, cap, train=True)
    key = json.dumps([*_source(task, True), split, raw._fingerprint, cap])
    contexts = dict.fromkeys(raw[task["context_field"]])
    return key, iter([*raw[task["question_field"]], *contexts])


def _answer_tokens(offsets: np.ndarray, context: np.ndarray, cls: int, answers: Mapping
                   ) -> tuple[int, int]:
    """(start, end) token of the first answer inside this window, else (cls, cls)."""
    if not answers["text"]:  # unanswerable (v2.0)
        return cls, cls
    first = answers["answer_start"][0]
    last = first + len(answers["text"][0])
    tokens = np.flatnonzero(context)
    starts, ends = offsets[tokens, 0], offsets[tokens, 1]
    if starts[0] > first or ends[-1] < last:  # the answer is not (wholly) in this window
        return cls, cls
    start = tokens[np.count_nonzero(starts <= first) - 1]
    end = tokens[np.argmax(ends >= last)]
    return int(start), int(end)


def _trim_first_offset(offsets: np.ndarray, context: np.ndarray, text: str) -> None:
    """Start a window's first context token after its leading spaces: tokenizers' byte-level
    offset trimming skips the first token of an overflowing window's second sequence."""
    first = int(np.argmax(context))
    start, end = offsets[first]
    while start < end and text[start].isspace():
        start += 1
    offsets[first, 0] = start


def _window_type_ids(window, first) -> list[int]:
    """Segment ids of a window laid out as the first window of its question (tokenizers gives an
    overflowing window of a ``Sequence`` post-processor, byte-level BPE's, the template's
    default type ids): the same leading and trailing special tokens, context tokens between."""
    if window is first:
        return first.type_ids
    sequence = window.sequence_ids
    lead = sequence.index(1)
    trail = sequence[::-1].index(1)
    context_type = first.type_ids[first.sequence_ids.index(1)]
    tail = first.type_ids[len(first.type_ids) - trail:]
    return first.type_ids[:lead] + [context_type] * (len(sequence) - lead - trail) + tail


class SquadDataModule(PlmDataModule):
    """Windows of (question, context) pairs: training windows with start/end targets, eval
    windows with their example index and character offsets (``eval_windows``) beside the eval
    examples (``eval_examples``) for post-processing."""

    def __init__(self, task: Mapping | DictConfig, tokenizer: TextTokenizer,
                 seed: int = 0) -> None:
        collate = partial(pad_collate, pad_id=tokenizer.special.pad, pad_values=PAD_VALUES)
        super().__init__(_task_dict(task), collate, seed)
        if tokenizer.special.cls is None:
            raise PlmbenchError("extractive QA needs a tokenizer with a cls/bos token to point "
                                "the null answer at; use a model whose vocabulary has one")
        self.tokenizer = tokenizer
        self.encoder = Tokenizer.from_str(tokenizer.backend.to_str())
        self.encoder.enable_truncation(self.task["max_length"], stride=self.task["doc_stride"] or 0,
                                       strategy="only_second")
        self.eval_examples: list[datasets.Dataset] = []
        self.eval_windows: list[datasets.Dataset] = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:  # Lightning calls it once per stage
            return
        train_split = self.task["splits"].get("train")
        if train_split:
            raw = load_examples(self.task, train_split, self.task.get("max_train_samples"), True)
            self.train_data = self._windows(raw, train_split, train=True)
        cap = self.task.get("max_eval_samples")
        for split in self.eval_split_names:
            raw = load_examples(self.task, split, cap, train=False)
            windows = self._windows(raw, split, train=False)
            self.eval_examples.append(raw)
            self.eval_windows.append(windows)
            # a window's index travels with it, so outputs gathered over DDP's ranks are matched
            self.eval_data.append(windows.select_columns(list(MODEL_KEYS))
                                  .add_column("index", list(range(len(windows)))))

    def _windows(self, raw: datasets.Dataset, split: str, train: bool) -> datasets.Dataset:
        """Tokenized windows of ``raw`` (cached by ``datasets`` under a fingerprint of the
        tokenizer, the featurisation settings and the source rows)."""
        task = self.task
        settings = [task[k] for k in ("max_length", "doc_stride", "max_query_length")]
        key = [tokenizer_fingerprint(self.tokenizer), task["name"], split, train, settings,
               raw._fingerprint, FEATURES_VERSION]
        fingerprint = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        ids = datasets.Sequence(datasets.Value("int32"))
        small = datasets.Sequence(datasets.Value("int8"))
        features = dict(input_ids=ids, token_type_ids=small, question_mask=small,
                        cls_index=datasets.Value("int32"))
        if train:
            features |= dict(start_positions=datasets.Value("int32"),
                             end_positions=datasets.Value("int32"))
        else:
            features |= dict(example_index=datasets.Value("int32"), offset_start=ids,
                             offset_end=ids)
        return raw.map(
            partial(self._encode, train=train), batched=True, with_indices=True,
            remove_columns=raw.column_names, features=datasets.Features(features),
            new_fingerprint=fingerprint, desc=f"windows of {task['name']} {split}",
        )

    def _cut_questions(self, questions: list[str]) -> list[str]:
        """Questions without leading spaces, cut after ``max_query_length`` tokens (BERT's
        run_squad.py cuts at 64)."""
        questions = [q.lstrip() for q in questions]
        limit = self.task["max_query_length"]
        encoded = self.tokenizer.backend.encode_batch(questions, add_special_tokens=False)
        return [q if len(e.offsets) <= limit else q[: e.offsets[limit - 1][1]]
                for q, e in zip(questions, encoded, strict=True)]

    def _encode(self, batch: dict[str, list], indices: list[int], train: bool) -> dict[str, list]:
        task = self.task
        questions = self._cut_questions(batch[task["question_field"]])
        contexts = batch[task["context_field"]]
        encodings = self.encoder.encode_batch(list(zip(questions, contexts, strict=True)))
        out: dict[str, list] = {key: [] for key in ("input_ids", "token_type_ids",
                                                    "question_mask", "cls_index")}
        for row, encoding in enumerate(encodings):
            windows = [encoding, *encoding.overflowing] if task["doc_stride"] is not None \
                else [encoding]
            for window in windows:
                sequence = np.array([-1 if s is None else s for s in window.sequence_ids])
                offsets = np.array(window.offsets, dtype=np.int64).reshape(-1, 2)
                context = sequence == 1
                _trim_first_offset(offsets, context, contexts[row])
                cls = window.ids.index(self.tokenizer.special.cls)
                out["input_ids"].append(window.ids)
                out["token_type_ids"].append(_window_type_ids(window, encoding))
                # global attention (Longformer) on everything up to the question's end: the
                # question and the classifier token, as Beltagy et al.'s TriviaQA code and
                # transformers' LongformerForQuestionAnswering set it
                question_end = np.flatnonzero(sequence == 0)[-1]
                out["question_mask"].append((np.arange(len(sequence)) <= question_end)
                                            .astype(np.int8))
                out["cls_index"].append(cls)
                if train:
                    answers = batch[task["answers_field"]][row]
                    start, end = _answer_tokens(offsets, context, cls, answers)
                    out.setdefault("start_positions", []).append(start)
                    out.setdefault("end_positions", []).append(end)
                else:
                    out.setdefault("example_index", []).append(indices[row])
                    out.setdefault("offset_start", []).append(np.where(context, offsets[:, 0], -1))
                    out.setdefault("offset_end", []).append(np.where(context, offsets[:, 1], -1))
        return out

    @property
    def fingerprints(self) -> dict[str, str]:
        evals = zip(self.eval_split_names, self.eval_windows, strict=True)
        splits = {"train": self.train_data, **dict(evals)}
        return {split: data._fingerprint for split, data in splits.items() if data is not None}
