"""Classification of two marked spans in their text: SuperGLUE's WiC and WSC (Wang et al. 2019,
§3.1 and §5), as its BERT baseline reads them.

- ``wic`` (``aps/super_glue`` config ``wic``): the sentence pair "[CLS] sentence1 [SEP] sentence2
  [SEP]", span 1 the target word in sentence 1 (characters ``start1``..``end1``), span 2 the word
  in sentence 2; the label is whether the word has the same sense in both.
- ``wsc`` (config ``wsc.fixed``): the one ``text``, span 1 the noun phrase ``span1_text`` starting
  at word ``span1_index`` (words split on spaces), span 2 the pronoun ``span2_text`` at word
  ``span2_index``; the label is whether the pronoun refers to the noun phrase.

Each example carries ``spans``: the (start, end) token indices of both spans, ends exclusive, found
through the tokenizer's character offsets; a span cut off by truncation to ``task.max_length``
falls back to the first token.
"""

from collections.abc import Mapping
from functools import partial

import datasets
from tokenizers import Encoding

from datamodules.base import check_option
from datamodules.collate import pad_collate
from datamodules.errors import PlmbenchError
from datamodules.glue import GlueDataModule

#: format -> the hub columns it reads besides the text fields and label
COLUMNS = {"wic": ("start1", "end1", "start2", "end2"),
           "wsc": ("span1_index", "span1_text", "span2_index", "span2_text")}


def word_span(text: str, index: int, words: str) -> tuple[int, int]:
    """Characters of ``words`` starting at word ``index`` of ``text`` (words split on spaces)."""
    start = sum(len(word) + 1 for word in text.split(" ")[:index])
    return start, start + len(words)


def character_spans(task: Mapping, rows: Mapping[str, list]) -> list[list[tuple[int, int, int]]]:
    """Per row, both spans as (sequence, first character, end character)."""
    if task["format"] == "wic":
        return [[(0, s1, e1), (1, s2, e2)] for s1, e1, s2, e2 in
                zip(rows["start1"], rows["end1"], rows["start2"], rows["end2"], strict=True)]
    return [[(0, *word_span(text, i1, t1)), (0, *word_span(text, i2, t2))]
            for text, i1, t1, i2, t2 in zip(rows["text"], rows["span1_index"],
                                            rows["span1_text"], rows["span2_index"],
                                            rows["span2_text"], strict=True)]


def token_span(encoding: Encoding, sequence: int, start: int, end: int) -> tuple[int, int]:
    """The tokens covering characters start..end-1 of ``sequence``; (0, 1) when truncated away."""
    tokens = [encoding.char_to_token(c, sequence) for c in range(start, end)]
    tokens = [t for t in tokens if t is not None]
    return (min(tokens), max(tokens) + 1) if tokens else (0, 1)


class SpanPairDataModule(GlueDataModule):
    """GLUE-style tokenized splits whose examples also carry their two token spans."""

    def __init__(self, task, tokenizer, seed: int = 0) -> None:
        super().__init__(task, tokenizer, seed)
        self.collate_fn = partial(pad_collate, pad_id=tokenizer.special.pad,
                                  pad_values={"spans": 0})

    @classmethod
    def checked(cls, task) -> dict:
        config = super().checked(task)
        check_option(config, "format", config.get("format"), sorted(COLUMNS))
        return config

    @classmethod
    def rows(cls, task: dict, split: str, cap: int | None) -> datasets.Dataset:
        raw = super().rows(task, split, cap)
        missing = [c for c in COLUMNS[task["format"]] if c not in raw.column_names]
        if missing:
            raise PlmbenchError(f"task {task['name']}: split {split} lacks the span columns "
                                f"{missing}; use the hub's {task['format']} schema")
        return raw

    @property
    def features(self) -> datasets.Features:
        return datasets.Features({**super().features,
                                  "spans": datasets.Sequence(datasets.Value("int32"))})

    def extra_columns(self, batch: dict[str, list], encodings: list[Encoding]
                      ) -> dict[str, list]:
        return {"spans": [
            [t for sequence, start, end in spans
             for t in token_span(encoding, sequence, start, end)]
            for encoding, spans in zip(encodings, character_spans(self.task, batch), strict=True)
        ]}
