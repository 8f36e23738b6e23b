"""What the attention analysis reads (Clark et al. 2019, "What Does BERT Look At?"):

- §3, running text: pairs of consecutive sentences of a corpus's documents, each read as the
  model was pretrained, "[CLS] A [SEP] B [SEP]" in the architecture's own template, cut to
  ``max_length`` tokens (Clark et al.: 1,000 Wikipedia segments of at most 128 tokens);
- §4, dependency-parsed sentences (the mirror's ``universal_dependencies`` rows: words, each
  word's head and relation), read alone, each with the word every token belongs to
  (``word_ids``, -1 on special tokens; each word tokenized on its own, as the taggers read them);
  a sentence longer than ``max_length`` tokens is left out, since its last words have no
  attention.

Both are evaluation splits ("text", "parsed"); token frequencies over the text give each
sentence's rarest token (Voita et al. 2019, §4: rare-token heads).
"""

from collections.abc import Mapping, Sequence
from functools import partial

import torch

from datamodules.base import PlmDataModule
from datamodules.collate import pad_collate
from datamodules.tokenization import TextTokenizer

SPLITS = ("text", "parsed")


def consecutive_pairs(documents: Sequence[Sequence[str]], count: int) -> list[tuple[str, str]]:
    """Up to ``count`` (sentence, next sentence) pairs, document by document, none overlapping."""
    pairs = []
    for sentences in documents:
        for i in range(0, len(sentences) - 1, 2):
            if len(pairs) == count:
                return pairs
            pairs.append((sentences[i], sentences[i + 1]))
    return pairs


class AttentionTextDataModule(PlmDataModule):
    """The analysis's two splits, encoded: ``text`` (sentence pairs) and ``parsed`` (sentences
    with their dependency trees in ``trees``, one per kept sentence)."""

    def __init__(self, task: Mapping, tokenizer: TextTokenizer, pairs: list[tuple[str, str]],
                 parsed: Sequence[Mapping] | None, seed: int = 0) -> None:
        task = {**task, "splits": {"train": None, "eval": list(SPLITS[:1 + (parsed is not None)])}}
        pad_values = {"word_ids": -1, "index": 0}
        super().__init__(task, partial(pad_collate, pad_id=tokenizer.special.pad,
                                       pad_values=pad_values), seed)
        self.tokenizer, self.pairs, self.parsed = tokenizer, pairs, parsed
        self.trees: list[dict] = []  # per kept parsed sentence: words, heads, relations
        self.skipped = 0  # parsed sentences longer than max_length tokens

    def setup(self, stage: str | None = None) -> None:
        if self.eval_data:
            return
        encoder = self.tokenizer.truncating(self.task["max_length"], setting="task.max_length")
        text = [{"input_ids": e.ids, "token_type_ids": e.type_ids, "index": i}
                for i, e in enumerate(encoder.encode_batch(self.pairs))]
        self.eval_data = [text]
        if self.parsed is None:
            return
        # one token past max_length tells a sentence that does not fit
        words_encoder = self.tokenizer.words_encoder(self.task["max_length"] + 1)
        examples = []
        for row in self.parsed:
            words = list(row["tokens"])
            encoding = words_encoder.encode(words, is_pretokenized=True)
            if len(encoding.ids) > self.task["max_length"]:
                self.skipped += 1
                continue
            examples.append({"input_ids": encoding.ids, "index": len(self.trees),
                             "word_ids": [-1 if w is None else w for w in encoding.word_ids]})
            self.trees.append({"words": words, "heads": list(row["head"]),
                               "relations": list(row["deprel"])})
        self.eval_data.append(examples)

    def token_frequencies(self) -> torch.Tensor:
        """float [vocab_size]: how often each token occurs in the text split."""
        counts = torch.zeros(self.tokenizer.vocab_size)
        for example in self.eval_data[0]:
            counts += torch.bincount(torch.tensor(example["input_ids"]),
                                     minlength=self.tokenizer.vocab_size)[:len(counts)]
        return counts
