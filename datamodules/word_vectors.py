"""Data of static word-vector training and intrinsic evaluation.

Training text is a corpus task's training split (``datamodules/pretrain.py`` reads its documents
and splits them into sentences, capped by ``max_train_samples``), as sentences of word ids with
the words outside the vocabulary dropped (as gensim and GloVe's ``cooccur`` drop them):

- ``sentences``: a batch is ``batch_size`` sentences of at most ``max_length`` words (word2vec:
  what one gensim ``train`` call reads);
- ``cooccurrences``: GloVe's non-zero co-occurrence counts X_ij (``datamodules/cooccurrence.py``,
  cached by corpus, vocabulary and window), a batch ``batch_size`` of them, drawn in a new random
  order every epoch (``glove.c`` reads a shuffled file).

Each eval split is a word set of the task's ``intrinsic`` section (``datamodules/word_sets.py``):
similarity pairs or analogy questions whose words are among the ``restrict_vocab`` most frequent
(matched case-insensitively with ``case_insensitive``, the most frequent spelling winning, as
gensim's evaluators do); ``set_sizes`` keeps each set's full size, so the share of items left out
is reported.
"""

import hashlib
import json
from collections.abc import Mapping
from functools import partial

import torch
from omegaconf import DictConfig

from datamodules import pretrain
from datamodules.base import PlmDataModule, task_config
from datamodules.collate import pad_collate
from datamodules.cooccurrence import Cooccurrences, count_cooccurrences
from datamodules.errors import PlmbenchError
from datamodules.tokenization import cached_directory
from datamodules.word_sets import analogy_questions, similarity_pairs
from datamodules.words import SPECIALS, WordVocabulary

EXAMPLES = ("sentences", "cooccurrences")
REQUIRED_KEYS = ("name", "dataset", "config", "text_field", "document_format", "splits",
                 "max_length", "batch_size", "intrinsic")


def corpus_sentences(task: Mapping | DictConfig) -> tuple[str, list[str]]:
    """(what identifies them, the sentences) of the corpus task's capped training split."""
    key, sentences = pretrain.vocabulary_corpus(checked_task(task))
    return key, list(sentences)


def checked_task(task: Mapping | DictConfig) -> dict:
    """The task config as a plain dict, checked for what this module needs."""
    config = task_config(task, REQUIRED_KEYS)
    intrinsic = config["intrinsic"]
    sets = {**(intrinsic.get("similarity") or {}), **(intrinsic.get("analogy") or {})}
    unknown = [split for split in config["splits"].get("eval") or [] if split not in sets]
    if unknown:
        raise PlmbenchError(f"task {config['name']}: eval splits {unknown} name no word set of "
                            f"intrinsic.similarity / intrinsic.analogy ({sorted(sets)}); fix "
                            "task.splits.eval")
    return config


class CooccurrenceEntries(torch.utils.data.Dataset):
    """X's non-zero entries; a DataLoader fetches a whole batch at once (``__getitems__``)."""

    def __init__(self, cooccurrences: Cooccurrences) -> None:
        self.x = cooccurrences

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices)
        return {"input_ids": self.x.rows[index], "context_ids": self.x.cols[index],
                "counts": self.x.values[index].float()}


def fetched_or_padded(batch: dict | list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """A batch fetched whole (co-occurrence entries) as it is; examples padded into one."""
    return batch if isinstance(batch, dict) else pad_collate(batch, pad_id)


class WordVectorsDataModule(PlmDataModule):
    def __init__(self, task: Mapping | DictConfig, vocab: WordVocabulary, examples: str,
                 window: int = 10, seed: int = 0) -> None:
        if examples not in EXAMPLES:
            raise PlmbenchError(f"word-vector examples {examples!r}: use one of {EXAMPLES}")
        super().__init__(checked_task(task), partial(fetched_or_padded, pad_id=vocab.pad), seed)
        self.vocab, self.examples, self.window = vocab, examples, window
        self.set_sizes: dict[str, int] = {}  # eval split -> items in the whole set
        self.set_kinds: dict[str, str] = {}  # eval split -> similarity | analogy
        self.corpus_key = ""

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        if self.task["splits"].get("train"):
            self.corpus_key, sentences = corpus_sentences(self.task)
            cut = self.task["max_length"]
            ids = [[i for i in row if i >= len(SPECIALS)][:cut]
                   for row in self.vocab.encode(sentences)]
            if self.examples == "sentences":
                self.train_data = [{"input_ids": row} for row in ids if row]
            else:
                self.train_data = CooccurrenceEntries(self._cooccurrences(ids))
        lookup = self.lookup()
        for split in self.eval_split_names:
            self.eval_data.append(self._word_set(split, lookup))

    def _cooccurrences(self, sentences: list[list[int]]) -> Cooccurrences:
        key = json.dumps([self.corpus_key, self.vocab.fingerprint, self.window, "symmetric",
                          "1/d"])

        def count(directory) -> None:
            x = count_cooccurrences(sentences, len(self.vocab), self.window)
            torch.save({"rows": x.rows, "cols": x.cols, "values": x.values},
                       directory / "cooccurrences.pt")

        saved = torch.load(cached_directory("cooccurrences", key, count) / "cooccurrences.pt")
        return Cooccurrences(saved["rows"], saved["cols"], saved["values"])

    def lookup(self) -> dict[str, int]:
        """Word -> id among the ``restrict_vocab`` most frequent words (upper-cased keys, the
        most frequent spelling kept, with ``case_insensitive``)."""
        intrinsic = self.task["intrinsic"]
        restrict = intrinsic.get("restrict_vocab") or len(self.vocab)
        fold = str.upper if intrinsic.get("case_insensitive", True) else str
        table: dict[str, int] = {}
        for index, word in enumerate(self.vocab.words[:restrict]):
            if index >= len(SPECIALS):
                table.setdefault(fold(word), index)
        return table

    def _word_set(self, split: str, lookup: dict[str, int]) -> list[dict]:
        intrinsic = self.task["intrinsic"]
        fold = str.upper if intrinsic.get("case_insensitive", True) else str
        similarity = intrinsic.get("similarity") or {}
        if split in similarity:
            items = similarity_pairs(split, similarity[split])
            kind, words, labels = "similarity", [item[:2] for item in items], [
                item[2] for item in items]
        else:
            items = analogy_questions(split, intrinsic["analogy"][split])
            kind, words, labels = "analogy", [item[1:] for item in items], None
        self.set_kinds[split], self.set_sizes[split] = kind, len(items)
        examples = []
        for index, row in enumerate(words):
            ids = [lookup.get(fold(word)) for word in row]
            if None not in ids:
                examples.append({"input_ids": ids} if labels is None
                                else {"input_ids": ids, "labels": labels[index]})
        if not examples:  # a score over no item is undefined (scipy and gensim say NaN)
            raise PlmbenchError(
                f"task {self.task['name']}: no item of word set {split} has all its words among "
                f"the {len(lookup)} words scored; train on more text (task.max_train_samples) "
                "or keep rarer words "
                "(model.min_count), or drop the set from task.splits.eval")
        return examples

    @property
    def fingerprints(self) -> dict[str, str]:
        key = json.dumps([self.corpus_key, self.vocab.fingerprint, self.examples, self.window])
        return {"train": hashlib.sha256(key.encode()).hexdigest()[:16]} if self.corpus_key else {}

