"""The paired bootstrap over evaluation examples and seeds: is B's score different from A's?

Two rows of a board evaluated on the same dev sets differ by chance in two ways: which examples
the dev set happens to hold, and which fine-tuning seeds were drawn. One bootstrap replicate
redraws both (Efron & Tibshirani 1993, ch. 16; Berg-Kirkpatrick et al. 2012 for the paired
resampling of test examples; Dror et al. 2018 for its use in NLP): per eval split, n rows drawn
with replacement from its n examples, the same rows for both arms (the pairing: a hard example
is hard for both); per arm, k of its k seeds drawn with replacement. A column's value is then its
metric on the drawn rows, averaged over the drawn seeds (each seed's predictions file, read by
``bench/example_outputs.py``); a task's score the mean of its scoring columns (scaled); the board
score the weighted mean of the tasks both rows have, as the board's aggregate weighs them.

The difference B - A of the replicates gives the 95% percentile interval, the standard error
(their standard deviation, from which ``bench/boards/stats.py`` derives the minimum detectable
effect) and the two-sided p-value of "no difference" by the shift method: the share of replicates
whose difference is at least as far from the observed one as the observed one is from 0,
|d* - d| >= |d| (the bootstrap distribution moved to the null; Efron & Tibshirani 1993, §16.4).
The estimate d itself is the metric on all rows, averaged over all seeds: the board's numbers,
recomputed.

Rounding is never an effect: a seed average sums its seeds' values in one order (sorted), so two
arms holding the same runs in another order get the same float, and a task whose two arms hold
identical predictions (the same prediction vectors, as the files write them, in the same
proportions, seed for seed in any order) is reported as such, B - A exactly 0 with p = 1,
without resampling (its replicates are exact zeros in the aggregate too). Different predictions
that score alike on every example (two generations both invalid, both scoring 0) are no
identical predictions: their B - A is an exact 0 too, which the reports call equal scores.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from bench.boards.stats import LEVEL, Difference, shift_p
from bench.example_outputs import Outputs
from datamodules.errors import PlmbenchError

#: replicates of a paired bootstrap (``plmbench significance --resamples``)
RESAMPLES = 1000
#: replicates whose row indices are materialised at once (memory: CHUNK x n indices)
CHUNK = 64


@dataclass(frozen=True)
class ColumnSpec:
    """A scoring column as the bootstrap recomputes it: ``metric`` on ``split``, x ``scale``."""

    label: str
    split: str
    metric: str
    scale: float


@dataclass
class TaskArms:
    """One task under both rows: per arm, per seed, the outputs of each split the columns read."""

    task: str
    columns: list[ColumnSpec]
    a: list[dict[str, Outputs]]
    b: list[dict[str, Outputs]]

    def paired(self) -> TaskArms:
        """The arms with every split's rows in one order; an error naming the split where the
        two rows (or two seeds) were evaluated on different examples."""
        aligned: tuple[list, list] = ([], [])
        for split in sorted({c.split for c in self.columns}):
            reference = self.a[0][split].ids
            for seeds in (self.a, self.b):
                for outputs in seeds:
                    ids = outputs[split].ids
                    if len(ids) != len(reference) or set(ids.tolist()) != set(reference.tolist()):
                        raise PlmbenchError(
                            f"{self.task} {split}: the runs compared were evaluated on different "
                            f"examples ({len(reference)} and {len(ids)} rows); compare runs of "
                            "one eval set (the same task.max_eval_samples)")
        for target, seeds in zip(aligned, (self.a, self.b), strict=True):
            for outputs in seeds:
                target.append({split: out.aligned(self.a[0][split].ids)
                               for split, out in outputs.items()})
        return TaskArms(self.task, self.columns, *aligned)

    def identical(self) -> bool:
        """Whether both arms hold the same outputs in the same proportions (seed for seed, in
        any order; one run against several copies of it): every seed average is then the same
        (after ``paired``)."""
        written = all(out.raw is not None for seeds in (self.a, self.b) for seed in seeds
                      for out in seed.values())  # else (a constant predictor) the arrays

        def shares(seeds: list[dict[str, Outputs]]) -> dict[tuple, Fraction]:
            runs = Counter(tuple(_as_written(split, outputs, written)
                                 for split, outputs in sorted(seed.items()))
                           for seed in seeds)
            return {run: Fraction(count, len(seeds)) for run, count in runs.items()}
        return shares(self.a) == shares(self.b)

    def score(self, seeds: list[dict[str, Outputs]], rows: Mapping[str, np.ndarray],
              drawn: np.ndarray) -> np.ndarray:
        """[B] task scores: each column's metric on the replicate's rows of its split,
        averaged over the replicate's drawn seeds ([B, k] indices into ``seeds``), then over
        the columns."""
        total = np.zeros(len(drawn))
        for column in self.columns:
            per_seed = np.stack([seed[column.split].metric(column.metric, rows[column.split])
                                 for seed in seeds])  # [k, B]
            drawn_values = per_seed[drawn, np.arange(len(drawn))[:, None]]  # [B, k]
            total += column.scale * np.sort(drawn_values, axis=1).mean(1)  # order-free
        return total / len(self.columns)


def _as_written(split: str, outputs: Outputs, written: bool) -> tuple:
    """A split's predictions as its file holds them (``Outputs.raw``, where ``written``), else
    its arrays."""
    if written:
        return split, tuple(outputs.raw.tolist())
    return split, tuple((key, value.dtype.str, value.tobytes())
                        for key, value in sorted(outputs.data.items()))


def _all_rows(n: int) -> np.ndarray:
    return np.arange(n)[None, :]


def _replicates(tasks: Sequence[TaskArms], weights: Sequence[float], resamples: int,
                rng: np.random.Generator, same: set[str] = frozenset()
                ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per task, the [resamples] differences B - A (exact zeros for the tasks in ``same``,
    whose arms are identical); and their weighted sum (the aggregate)."""
    per_task = {t.task: np.zeros(resamples) for t in tasks}
    for start in range(0, resamples, CHUNK):
        size = min(CHUNK, resamples - start)
        for task in tasks:
            if task.task in same:
                continue
            sizes = {split: len(out.ids) for split, out in task.a[0].items()}
            rows = {split: rng.integers(0, n, (size, n)) for split, n in sizes.items()}
            scores = [task.score(arm, rows, rng.integers(0, len(arm), (size, len(arm))))
                      for arm in (task.a, task.b)]
            per_task[task.task][start:start + size] = scores[1] - scores[0]
    aggregate = sum(w * per_task[t.task] for w, t in zip(weights, tasks, strict=True))
    return per_task, aggregate


