"""A character-aware token encoder (Kim et al. 2016, "Character-Aware Neural Language Models",
§2.1-2.2), as ELMo's released model builds it (Peters et al. 2018, §3.4; ``bilm-tf``).

Each word is its character ids [50] (``datamodules/characters.py``), embedded in d = 16
dimensions; convolutions of widths w = 1..7 with n_w filters each slide over the characters and
are max-pooled over the positions (one feature per filter: ELMo's 2048 = 32 + 32 + 64 + 128 + 256
+ 512 + 1024), then a ReLU. Highway layers (Srivastava et al. 2015; Kim §2.2):
    z = t * g(W_H y + b_H) + (1 - t) * y,   t = sigmoid(W_T y + b_T)
with g = ReLU and the gate's bias starting at -2 (mostly carried at first, as ``bilm-tf``); a
linear projection then gives the token representation (ELMo: 512). Id 0 pads whole word
positions: they are not encoded (their representation is zero).

Only what can change the result is computed: the batch's real words (gathered, encoded, scattered
back), and their characters cut to the longest spelling in the batch plus the widest filter. A
word's spelling ends where its trailing run of one id (the within-word padding character) starts;
every window inside that run computes the same value, and the cut keeps at least one such window
per word and filter, so each max over positions is the one over all ``max_characters``.
"""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn


class Highway(nn.Module):
    """One highway layer: transform and gate from one [d -> 2d] projection."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.projection = nn.Linear(dim, 2 * dim)
        with torch.no_grad():
            self.projection.bias[dim:].fill_(-2.0)  # the gate's bias: carry y at first

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        transform, gate = self.projection(y).chunk(2, dim=-1)
        t = torch.sigmoid(gate)
        return t * F.relu(transform) + (1 - t) * y


class CharCNN(nn.Module):
    """Character ids [B, T, C] -> token representations [B, T, output_dim]."""

    def __init__(self, num_characters: int, embedding_dim: int,
                 filters: Sequence[Sequence[int]], num_highway: int, output_dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_characters, embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(embedding_dim, count, kernel_size=width) for width, count in filters)
        width = sum(count for _, count in filters)
        self.highways = nn.ModuleList(Highway(width) for _ in range(num_highway))
        self.projection = nn.Linear(width, output_dim)
        self.max_width = max(w for w, _ in filters)

    def forward(self, char_ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``mask`` [B, T]: the words to encode (default: those with a non-zero id); zero
        elsewhere."""
        batch, length, chars = char_ids.shape
        if chars < self.max_width:
            raise ValueError(f"{chars} characters per word, fewer than the widest filter "
                             f"({self.max_width})")
        if mask is None:
            mask = (char_ids != 0).any(dim=-1)
        index = mask.reshape(-1).nonzero().squeeze(1)
        words = char_ids.reshape(batch * length, chars)[index]
        x = self.embedding(words[:, : self.spelled_width(words)].long()).transpose(1, 2)
        features = torch.cat([conv(x).amax(dim=-1) for conv in self.convolutions], dim=-1)
        y = F.relu(features)
        for highway in self.highways:
            y = highway(y)
        y = self.projection(y)
        out = y.new_zeros(batch * length, y.shape[-1]).index_copy(0, index, y)
        return out.reshape(batch, length, -1)

    def spelled_width(self, words: torch.Tensor) -> int:
        """Characters that decide every max-pooled feature of ``words`` [N, C]: the longest
        spelling (up to its trailing run of one id) plus the widest filter, at most C."""
        chars = words.shape[1]
        differs = (words != words[:, -1:]).flip(1)
        spelled = torch.where(differs.any(dim=1), chars - differs.int().argmax(dim=1), 0)
        longest = int(spelled.max()) if len(spelled) else 0
        return min(chars, longest + self.max_width)
