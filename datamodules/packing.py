"""Packed pretraining rows: several examples side by side in one row, so batches carry (almost)
no padding.

Krell et al. 2021, "Efficient Sequence Packing without Cross-contamination: Accelerating Large
Language Models without Impacting Performance": BERT's pretraining examples waste up to half of
every batch on padding (§2; here 13-20% at 128 tokens on Wikipedia). §3 packs examples into rows
with a bin-packing heuristic; §4 keeps the packed examples from seeing each other: a
block-diagonal attention mask (each token attends to the tokens of its own example), position ids
that restart at every example, and per-example losses for the sentence-level heads. Here the
packing is best-fit decreasing (Johnson 1973): examples from the longest down, each into the row
whose free space it fills most tightly, a new row when none has room.

A packed row holds ``input_ids`` and ``token_type_ids`` end to end, ``sequence_ids`` (1, 2, ...
for its examples' tokens; 0 at padding) and ``position_ids`` (0 at each example's first token);
an example's scalar keys (NSP's label) become per-row lists in example order. The collate
(``collate_packed``) turns those lists into one flat tensor per key and adds
``sequence_starts``, the flat [B x T] index of every example's first token; ``encoder_inputs``
(``collate.py``) turns ``sequence_ids`` into the block-diagonal mask, on the device.
"""

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch import Tensor

from datamodules.collate import IGNORE_INDEX, pad_collate
from datamodules.errors import PlmbenchError


@dataclass(frozen=True)
class PackingConfig:
    """``task.packing``: whether pretraining rows are packed, and whether attention may cross
    documents (RoBERTa's FULL-SENTENCES, Liu et al. 2019 §4.2) or stays in each of them."""

    enabled: bool = False
    cross_documents: bool = True

    @classmethod
    def of(cls, task: Mapping) -> "PackingConfig":
        try:
            return cls(**(task.get("packing") or {}))
        except TypeError:
            raise PlmbenchError(f"task.packing {dict(task['packing'])}: use enabled and "
                                "cross_documents") from None


def _best_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Example indices per row: longest first, each into the fullest row it still fits."""
    rows: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (free space, row), sorted
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        length = lengths[index]
        at = bisect.bisect_left(free, (length, -1))
        if at < len(free):
            space, row = free.pop(at)
        else:
            space, row = capacity, len(rows)
            rows.append([])
        rows[row].append(index)
        if space - length > 0:
            bisect.insort(free, (space - length, row))
    return rows


def pack_examples(examples: Sequence[Mapping], max_length: int) -> list[dict]:
    """Rows of at most ``max_length`` tokens from ``examples`` (each at most that long), packed
    by best-fit decreasing; the examples unchanged when no two of them fit in one row."""
    lengths = [len(example["input_ids"]) for example in examples]
    if lengths and max(lengths) > max_length:
        raise ValueError(f"an example of {max(lengths)} tokens exceeds the rows' {max_length}")
    rows = _best_fit_decreasing(lengths, max_length)
    if all(len(row) == 1 for row in rows):
        return [dict(example) for example in examples]
    packed = []
    for row in rows:
        out: dict[str, list] = {}
        for k, index in enumerate(row, start=1):
            example = examples[index]
            for key, value in example.items():
                if isinstance(value, list):  # per token
                    out.setdefault(key, []).extend(value)
                else:  # per example
                    out.setdefault(key, []).append(value)
            out.setdefault("sequence_ids", []).extend([k] * lengths[index])
            out.setdefault("position_ids", []).extend(range(lengths[index]))
        packed.append(out)
    return packed


def efficiency(examples: Sequence[Mapping], max_length: int) -> float:
    """Share of the rows' ``max_length`` slots that hold tokens."""
    return sum(len(e["input_ids"]) for e in examples) / (max_length * max(1, len(examples)))


def collate_packed(examples: Sequence[Mapping], pad_id: int,
                   example_keys: Sequence[str] = ()) -> dict[str, Tensor]:
    """``pad_collate`` for rows that may be packed: each of ``example_keys`` (per-example labels)
    becomes one flat tensor in row-major example order, beside ``sequence_starts``, the flat
    index of each example's first token. Unpacked rows are ``pad_collate``'s."""
    if "sequence_ids" not in examples[0]:
        return pad_collate(examples, pad_id)
    keys = [key for key in example_keys if key in examples[0]]
    batch = pad_collate(examples, pad_id, {key: IGNORE_INDEX for key in keys})
    for key in keys:
        values = batch[key].flatten()
        batch[key] = values[values != IGNORE_INDEX]
    first = (batch["position_ids"] == 0) & (batch["sequence_ids"] > 0)
    batch["sequence_starts"] = first.flatten().nonzero().squeeze(1)
    return batch
