"""Multi-task training on a mixture of tasks (Raffel et al. 2020, §3.5.2).

Each training example is drawn from task m with probability r_m:
- examples-proportional mixing: r_m = min(e_m, K) / sum_n min(e_n, K), e_m the number of
  examples of task m and K an artificial data set size limit (T5: K = 2^21 for GLUE);
- temperature-scaled mixing: every rate raised to the power 1/T and renormalised,
  r_m^(1/T) / sum_n r_n^(1/T); T = 1 is examples-proportional mixing, large T tends to equal
  mixing (T5 with K = 2^21).

``MixtureSampler`` draws an epoch of as many examples as the tasks have together: each draw picks
a task by its rate and then that task's next example in a random order (a task drawn more often
than it has examples starts a new order). The draws depend on (seed, epoch) only, so a resumed
run continues the same order (``EpochSampler``). ``MixtureDataModule`` joins the members'
DataModules: their training sets under the sampler, their eval splits side by side as
"<member>:<split>".
"""

from collections.abc import Mapping, Sequence

import torch
from torch.utils.data import ConcatDataset, DataLoader

from datamodules.base import PlmDataModule
from datamodules.errors import PlmbenchError
from datamodules.sampling import EpochSampler


def mixing_rates(sizes: Sequence[int], cap: int | None = None, temperature: float = 1.0
                 ) -> list[float]:
    """r_m of each task (module docstring) from its number of examples ``sizes[m]``, the limit
    K (``cap``; None: none) and the temperature T."""
    if not sizes or min(sizes) < 1 or temperature <= 0 or (cap is not None and cap < 1):
        raise PlmbenchError(f"mixing needs tasks with examples, cap >= 1 and temperature > 0; "
                            f"got sizes {list(sizes)}, cap {cap}, temperature {temperature}")
    capped = [min(size, cap) if cap is not None else size for size in sizes]
    proportional = [size / sum(capped) for size in capped]
    scaled = [rate ** (1 / temperature) for rate in proportional]
    return [rate / sum(scaled) for rate in scaled]


class MixtureSampler(EpochSampler):
    """Indices into the concatenated tasks (task m's examples after those of tasks < m)."""

    def __init__(self, sizes: Sequence[int], rates: Sequence[float], seed: int) -> None:
        super().__init__(sum(sizes), seed)
        self.sizes, self.rates = list(sizes), torch.tensor(rates, dtype=torch.float64)

    def order(self, epoch: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        tasks = torch.multinomial(self.rates, self.size, replacement=True, generator=generator)
        order = torch.empty(self.size, dtype=torch.long)
        offset = 0
        for task, size in enumerate(self.sizes):
            where = (tasks == task).nonzero().flatten()
            passes = -(-len(where) // size)  # ceil
            examples = [torch.randperm(size, generator=generator) for _ in range(passes)]
            order[where] = torch.cat([torch.empty(0, dtype=torch.long), *examples])[:len(where)]
            order[where] += offset
            offset += size
        return order


class MixtureDataModule(PlmDataModule):
    """The members' DataModules (one per task, same tokenizer and collate) as one: training
    examples mixed at ``rates``, eval splits "<member>:<split>" with their ``texts``."""

    def __init__(self, task: Mapping, members: Mapping[str, PlmDataModule],
                 mixing: Mapping, seed: int = 0) -> None:
        first = next(iter(members.values()))
        super().__init__(task, first.collate_fn, seed)
        self.members, self.mixing = dict(members), dict(mixing)
        self.splits = [name.split(":", 1) for name in self.eval_split_names]
        for member, split in ((s[0], s[-1]) for s in self.splits):
            if member not in members or split not in members[member].eval_split_names:
                raise PlmbenchError(
                    f"task {task['name']}: eval split {member}:{split} names no eval split of a "
                    f"member; use <member>:<split> with members {sorted(members)}"
                )
        self.texts: dict[str, dict[str, list[str]]] = {}
        self.rates: list[float] = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_data is not None or self.eval_data:
            return
        for member in self.members.values():
            member.setup(stage)
        trained = [m.train_data for m in self.members.values() if m.train_data is not None]
        if trained:
            self.train_data = ConcatDataset(trained)
            self.rates = mixing_rates([len(d) for d in trained], self.mixing.get("cap"),
                                      self.mixing.get("temperature", 1.0))
        for name, (member, split) in zip(self.eval_split_names, self.splits, strict=True):
            dm = self.members[member]
            self.eval_data.append(dm.eval_data[dm.eval_split_names.index(split)])
            self.texts[name] = dm.texts[split]

    def train_dataloader(self) -> DataLoader:
        data = self._loaded_train_data()
        sampler = MixtureSampler([len(d) for d in data.datasets], self.rates, self.seed)
        return self._loader(data, self.train_batch_size, sampler=self.shared(sampler))

    @property
    def fingerprints(self) -> dict[str, str]:
        return {f"{name}:{split}": fingerprint for name, dm in self.members.items()
                for split, fingerprint in dm.fingerprints.items()}
