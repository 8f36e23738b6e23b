"""Dynamic padding: batch examples of different lengths to the longest one in the batch.

One collate for every task family: each sequence-valued key is padded to the batch's longest
value of that key with its own fill (``PAD_VALUES``: token ids with the tokenizer's pad id,
labels with -100 so the loss ignores them, masks with 0); scalar keys are stacked.

What a training step would otherwise ask the device is decided here, on the host, so the step
never waits for it (no host-device synchronisation):

- padding: an ``attention_mask`` (1 = token, 0 = pad) is derived from ``input_ids`` only when the
  batch has padding; a batch of equal lengths has none, and the nets then attend everywhere with
  no mask (SDPA's flash kernel on GPU) instead of checking ``attention_mask.all()`` per forward;
- labelled positions: where a sequence of ``labels`` has labels, as flat indices into the
  batch's [B x T] tokens (``label_positions``), so a loss gathers them with ``index_select``
  (boolean indexing would ask the device how many there are).
"""

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

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
    "sequence_ids": 0,  # packed rows (datamodules/packing.py): padding belongs to no example
    "position_ids": 0,
}


def _is_sequence(value) -> bool:
    return isinstance(value, Sequence | torch.Tensor) and not isinstance(value, str) and (
        not isinstance(value, torch.Tensor) or value.ndim > 0
    )


def pad_collate(
    examples: Sequence[Mapping], pad_id: int, pad_values: Mapping[str, int] | None = None
) -> dict[str, torch.Tensor]:
    """Pad every sequence key to its longest value in the batch, stack the scalar keys; add
    ``attention_mask`` where the batch has padding and ``label_positions`` where ``labels`` is a
    sequence.

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
        if bool((lengths < longest).any()):  # host tensors: no device is asked
            batch["attention_mask"] = (torch.arange(longest)[None, :] < lengths[:, None]).long()
    if batch.get("labels") is not None and batch["labels"].ndim == 2:
        add_label_positions(batch)
    return batch


def add_label_positions(batch: dict[str, Tensor]) -> dict[str, Tensor]:
    """Set ``batch["label_positions"]``: the flat indices (row-major, into [B x T]) of the
    tokens whose ``labels`` are not IGNORE_INDEX. Call it where labels are made (the collate)."""
    batch["label_positions"] = (batch["labels"].flatten() != IGNORE_INDEX).nonzero().squeeze(1)
    return batch


def label_positions(batch: Mapping[str, Tensor]) -> Tensor:
    """The batch's ``label_positions``, or, for a batch built elsewhere, computed here (which,
    on an accelerator, waits for the device)."""
    positions = batch.get("label_positions")
    if positions is None:
        positions = (batch["labels"].flatten() != IGNORE_INDEX).nonzero().squeeze(1)
    return positions


def at_positions(x: Tensor, positions: Tensor) -> Tensor:
    """Rows of ``x`` [B, T, ...] at flat ``positions`` into [B x T] -> [N, ...]."""
    return x.flatten(0, 1).index_select(0, positions)


def token_mask(batch: Mapping[str, Tensor]) -> Tensor:
    """bool [B, T], True at the real (non-pad) tokens: from the batch's ``attention_mask``, all
    True where the collate left it out (no padding)."""
    mask = batch.get("attention_mask")
    if mask is None:
        return torch.ones_like(batch["input_ids"], dtype=torch.bool)
    return mask.bool()


def encoder_inputs(batch: Mapping[str, Tensor]) -> dict[str, Tensor | None]:
    """What an encoder reads from a batch: ``input_ids``, ``token_type_ids`` and
    ``attention_mask``: the [B, T] padding mask, None for a batch without padding, or, for
    packed rows (``sequence_ids``, ``datamodules/packing.py``), the block-diagonal [B, T, T] mask
    (True where query and key belong to the same example; padding attends to padding, so no
    softmax row is empty) with the examples' own ``position_ids``."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch.get("attention_mask"),
              "token_type_ids": batch.get("token_type_ids")}
    if "sequence_ids" in batch:
        ids = batch["sequence_ids"]
        inputs["attention_mask"] = ids[:, :, None] == ids[:, None, :]
        inputs["position_ids"] = batch["position_ids"]
    return inputs
