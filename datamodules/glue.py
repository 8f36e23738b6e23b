"""GLUE-style sentence(-pair) classification and regression data.

Wang et al. 2019 (GLUE), §3 tasks; inputs as in Devlin et al. 2019 (BERT), §4.1: a single
sentence as "[CLS] A [SEP]", a pair as "[CLS] A [SEP] B [SEP]" with segment ids 0/1, the
classifier reading [CLS]; STS-B is a regression (num_labels 1, float labels). Labels are ids,
or strings (SciBERT's and don't-stop-pretraining's jsonl schema) numbered by their place in the
task's ``label_names``. An eval split may be another config's split, named "<config>/<split>"
(``datamodules.sources.load_split``): a model trained on one domain is scored on another's.
A task is data (Design contract 4): the task config names the dataset, splits, text fields and
label count, so a new GLUE-style task is one YAML. Tokenized splits are cached by ``datasets``
under a fingerprint of (tokenizer, task, split, max length, sample cap).
"""

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from functools import partial

import datasets
from omegaconf import DictConfig

from datamodules.base import PlmDataModule, task_config
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.sources import load_split, split_source
from datamodules.tokenization import TextTokenizer, tokenizer_fingerprint

REQUIRED_KEYS = (
    "name", "dataset", "config", "text_fields", "label_field", "num_labels", "splits",
    "max_length", "batch_size",
)


def _load(task: dict, split: str, cap: int | None) -> datasets.Dataset:
    """The raw rows of ``split`` (text fields and label), its first ``cap`` when capped."""
    columns = [*task["text_fields"], task["label_field"]]
    raw = load_split(task["dataset"], task["config"], split, columns, task.get("hub_id"))
    return raw if cap is None else raw.select(range(min(cap, len(raw))))


