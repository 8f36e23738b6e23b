"""Word-level batches for the BiLSTM baselines (``lit_models/families/bilstm.py``): GLUE-style
sentence (pair) classification and BIO tagging over words.

Every input layer of a BiLSTM reads the same words (``datamodules/words.py``'s split of each text
field, as written; a tagging task's tokens as they are), so its features line up word by word:

- static vectors read ``vocab_ids`` (a ``WordVocabulary``: the training text's most frequent words,
  lowercased where it is; <unk> elsewhere);
- ELMo reads ``char_ids`` [B, T + 2, 50], the sentence between <S> and </S>
  (``datamodules/characters.py``), which its input layer strips again after the biLM;
- a frozen Transformer reads its own sub-words of each word, tokenized on its own as the tagger's
  (``datamodules/tagging.py encode_words``: ``subword_ids``,
  ``subword_mask``, special tokens included) and gives each word the state of its first sub-word
  (``first_subword`` [B, T], as BERT's feature-based NER, Devlin et al. 2019 §5.3); a word whose
  first sub-word falls past the encoder's ``max_length`` is dropped from the sentence.

Each side of a pair has its own keys (``_b`` for the second sentence) and ``word_mask``; sentences
keep at most ``max_words`` words. ``input_ids`` / ``attention_mask`` place every side's words
side by side: what the throughput counts, read by no model.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from omegaconf import DictConfig

from datamodules import glue, tagging
from datamodules.base import PlmDataModule
from datamodules.characters import char_ids
from datamodules.collate import IGNORE_INDEX
from datamodules.tagging import encode_words
from datamodules.tokenization import TextTokenizer
from datamodules.words import BOS, EOS, WordVocabulary, split_words

SIDES = ("", "_b")


@dataclass
class WordInputs:
    """What a BiLSTM's input layers read of each word (the run's "tokenizer")."""

    vocab: WordVocabulary | None = None  # static vectors: word ids
    chars: bool = False  # ELMo: character ids
    subwords: TextTokenizer | None = None  # a frozen encoder: its tokenizer ...
    subword_length: int = 512  # ... and the sub-words it reads at most (its positions)
    max_words: int = 128  # words per sentence at most
    _encoder: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.subwords is not None:
            self._encoder = self.subwords.words_encoder(self.subword_length)

    @property
    def fingerprint(self) -> str:
        key = [self.vocab and self.vocab.fingerprint, self.chars,
               self.subwords and self.subwords.fingerprint, self.subword_length, self.max_words]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]

    def side(self, sentences: Sequence[Sequence[str]], suffix: str) -> dict[str, torch.Tensor]:
        """The keys of one side of a batch of word lists."""
        words = [list(s[: self.max_words]) for s in sentences]
        width = max(1, max(len(w) for w in words))
        lengths = torch.tensor([len(w) for w in words])
        out = {"word_mask": torch.arange(width)[None] < lengths[:, None]}
        if self.vocab is not None:
            out["vocab_ids"] = _padded([self.vocab.ids(w) for w in words], width, self.vocab.pad)
        if self.chars:
            spelled = np.zeros((len(words), width + 2, char_ids([]).shape[1]), dtype=np.int64)
            for row, w in enumerate(words):
                spelled[row, : len(w) + 2] = char_ids([BOS, *w, EOS])
            out["char_ids"] = torch.from_numpy(spelled)
        if self.subwords is not None:
            out |= self._subwords(words, width, out["word_mask"])
        return {key + suffix: value for key, value in out.items()}

    def _subwords(self, words: list[list[str]], width: int,
                  mask: torch.Tensor) -> dict[str, torch.Tensor]:
        encodings = encode_words(self._encoder, words)  # each word tokenized on its own
        ids = [e["input_ids"] for e in encodings]
        length = max(len(i) for i in ids)
        first = torch.zeros(len(words), width, dtype=torch.long)
        for row, encoding in enumerate(encodings):
            starts = np.asarray(encoding["word_ids"])
            positions = np.flatnonzero(starts >= 0)
            first[row, starts[positions]] = torch.from_numpy(positions)
            mask[row, len(positions):] = False  # words cut off by the encoder's max_length
        return {"subword_ids": _padded(ids, length, self.subwords.special.pad),
                "subword_mask": _padded([[1] * len(i) for i in ids], length, 0),
                "first_subword": first}


def _padded(rows: Sequence[Sequence[int]], width: int, fill: int) -> torch.Tensor:
    out = torch.full((len(rows), width), fill, dtype=torch.long)
    for index, row in enumerate(rows):
        out[index, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


def counted(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Add ``input_ids`` / ``attention_mask``: every side's word positions side by side."""
    masks = [batch[f"word_mask{s}"] for s in SIDES if f"word_mask{s}" in batch]
    batch["attention_mask"] = torch.cat(masks, dim=1).long()
    batch["input_ids"] = torch.zeros_like(batch["attention_mask"])
    return batch


