"""Every evaluation example once, on any number of processes: the order in which an evaluation's
examples are dealt to DDP ranks.

torch's ``DistributedSampler`` (which Lightning puts under every loader of a distributed run)
pads an evaluation set with repeats of its first examples until it divides by the number of
processes, and every repeat is scored again: MRPC's 101 dev pairs are 102 on two processes, RTE's
277 are 280 on eight. ``EvaluationSampler`` never pads. It deals the batches one process would cut
(``batch_size`` consecutive examples, the last one short) to the ranks in turn, rank r taking
batches r, r + N, r + 2N ..., so every batch, and so every example's output, is the one a single
process computes (a batch's padding and kernels depend on what it holds). A split of fewer batches
than ranks is cut into N contiguous pieces, one batch per rank, so every rank has at least one
example (its outputs then equal one process's up to float rounding). Either way the ranks' batches
taken in turn (batch k from rank k mod N, ``PlmModule.gather_batches``) are the examples in order.
Ranks may hold different numbers of batches: nothing in an evaluation step may wait for the other
ranks (a per-step all-reduce); what they computed meets at the evaluation's end (the metrics'
states, ``PlmModule.gather_batches``, ``PlmModule.gather_indexed``).

It is a ``DistributedSampler`` so that Lightning uses it as it is (it replaces any other sampler
by one that pads).
"""

from collections.abc import Iterator

from torch.utils.data import DistributedSampler

from datamodules.errors import PlmbenchError


class EvaluationSampler(DistributedSampler):
    """Rank ``rank``'s share of ``size`` examples, in increasing index order, out of
    ``num_replicas`` ranks; the shares partition ``range(size)``."""

    def __init__(self, size: int, batch_size: int, num_replicas: int = 1, rank: int = 0,
                 what: str = "the evaluation set") -> None:
        # DistributedSampler.__init__ would ask the process group and pad: none of that here
        if num_replicas > 1 and size < num_replicas:
            raise PlmbenchError(
                f"{what} has {size} example(s), fewer than the {num_replicas} processes that "
                "evaluate it: raise task.max_eval_samples, or run on fewer devices "
                f"(trainer.devices={max(size, 1)})")
        self.size, self.batch_size = size, batch_size
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.drop_last, self.epoch, self.seed = False, False, 0, 0

    def __iter__(self) -> Iterator[int]:
        step = self.batch_size * self.num_replicas
        if -(-self.size // self.batch_size) < self.num_replicas:  # fewer batches than ranks
            yield from range(self.rank * self.size // self.num_replicas,
                             (self.rank + 1) * self.size // self.num_replicas)
            return
        for start in range(self.rank * self.batch_size, self.size, step):
            yield from range(start, min(start + self.batch_size, self.size))

    def __len__(self) -> int:
        return sum(1 for _ in self)
