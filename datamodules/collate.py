"""Dynamic padding: batch examples of different lengths to the longest one in the batch."""

from collections.abc import Sequence

import torch

#: keys padded as token sequences; anything else is stacked as a per-example value.
SEQUENCE_KEYS = ("input_ids", "token_type_ids")


def pad_collate(examples: Sequence[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad ``input_ids`` (with ``pad_id``) and ``token_type_ids`` (with 0) to the batch's longest
    sequence, add ``attention_mask`` (1 = token, 0 = pad), and stack every other field as is."""
    longest = max(len(ex["input_ids"]) for ex in examples)
    batch: dict[str, torch.Tensor] = {}
    for key in SEQUENCE_KEYS:
        if key not in examples[0]:
            continue
        fill = pad_id if key == "input_ids" else 0
        out = torch.full((len(examples), longest), fill, dtype=torch.long)
        for row, ex in enumerate(examples):
            out[row, : len(ex[key])] = torch.as_tensor(ex[key], dtype=torch.long)
        batch[key] = out
    lengths = torch.tensor([len(ex["input_ids"]) for ex in examples])
    batch["attention_mask"] = (torch.arange(longest)[None, :] < lengths[:, None]).long()
    for key in examples[0].keys() - set(SEQUENCE_KEYS):
        batch[key] = torch.as_tensor([ex[key] for ex in examples])
    return batch