def vocabulary_corpus(task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
    """(what identifies it, the texts) of the capped training split, for a scratch vocabulary."""
    return GlueDataModule.vocabulary_corpus(task)


def labels(task: Mapping | DictConfig, split: str, cap_key: str) -> list:
    """The label ids of ``split``, capped as the task caps it (``cap_key``: max_train_samples or
    max_eval_samples): what a data-only baseline is computed from."""
    return GlueDataModule.labels(task, split, cap_key)


def label_ids(task: Mapping, values: list) -> list:
    """A label column as ids: ids and scores as they are, strings by their index in
    ``task.label_names``; a string the task does not name is an error naming it."""
    if not any(isinstance(value, str) for value in values):
        return values
    index = {name: i for i, name in enumerate(task.get("label_names") or [])}
    unknown = sorted({value for value in values if value not in index})
    if unknown:
        raise PlmbenchError(
            f"task {task['name']}: labels {unknown[:5]} of column {task['label_field']!r} are not "
            f"in label_names {list(index)}; add them to the task YAML"
        )
    return [index[value] for value in values]


def _task_dict(task: Mapping | DictConfig) -> dict:
    """The task config as a plain dict, checked for what this module needs."""
    config = task_config(task, REQUIRED_KEYS)
    name = config["name"]
    if not 1 <= len(config["text_fields"]) <= 2:
        raise PlmbenchError(
            f"task {name}: text_fields must name one or two columns, got {config['text_fields']}; "
            "fix the task YAML"
        )
    if config["num_labels"] < 1:
        raise PlmbenchError(
            f"task {name}: num_labels must be >= 1 (1 = regression), got {config['num_labels']}; "
            "fix the task YAML"
        )
    names = config.get("label_names")
    if names is not None and config["num_labels"] > 1 and len(names) != config["num_labels"]:
        raise PlmbenchError(
            f"task {name}: {len(names)} label_names for num_labels={config['num_labels']}; "
            "give one name per label"
        )
    return config


class GlueDataModule(PlmDataModule):
    """Tokenized, dynamically padded splits of one GLUE-style task.

    Tasks whose rows need reading or encoding of their own (multiple choice, spoiler sentences in
    their review) subclass it and replace the class methods ``checked`` (the task config's
    checks), ``rows`` (a split's raw rows, capped) and ``texts`` (what a scratch vocabulary
    learns from), and ``_encode`` with its ``features``; the caching, capping and loaders stay."""

    def __init__(
        self,
        task: Mapping | DictConfig,
        tokenizer: TextTokenizer,
        seed: int = 0,
    ) -> None:
        collate = partial(pad_collate, pad_id=tokenizer.special.pad)
        super().__init__(self.checked(task), collate, seed)
        self.tokenizer = tokenizer
        # pairs lose tokens from the longer side first (BERT's _truncate_seq_pair); a task that
        # names no text_fields encodes pairs (multiple choice: context, choice)
        segments = len(self.task.get("text_fields") or ()) or 2
        self.encoder = tokenizer.truncating(self.task["max_length"], segments,
                                            f"task {self.task['name']}: task.max_length")

    @classmethod
    def checked(cls, task: Mapping | DictConfig) -> dict:
        """The task config as a plain dict, checked for what the DataModule needs."""
        return _task_dict(task)

    @classmethod
    def rows(cls, task: dict, split: str, cap: int | None) -> datasets.Dataset:
        """The raw rows of ``split``, its first ``cap`` examples when capped."""
        return _load(task, split, cap)

    @classmethod
    def texts(cls, task: dict, rows: datasets.Dataset) -> Iterator[str]:
        """The texts of ``rows`` a scratch vocabulary is trained on."""
        return (text for field in task["text_fields"] for text in rows[field])

    @classmethod
    def label_column(cls, task: dict, rows: datasets.Dataset) -> list:
        """The label (id or score) of every row."""
        return label_ids(task, rows[task["label_field"]])

    @classmethod
    def vocabulary_corpus(cls, task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
        """(what identifies it, the texts) of the capped training split."""
        task = cls.checked(task)
        cap = task.get("max_train_samples")
        split = task["splits"]["train"]
        raw = cls.rows(task, split, cap)
        key = json.dumps([task["dataset"], task["config"], split, raw._fingerprint,
                          task.get("text_fields"), cap])
        return key, cls.texts(task, raw)

    @classmethod
    def labels(cls, task: Mapping | DictConfig, split: str, cap_key: str) -> list:
        """The labels of ``split``, capped as the task caps it (``cap_key``: max_train_samples or
        max_eval_samples): what a data-only baseline is computed from."""
        task = cls.checked(task)
        return cls.label_column(task, cls.rows(task, split, task.get(cap_key)))

    @property
    def is_regression(self) -> bool:
        return self.task["num_labels"] == 1

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:  # Lightning calls it once per stage
            return
        train_split = self.task["splits"].get("train")
        if train_split:
            self.train_data = self._prepare(train_split, self.task.get("max_train_samples"),
                                            labelled=True)
        cap = self.task.get("max_eval_samples")
        # a task without a training split predicts its eval splits, unlabelled (GLUE AX)
        self.eval_data = [self._prepare(split, cap, labelled=bool(train_split))
                          for split in self.eval_split_names]
        self.predict_data = [self._prepare(split, None) for split in self.predict_split_names]

    def _prepare(self, split: str, cap: int | None, labelled: bool = False) -> datasets.Dataset:
        """Load ``split``, keep its first ``cap`` rows, check the labels of a ``labelled`` split
        (one a run trains on or scores), tokenize (cached by fingerprint)."""
        return self._encoded(self.rows(self.task, split, cap), split, cap, labelled)

    def held_out(self, split: str, start: int, count: int) -> datasets.Dataset:
        """Rows ``start`` to ``start + count`` of ``split`` (fewer where it ends), labelled and
        tokenized as a training split is: examples a run that trained on the first ``start``
        rows did not see (head importance, ``lit_models/families/head_pruning.py``)."""
        raw = self.rows(self.task, split, start + count)
        return self._encoded(raw.select(list(range(start, len(raw)))), split,
                             [start, count], labelled=True)

    def _encoded(self, raw: datasets.Dataset, split: str, rows: object,
                 labelled: bool) -> datasets.Dataset:
        """``raw`` (the ``rows`` of ``split``) with its labels checked where ``labelled``,
        tokenized."""
        task = self.task
        if labelled:
            self.check_labels(split, self.label_column(task, raw))
        # raw._fingerprint identifies the source rows, so a re-mirrored file is re-tokenized
        key = [tokenizer_fingerprint(self.encoder), task["name"], split, task["max_length"], rows,
               raw._fingerprint]
        fingerprint = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        encoded = raw.map(
            self._encode,
            batched=True,
            remove_columns=raw.column_names,
            features=self.features,
            new_fingerprint=fingerprint,
            desc=f"tokenizing {task['name']} {split}",
        )
        # each example's row in the split: GLUE's idx, what the predictions files are keyed by
        return encoded.add_column("index", list(range(len(encoded))))

    def check_labels(self, split: str, labels: list) -> None:
        """Every label of ``split`` is one of the task's: a class id below ``num_labels`` (the
        loss would index past its classes, or train on -1, an unlabelled test row's mark), or a
        finite score for a regression; the first that is not names the file, column and row."""
        task, count = self.task, self.task["num_labels"]
        for row, label in enumerate(labels):
            number = isinstance(label, int | float) and not isinstance(label, bool)
            if count == 1:
                fits = number and math.isfinite(label)
            else:
                fits = number and float(label).is_integer() and 0 <= label < count
            if not fits:
                names = task.get("label_names")
                allowed = ("a finite score" if count == 1 else f"ids 0 to {count - 1}"
                           + (f" ({', '.join(map(str, names))})" if names else ""))
                where = split_source(task["dataset"], task["config"], split, task.get("hub_id"))
                raise PlmbenchError(
                    f"{where} column {task.get('label_field', 'label')} row {row} holds label "
                    f"{label!r}, outside task {task['name']}'s labels ({allowed}); fix the row, "
                    "or the task's num_labels and label_names")

    @property
    def features(self) -> datasets.Features:
        """The columns ``_encode`` writes."""
        return datasets.Features(
            input_ids=datasets.Sequence(datasets.Value("int32")),
            token_type_ids=datasets.Sequence(datasets.Value("int8")),
            labels=datasets.Value("float32" if self.is_regression else "int64"),
        )

    def _encode(self, batch: dict[str, list]) -> dict[str, list]:
        texts = [batch[field] for field in self.task["text_fields"]]
        inputs = texts[0] if len(texts) == 1 else list(zip(*texts, strict=True))
        encodings = self.encoder.encode_batch(inputs)
        return {
            "input_ids": [e.ids for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "labels": self.label_column(self.task, batch),
            **self.extra_columns(batch, encodings),
        }

    def extra_columns(self, batch: dict[str, list], encodings: list) -> dict[str, list]:
        """Columns a subclass adds from the rows and their encodings (in ``features`` too)."""
        return {}

    @property
    def fingerprints(self) -> dict[str, str]:
        """The ``datasets`` fingerprint of each tokenized split (source rows, tokenizer, caps)."""
        evals = zip(self.eval_split_names, self.eval_data, strict=True)
        splits = {"train": self.train_data, **dict(evals)}
        return {split: data._fingerprint for split, data in splits.items() if data is not None}
