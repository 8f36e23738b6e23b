"""Frozen features computed once per sentence (``features.py``'s ``LayerFeatures``).

A frozen encoder (ELMo's biLM under the GLUE baselines' BiLSTMs, Wang et al. 2019 §5; BERT's
feature-based rows, Devlin et al. 2019 §5.3) maps a sentence to the same states in every epoch,
every evaluation and every run of a task, yet recomputing them was 96% of a BiLSTM+ELMo step.
``FeatureCache`` keeps each row's states (the chosen layers, at its real positions) keyed by a
digest of the row's inputs at those positions, and computes the encoder only on the rows of a
batch it has not seen (gathered into a batch of their own, cut to their longest length: a row's
states do not depend on the other rows or on padding, which comes last).

The cache holds while the encoder's weights stay what they were: any change to them (an update
in place, a checkpoint loaded into them, a move to another device) empties it. It keeps at most
``max_bytes`` of states; rows past that are computed every time, as without a cache.
"""

import hashlib
from collections.abc import Callable, Mapping

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence


class FeatureCache:
    """Row inputs -> that row's states [positions, layers, width]."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.rows: dict[bytes, torch.Tensor] = {}
        self.bytes = 0
        self.weights: tuple | None = None  # the encoder's weights the states were computed with

    def clear(self) -> None:
        self.rows.clear()
        self.bytes = 0

    @staticmethod
    def key(parts) -> bytes:
        """A row's key: a 128-bit BLAKE2 digest of its inputs (ELMo's character ids are 400
        bytes a word: kept whole, the keys alone would outweigh many states)."""
        digest = hashlib.blake2b(digest_size=16)
        for part in parts:
            digest.update(part.tobytes())
        return digest.digest()

    def _check_weights(self, encoder: nn.Module) -> None:
        weights = tuple((p.device, p.data_ptr(), p._version) for p in encoder.parameters())
        if weights != self.weights:
            self.clear()
            self.weights = weights

    def states(self, encoder: nn.Module, inputs: Mapping[str, torch.Tensor], mask: torch.Tensor,
               compute: Callable[[Mapping[str, torch.Tensor]], torch.Tensor]) -> torch.Tensor:
        """``compute(inputs)`` [layers, B, T, width] of the rows of ``inputs`` (each [B, T, ...],
        ``mask`` [B, T] True at a row's first positions), from the cache where it has them."""
        self._check_weights(encoder)
        lengths = mask.sum(dim=1).tolist()
        host = {name: value.cpu().numpy() for name, value in inputs.items()}
        keys = [self.key(value[row, :n] for value in host.values())
                for row, n in enumerate(lengths)]
        missing = list({key: row for row, key in reversed(list(enumerate(keys)))
                         if key not in self.rows}.values())  # a sentence's first row
        found = {}
        if missing:
            index = torch.tensor(missing, device=mask.device)
            width = max(lengths[row] for row in missing)
            computed = compute({name: value[index, :width] for name, value in inputs.items()})
            for position, row in enumerate(missing):
                states = computed[:, position, : lengths[row]].transpose(0, 1).clone()
                found[keys[row]] = states
                if self.bytes + states.nbytes <= self.max_bytes:
                    self.rows[keys[row]] = states
                    self.bytes += states.nbytes
        rows = [self.rows.get(key, found.get(key)) for key in keys]
        padded = pad_sequence(rows, batch_first=True)  # [B, max length, layers, width]
        padded = nn.functional.pad(padded, (0, 0, 0, 0, 0, mask.shape[1] - padded.shape[1]))
        return padded.permute(2, 0, 1, 3)