def observed(task: TaskArms) -> float:
    """B - A on every row, averaged over every seed: the difference of the board's numbers."""
    def score(arm):
        rows = {split: _all_rows(len(out.ids)) for split, out in arm[0].items()}
        return task.score(arm, rows, np.arange(len(arm))[None, :])[0]
    return float(score(task.b) - score(task.a))


def summarize(estimate: float, replicates: np.ndarray, level: float = LEVEL,
              identical: bool = False) -> Difference:
    """The percentile interval of the replicates, their standard deviation (the standard error)
    and the shift method's two-sided p-value; ``identical``: arms with the same predictions,
    B - A exactly 0, p = 1."""
    if identical:
        return Difference(0.0, 0.0, 0.0, 1.0, 0.0, identical=True, replicates=replicates)
    alpha = 1 - level
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    se = float(np.std(replicates, ddof=1)) if len(replicates) > 1 else float("nan")
    return Difference(estimate, float(low), float(high), shift_p(estimate, replicates), se,
                      replicates=replicates)


def paired_bootstrap(tasks: Sequence[TaskArms], weights: Sequence[float],
                     resamples: int = RESAMPLES, seed: int = 0
                     ) -> tuple[dict[str, Difference], Difference]:
    """Per task and for the weighted aggregate: B - A, its interval, standard error and
    p-value."""
    tasks = [task.paired() for task in tasks]
    same = {task.task for task in tasks if task.identical()}
    per_task, aggregate = _replicates(tasks, weights, resamples, np.random.default_rng(seed),
                                      same)
    estimates = {task.task: 0.0 if task.task in same else observed(task) for task in tasks}
    overall = math.fsum(w * estimates[t.task] for w, t in zip(weights, tasks, strict=True))
    return ({name: summarize(estimates[name], values, identical=name in same)
             for name, values in per_task.items()},
            summarize(overall, aggregate, identical=len(same) == len(tasks)))
