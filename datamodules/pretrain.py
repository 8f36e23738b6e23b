"""Pretraining data: documents -> sentences -> NSP pairs or packed inputs -> masked batches.

Devlin et al. 2019 (BERT), §3.1 and Appendix A.2: a document-level corpus (BooksCorpus and
Wikipedia) is split into sentences, paired for next sentence prediction, and masked for the
masked LM. Liu et al. 2019 (RoBERTa), §4.1: static masking duplicates the data ``dupe_factor``
times (each copy paired and masked differently, fixed for all epochs); dynamic masking draws a
new mask in the collate of every batch. §4.2: without NSP, inputs are FULL-SENTENCES.

Documents come from ``load_split`` in one of two layouts (``document_format``): ``wikitext``
(one row per line, an article begins at a " = Title = " line) or ``article`` (one row per
document, lines separated by "\\n"; a list of words, as a tagging dataset's tokens, is read as
the words joined by spaces). Sentences are lines split after sentence-final punctuation; their
token ids are cached by ``datasets`` under a fingerprint of (tokenizer, task, split, cap).

A corpus with one split holds out its last ``eval_documents`` documents as the eval split
"heldout", carved from the training split as the run caps it, or, for a task that only evaluates
(no training split), from the split ``heldout_of`` names.
"""

import hashlib
import json
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

import datasets
from omegaconf import DictConfig

from datamodules.base import PlmDataModule, task_config
from datamodules.errors import PlmbenchError
from datamodules.packing import pack_examples
from datamodules.sampling import EpochSampler, PhasedSampler
from datamodules.sources import load_split
from datamodules.tokenization import TextTokenizer, tokenizer_fingerprint

REQUIRED_KEYS = (
    "name", "dataset", "config", "text_field", "splits", "document_format", "max_length",
    "batch_size",
)
DOCUMENT_FORMATS = ("wikitext", "article")
#: the eval split name of the documents held out of a single-split corpus (task.eval_documents)
HELD_OUT = "heldout"
#: a WikiText heading line of any level, " = = Section = = " ...
WIKITEXT_HEADING = re.compile(r" (=+) .+ \1 ")
#: a WikiText article title: exactly one '=' on each side
WIKITEXT_TITLE = re.compile(r" = [^=](?:.*[^=])? = ")
#: a sentence ends at . ! or ? followed by space and a capital (optionally after a quote/bracket)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z])")

T = TypeVar("T")


def _task_config(task: Mapping | DictConfig) -> dict:
    """The task config as a plain dict, checked for what this module needs."""
    config = task_config(task, REQUIRED_KEYS)
    if config["document_format"] not in DOCUMENT_FORMATS:
        raise PlmbenchError(
            f"task {config['name']}: document_format {config['document_format']!r} is not one "
            f"of {list(DOCUMENT_FORMATS)}; fix the task YAML"
        )
    return config


def _sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in SENTENCE_END.split(line.strip()) if s]


def _split_row(text: str | list[str] | None, document_format: str) -> tuple[bool, list[str]]:
    """(does this row begin a document, its sentences); WikiText headings give no sentences."""
    text = " ".join(text) if isinstance(text, list) else text or ""
    if document_format == "article":
        return True, _sentences(text)
    line = text.strip("\n")
    if WIKITEXT_HEADING.fullmatch(line):
        return WIKITEXT_TITLE.fullmatch(line) is not None, []
    return False, _sentences(text)


def _group_documents(rows: Iterable[tuple[bool, list[T]]], cap: int | None) -> Iterator[list[T]]:
    """Non-empty documents (lists of sentences) from rows of (begins a document, sentences), at
    most ``cap`` of them."""
    document: list[T] = []
    count = 0
    for starts, sentences in rows:
        if starts and document:
            yield document
            document, count = [], count + 1
        if cap is not None and count >= cap:
            return
        document.extend(sentences)
    if document:
        yield document