class SentenceCollate:
    """Classification examples ({"words": [...], "words_b": [...]?, "labels": y, "index": row?})
    -> a batch."""

    def __init__(self, inputs: WordInputs) -> None:
        self.inputs = inputs

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        batch = {}
        for suffix in SIDES:
            if f"words{suffix}" in examples[0]:
                batch |= self.inputs.side([e[f"words{suffix}"] for e in examples], suffix)
        batch["labels"] = torch.as_tensor([e["labels"] for e in examples])
        if "index" in examples[0]:
            batch["index"] = torch.as_tensor([e["index"] for e in examples])
        return counted(batch)


class TagCollate(SentenceCollate):
    """Tagging examples ({"words": [...], "labels": [tag ids]}) -> a batch whose ``labels`` and
    ``word_ids`` (each word's index; -1 at padding, as the sub-word tagger's first sub-tokens
    carry them) line up with the words."""

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        batch = self.inputs.side([e["words"] for e in examples], "")
        mask = batch["word_mask"]
        tags = [e["labels"][: self.inputs.max_words] for e in examples]
        batch["labels"] = _padded(tags, mask.shape[1], IGNORE_INDEX).masked_fill(~mask,
                                                                                 IGNORE_INDEX)
        positions = torch.arange(mask.shape[1]).expand_as(mask)
        batch["word_ids"] = positions.masked_fill(~mask, -1)
        return counted(batch)


def sentence_words(task: Mapping, split: str, cap: int | None) -> tuple[list, list[list[str]]]:
    """(labels, per text field the words of each example) of a GLUE-style task's split, its
    first ``cap`` examples when capped."""
    rows = glue.GlueDataModule.rows(task, split, cap)
    fields = [split_words(rows[field], lowercase=False) for field in task["text_fields"]]
    return glue.GlueDataModule.label_column(task, rows), fields


class WordClassificationDataModule(PlmDataModule):
    """A GLUE-style task (``datamodules/glue.py``'s YAML keys) as words per text field."""

    def __init__(self, task: Mapping | DictConfig, inputs: WordInputs, seed: int = 0) -> None:
        super().__init__(glue.GlueDataModule.checked(task), SentenceCollate(inputs), seed)
        self.inputs = inputs

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        if self.task["splits"].get("train"):
            self.train_data = self._examples(self.task["splits"]["train"],
                                             self.task.get("max_train_samples"))
        self.eval_data = [self._examples(split, self.task.get("max_eval_samples"))
                          for split in self.eval_split_names]
        # task.predict_splits (GLUE's unlabelled test sets), predicted whole
        self.predict_data = [self._examples(split, None) for split in self.predict_split_names]

    def _examples(self, split: str, cap: int | None) -> list[dict]:
        labels, fields = sentence_words(self.task, split, cap)
        # index: each example's row in the split, what GLUE's predictions files are keyed by
        return [{**{f"words{suffix}": words for suffix, words in zip(SIDES, row, strict=False)},
                 "labels": label, "length": sum(len(words) for words in row), "index": index}
                for index, (*row, label) in enumerate(zip(*fields, labels, strict=True))]


class WordTaggingDataModule(PlmDataModule):
    """A BIO tagging task (``datamodules/tagging.py``'s YAML keys) over its own tokens;
    ``eval_sentences`` keeps each eval split's words and gold tags, as ``TaggingDataModule``."""

    def __init__(self, task: Mapping | DictConfig, inputs: WordInputs, seed: int = 0) -> None:
        super().__init__(tagging._task_dict(task), TagCollate(inputs), seed)
        self.inputs = inputs
        self.eval_sentences = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        task = self.task
        if task["splits"].get("train"):
            raw = tagging.load_sentences(task, task["splits"]["train"],
                                         task.get("max_train_samples"))
            # a sentence without words has no label to learn from
            self.train_data = [e for e in self._examples(raw) if e["length"]]
        for split in self.eval_split_names:
            raw = tagging.load_sentences(task, split, task.get("max_eval_samples"))
            self.eval_sentences.append(raw)
            self.eval_data.append(self._examples(raw))

    def _examples(self, raw) -> list[dict]:
        words, tags = raw[self.task["tokens_field"]], raw[self.task["tags_field"]]
        return [{"words": w, "labels": t, "length": len(w)}
                for w, t in zip(words, tags, strict=True)]
