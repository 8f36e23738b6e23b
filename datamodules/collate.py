"""Dynamic padding: batch examples of different lengths to the longest one in the batch.

One collate for every task family: each sequence-valued key is padded to the batch's longest
value of that key with its own fill (``PAD_VALUES``: token ids with the tokenizer's pad id,
labels with -100 so the loss ignores them, masks with 0); scalar keys are stacked. An
``attention_mask`` (1 = token, 0 = pad) is derived from ``input_ids`` when the examples have none.
"""

from collections.abc import Mapping, Sequence

import torch

#: label value the losses ignore (``F.cross_entropy``'s default ``ignore_index``)
IGNORE_INDEX = -100
#: the tokenizer's pad id, resolved per call
PAD = "pad"
#: fill value of every sequence key the families produce
PAD_VALUES: dict[str, int | str] = {
    "input_ids": PAD,
    "decoder_input_ids": PAD,
    "attention_mask": 0,
    "decoder_attention_mask": 0,
    "token_type_ids": 0,
    "special_tokens_mask": 1,
    "labels": IGNORE_INDEX,
}


def _is_sequence(value) -> bool:
    return isinstance(value, Sequence | torch.Tensor) and not isinstance(value, str) and (
        not isinstance(value, torch.Tensor) or value.ndim > 0
    )


def pad_collate(
    examples: Sequence[Mapping], pad_id: int, pad_values: Mapping[str, int] | None = None
) -> dict[str, torch.Tensor]:
    """Pad every sequence key to its longest value in the batch, stack the scalar keys.

    ``pad_values`` adds or overrides fills for keys not in ``PAD_VALUES``; a sequence key with no
    fill is an error, so a new key never gets padded with a value its loss would read.
    """
    fills = {**PAD_VALUES, **(pad_values or {})}
    batch: dict[str, torch.Tensor] = {}
    for key in examples[0]:
        values = [ex[key] for ex in examples]
        if not _is_sequence(values[0]):
            batch[key] = torch.as_tensor(values)
            continue
        if key not in fills:
            raise ValueError(f"no padding value for sequence key {key!r}; pass pad_values")
        fill = pad_id if fills[key] == PAD else fills[key]
        longest = max(len(v) for v in values)
        out = torch.full((len(values), longest), fill, dtype=torch.long)
        for row, value in enumerate(values):
            out[row, : len(value)] = torch.as_tensor(value, dtype=torch.long)
        batch[key] = out
    if "attention_mask" not in batch and "input_ids" in batch:
        lengths = torch.tensor([len(ex["input_ids"]) for ex in examples])
        longest = batch["input_ids"].shape[1]
        batch["attention_mask"] = (torch.arange(longest)[None, :] < lengths[:, None]).long()
    return batch