def _held_out_source(task: dict) -> str | None:
    """The split the "heldout" documents are carved from: the training split, else
    ``heldout_of`` (a task that only evaluates)."""
    return task["splits"].get("train") or task.get("heldout_of")


def _split_cap(task: dict, split: str) -> int | None:
    """max_train_samples for the train split (or the one held-out documents are carved from, so
    an evaluation carves what a training run held out), max_eval_samples for the others."""
    is_train = split == _held_out_source(task)
    return task.get("max_train_samples" if is_train else "max_eval_samples")


def _row_stream(raw: datasets.Dataset, task: dict) -> Iterator[tuple[bool, list[str]]]:
    texts = (text for batch in raw.iter(batch_size=1024) for text in batch[task["text_field"]])
    return (_split_row(text, task["document_format"]) for text in texts)


def _load_rows(task: dict, split: str, cap: int | None) -> datasets.Dataset:
    """The rows of ``split`` that hold its first ``cap`` (non-empty) documents."""
    raw = load_split(
        task["dataset"], task["config"], split, [task["text_field"]], task.get("hub_id")
    )
    if cap is None:
        return raw
    # group row indices instead of sentences: the scan stops once cap documents are complete
    rows = (
        (starts, [index] if sentences else [])
        for index, (starts, sentences) in enumerate(_row_stream(raw, task))
    )
    documents = list(_group_documents(rows, cap))
    return raw.select(range(documents[-1][-1] + 1 if documents else 0))


