"""A training order that a resumed run reproduces exactly, optionally grouped by length.

Each epoch's order is a permutation drawn from a generator seeded by (run seed, epoch), so it
depends on nothing that ran before; a run resumed mid-epoch skips the examples its checkpoint
already trained on (``resume_at``) and sees the rest in the same order as an uninterrupted run.
Lightning calls ``set_epoch`` at the start of every epoch.

A length schedule (``PhasedSampler``; BERT, Devlin et al. 2019, A.2: 90% of the steps at 128
tokens, the rest at 512) trains on one set of examples after another, each for its share of
the run's steps, reshuffled on every pass over it; the run is then one epoch of exactly
max_steps batches.

Length grouping (``LengthGroupedSampler``): dynamic padding pads a batch to its longest example,
so batches of similar lengths waste little. As in transformers' ``group_by_length``, the epoch's
permutation is cut into mega-batches of ``mega_batches`` batches, each sorted by length, and the
batches are then shuffled, so a batch holds similar lengths while the order of batches, and which
examples meet, stay random per (seed, epoch).

Each of these is one process's order, in global batches (``task.batch_size``). Under DDP
``GlobalBatches`` deals every global batch to the ranks, each taking its contiguous share, so the
optimizer steps of N processes see the examples of one process's steps
(``datamodules/batching.py``).
"""

import math
from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import DistributedSampler, Sampler


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


class LengthGroupedSampler(EpochSampler):
    """Indices in batches of similar lengths: the epoch's permutation cut into mega-batches of
    ``mega_batches`` x ``batch_size`` examples, each sorted by length (longest first), the
    batches shuffled (the one short batch stays last, so every batch the DataLoader cuts is one
    of these). Every example once per epoch; reproducible per (seed, epoch); resumable.

    ``batch_size`` is the global batch: under DDP, ``GlobalBatches`` deals each grouped batch to
    the ranks, so an optimizer step sees the batch one process would (and every rank's share of it
    is as grouped).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int,
                 mega_batches: int = 50) -> None:
        super().__init__(len(lengths), seed)
        self.lengths = torch.as_tensor(lengths)
        self.batch_size, self.mega_batches = batch_size, mega_batches

    def batches(self, epoch: int) -> list[torch.Tensor]:
        """The batches of ``epoch``, in order."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        permutation = torch.randperm(self.size, generator=generator)
        mega = self.mega_batches * self.batch_size
        grouped = torch.cat([
            chunk[self.lengths[chunk].argsort(descending=True, stable=True)]
            for chunk in permutation.split(mega)
        ])
        batches = list(grouped.split(self.batch_size))
        last = [batches.pop()] if len(batches[-1]) < self.batch_size else []
        return [batches[i] for i in torch.randperm(len(batches), generator=generator)] + last

    def order(self, epoch: int) -> torch.Tensor:
        return torch.cat(self.batches(epoch))


class PhasedSampler(EpochSampler):
    """Indices into the concatenated examples of several phases (of ``sizes`` examples each):
    phase p's ``shares[p]`` of ``steps`` batches of ``batch_size``, drawn from its own examples
    (permuted anew for every pass over them), the phases in order; the last phase takes the
    batches the rounding of the others leaves. One epoch is the whole run."""

    def __init__(self, sizes: Sequence[int], shares: Sequence[float], batch_size: int,
                 steps: int, seed: int) -> None:
        batches = [round(share * steps) for share in shares[:-1]]
        self.batches = [*batches, steps - sum(batches)]
        if min(self.batches) < 0 or min(sizes) < 1:
            raise ValueError(f"phases of {list(sizes)} examples cannot fill {self.batches} batches")
        super().__init__(steps * batch_size, seed)
        self.sizes, self.batch_size = list(sizes), batch_size

    def order(self, epoch: int) -> torch.Tensor:
        parts, offset = [], 0
        for phase, (size, batches) in enumerate(zip(self.sizes, self.batches, strict=True)):
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 101 + phase)
            need = batches * self.batch_size
            passes = [torch.randperm(size, generator=generator)
                      for _ in range(math.ceil(need / size))]
            parts.append(torch.cat(passes or [torch.empty(0, dtype=torch.long)])[:need] + offset)
            offset += size
        return torch.cat(parts)


class GlobalBatches(DistributedSampler):
    """One process's share of a one-process training order (``sampler``'s, per epoch), so that
    the optimizer steps of N processes see the batches one process would: the order is cut into
    global batches of ``num_replicas`` x ``share`` examples (``share``: a process's examples per
    optimizer step, its batch times the batches it accumulates), and rank r takes the r-th
    ``share`` of each. The last global batch, when short, is padded with the epoch's first
    examples to a multiple of the ranks (as ``DistributedSampler`` pads) so that every rank steps
    as often as the others. A ``DistributedSampler`` so that Lightning uses it as it is (its own
    wrapper would reshuffle the order across ranks). Resumable, as ``EpochSampler``."""

    def __init__(self, sampler: EpochSampler, share: int, num_replicas: int, rank: int) -> None:
        self.sampler, self.share = sampler, share
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0
        self._resume: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.sampler.set_epoch(epoch)

    def resume_at(self, epoch: int, seen: int) -> None:
        """The next pass over ``epoch`` starts after this rank's first ``seen`` examples."""
        self._resume = (epoch, seen)

    def indices(self, epoch: int) -> list[int]:
        """This rank's examples of ``epoch``, in order."""
        order = self.sampler.order(epoch).tolist()
        width = self.share * self.num_replicas
        full = len(order) // width * width
        last = order[full:]
        if last:  # a short last global batch: equal shares, padded from the start
            each = -(-len(last) // self.num_replicas)
            last += (order * each)[: each * self.num_replicas - len(last)]
        mine = [order[start + self.rank * self.share: start + (self.rank + 1) * self.share]
                for start in range(0, full, width)]
        if last:
            each = len(last) // self.num_replicas
            mine.append(last[self.rank * each: (self.rank + 1) * each])
        return [index for chunk in mine for index in chunk]

    def __iter__(self) -> Iterator[int]:
        skip = 0
        if self._resume is not None and self._resume[0] == self.epoch:
            skip = self._resume[1]
        self._resume = None
        yield from self.indices(self.epoch)[skip:]

    def __len__(self) -> int:
        return len(self.indices(self.epoch))
