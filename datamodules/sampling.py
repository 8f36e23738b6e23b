"""A training order that a resumed run reproduces exactly.

Each epoch's order is a permutation drawn from a generator seeded by (run seed, epoch), so it
depends on nothing that ran before; a run resumed mid-epoch skips the examples its checkpoint
already trained on (``resume_at``) and sees the rest in the same order as an uninterrupted run.
Lightning calls ``set_epoch`` at the start of every epoch.
"""

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class EpochSampler(Sampler[int]):
    """Shuffled indices of ``size`` examples, reproducible per (seed, epoch), resumable."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed = size, seed
        self.epoch = 0
        self._resume: tuple[int, int] | None = None  # (epoch, examples already seen in it)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume_at(self, epoch: int, seen: int) -> None:
        """The next pass over ``epoch`` starts after its first ``seen`` examples."""
        self._resume = (epoch, seen)

    def order(self, epoch: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.size, generator=generator)

    def __iter__(self) -> Iterator[int]:
        skip = 0
        if self._resume is not None and self._resume[0] == self.epoch:
            skip = self._resume[1]
        self._resume = None
        yield from self.order(self.epoch)[skip:].tolist()

    def __len__(self) -> int:
        # the full epoch even when resuming: Lightning counts the skipped batches as done
        return self.size