def vocabulary_corpus(task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
    """(what identifies it, the sentences) of the training split's capped documents (those the
    held-out ones are carved from, for a task that only evaluates), e.g. to train the vocabulary
    of a model pretrained from scratch."""
    task = _task_config(task)
    split = _held_out_source(task)
    if split is None:
        raise PlmbenchError(f"task {task['name']} has no training text; give it splits.train")
    cap = _split_cap(task, split)
    raw = _load_rows(task, split, cap)
    key = json.dumps([task["dataset"], task["config"], split, raw._fingerprint, task["text_field"],
                      task["document_format"], cap])
    documents = _group_documents(_row_stream(raw, task), None)
    return key, (sentence for document in documents for sentence in document)


def split_documents(task: Mapping | DictConfig, split: str) -> list[list[str]]:
    """The documents of ``split`` as lists of sentence strings, as a DataModule of ``task``
    reads them: capped, and for "heldout" the held-out documents."""
    task = _task_config(task)
    source = _held_out_source(task) if split == HELD_OUT else split
    raw = _load_rows(task, source, _split_cap(task, source))
    documents = list(_group_documents(_row_stream(raw, task), None))
    return documents[-task["eval_documents"]:] if split == HELD_OUT else documents


#: documents -> sentences -> token ids (no special tokens), as the example builders take them
Documents = list[list[list[int]]]


class PretrainDataModule(PlmDataModule):
    """Pretraining batches from a document corpus.

    What an example is (NSP pairs, packed FULL-SENTENCES, ...) and how a batch is corrupted
    (masking) belong to the objective: the run passes ``make_examples(documents, rng=rng)`` and the
    objective's ``collate_fn`` in. Training data is ``copies`` passes of ``make_examples`` (static
    masking duplicates the data, RoBERTa §4.1); with ``seeded`` every training example carries a
    ``mask_seed`` so its corruption is fixed across epochs. Eval examples always carry one, so eval
    losses compare across epochs and runs. With ``pack`` the examples are packed into rows of
    ``max_length`` tokens (``datamodules/packing.py``) before any of that. With ``text`` the
    examples are made from sentence strings, not token ids (the objective tokenizes them).

    ``phases`` (``task.length_schedule``, BERT A.2): (share of the steps, length, example
    builder at that length) per phase; the training examples are each phase's, made and packed
    at its length, and trained on in turn (``PhasedSampler``); eval examples stay at
    ``max_length``.
    """

    def __init__(
        self,
        task: Mapping | DictConfig,
        tokenizer: TextTokenizer,
        make_examples: Callable[[Documents, random.Random], list[dict]],
        collate_fn: Callable,
        copies: int = 1,
        seeded: bool = False,
        pack: bool = False,
        seed: int = 0,
        text: bool = False,
        phases: list[tuple[float, int, Callable]] | None = None,
    ) -> None:
        super().__init__(_task_config(task), collate_fn, seed)
        self.make_examples, self.copies, self.seeded = make_examples, copies, seeded
        self.phases = phases or []
        self.phase_sizes: list[int] = []
        self.pack, self.text = pack, text
        # sentences are encoded without special tokens and cut when examples are built
        self.encoder = tokenizer.backend
        # a corpus with one split holds out its last `eval_documents` documents (split "heldout")
        self.held_out = self.task.get("eval_documents") or 0
        if HELD_OUT in self.eval_split_names and not self.held_out:
            raise PlmbenchError(
                f"task {self.task['name']}: eval split {HELD_OUT!r} is carved from the training "
                "split; set task.eval_documents to the number of documents to hold out"
            )
        self.tokenized: dict[str, datasets.Dataset] = {}  # split -> rows of sentence token ids

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:  # once for all stages
            return
        train_split = self.task["splits"].get("train")
        source = _held_out_source(self.task)
        held_out: Documents = []
        if train_split or HELD_OUT in self.eval_split_names:
            if source is None:
                raise PlmbenchError(
                    f"task {self.task['name']}: eval split {HELD_OUT!r} is carved from the "
                    "training split; give the task splits.train, or heldout_of to only evaluate"
                )
            documents = self.documents(source)
            if self.held_out:
                if len(documents) <= self.held_out:
                    raise PlmbenchError(
                        f"task {self.task['name']}: {len(documents)} training documents "
                        f"(max_train_samples={self.task.get('max_train_samples')}) leave none "
                        f"to train on after holding out eval_documents={self.held_out}; raise "
                        "task.max_train_samples or lower task.eval_documents"
                    )
                documents, held_out = documents[: -self.held_out], documents[-self.held_out :]
        if train_split:
            rng = random.Random(f"{self.seed}:{train_split}")
            phases = self.phases or [(1.0, self.task["max_length"], self.make_examples)]
            per_phase = [self._rows([example for _ in range(self.copies)
                                     for example in make(documents, rng=rng)], length)
                         for _, length, make in phases]
            self.phase_sizes = [len(examples) for examples in per_phase]
            examples = [example for examples in per_phase for example in examples]
            if documents and not all(self.phase_sizes):
                raise PlmbenchError(
                    f"task {self.task['name']}: the objective makes no example of its "
                    f"{len(documents)} training documents (sentence-pair objectives need "
                    "documents of two sentences or more); use objective=mlm"
                )
            self.train_data = self._with_mask_seeds(examples, rng) if self.seeded else examples
        for split in self.eval_split_names:
            rng = random.Random(f"{self.seed}:{split}")
            split_documents = held_out if split == HELD_OUT else self.documents(split)
            self.eval_data.append(self._with_mask_seeds(
                self._rows(self.make_examples(split_documents, rng=rng)), rng))

    def _rows(self, examples: list[dict], length: int | None = None) -> list[dict]:
        """The examples as rows: packed into rows of ``length`` (``max_length``) tokens with
        ``pack``."""
        length = length or self.task["max_length"]
        return pack_examples(examples, length) if self.pack else examples

    def _sampler(self, data) -> EpochSampler:
        """The length schedule's phases in turn for exactly max_steps batches, else the shared
        per-epoch order."""
        if not self.phases:
            return super()._sampler(data)
        steps = self.trainer.max_steps if self.trainer is not None else -1
        if steps is None or steps < 1:
            raise PlmbenchError(f"task {self.task['name']}: task.length_schedule shares the "
                                "steps between lengths; set trainer.max_steps")
        return PhasedSampler(self.phase_sizes, [share for share, _, _ in self.phases],
                             self.task["batch_size"], steps, self.seed)

    @property
    def fingerprints(self) -> dict[str, str]:
        """The ``datasets`` fingerprint of each tokenized split (source rows, tokenizer, caps)."""
        return {split: data._fingerprint for split, data in self.tokenized.items()}

    def documents(self, split: str) -> list[list[list[int]]] | list[list[str]]:
        """The (capped) documents of ``split``: lists of sentences as token ids (with ``text``:
        as strings, for objectives that read the text, e.g. salient span masking)."""
        if self.text:
            raw = _load_rows(self.task, split, _split_cap(self.task, split))
            self.tokenized[split] = raw  # its fingerprint names the source rows
            return list(_group_documents(_row_stream(raw, self.task), None))
        tokenized = self._tokenize(split, _split_cap(self.task, split))
        rows = (
            (starts, sentences)
            for batch in tokenized.iter(batch_size=1024)
            for starts, sentences in zip(batch["doc_start"], batch["sentences"], strict=True)
        )
        return list(_group_documents(rows, None))

    def _tokenize(self, split: str, cap: int | None) -> datasets.Dataset:
        """Rows of (doc_start, sentences as token ids), cached by ``datasets``."""
        task = self.task
        raw = _load_rows(task, split, cap)
        # raw._fingerprint identifies the source rows (and the row cap), so a re-mirrored file
        # is re-tokenized; the patterns are in the key so a new splitting rule is too
        key = [
            tokenizer_fingerprint(self.encoder), task["name"], split, cap, raw._fingerprint,
            task["text_field"], task["document_format"], SENTENCE_END.pattern,
            WIKITEXT_HEADING.pattern, WIKITEXT_TITLE.pattern,
        ]
        features = datasets.Features(
            doc_start=datasets.Value("bool"),
            sentences=datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),
        )
        self.tokenized[split] = raw.map(
            self._encode,
            batched=True,
            remove_columns=raw.column_names,
            features=features,
            new_fingerprint=hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16],
            desc=f"splitting and tokenizing {task['name']} {split}",
        )
        return self.tokenized[split]

    def _encode(self, batch: dict[str, list]) -> dict[str, list]:
        document_format = self.task["document_format"]
        rows = [_split_row(text, document_format) for text in batch[self.task["text_field"]]]
        flat = [sentence for _, sentences in rows for sentence in sentences]
        ids = [e.ids for e in self.encoder.encode_batch(flat, add_special_tokens=False)]
        sentences, start = [], 0
        for _, row in rows:
            sentences.append(ids[start : start + len(row)])
            start += len(row)
        return {"doc_start": [starts for starts, _ in rows], "sentences": sentences}

    @staticmethod
    def _with_mask_seeds(examples: list[dict], rng: random.Random) -> list[dict]:
        return [{**example, "mask_seed": rng.getrandbits(63)} for example in examples]


class HeldOutCorpora(PlmDataModule):
    """The held-out documents of several corpora in one DataModule, an eval split per corpus
    (named as ``task.splits.eval`` names them): a checkpoint scored on every domain's text in
    one run. Each corpus is a ``PretrainDataModule`` that only evaluates."""

    def __init__(self, task: Mapping | DictConfig, corpora: Mapping[str, PretrainDataModule],
                 collate_fn: Callable, seed: int = 0) -> None:
        super().__init__(task_config(task, ("name", "splits")), collate_fn, seed)
        self.corpora = dict(corpora)

    def setup(self, stage: str | None = None) -> None:
        if self.eval_data:
            return
        for name in self.eval_split_names:
            corpus = self.corpora[name]
            corpus.setup(stage)
            self.eval_data.append(corpus.eval_data[0])

    @property
    def fingerprints(self) -> dict[str, str]:
        return {f"{name}/{split}": fingerprint for name, corpus in self.corpora.items()
                for split, fingerprint in corpus.fingerprints.items()}
