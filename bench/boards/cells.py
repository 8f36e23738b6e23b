"""A board's cell: one (row, column)'s values over seeds and their statistics (mean with the sample
std, median, the 95% t-interval of the mean, ``bench/boards/stats.py``). Below the board config
(``bench/boards/config.py`` shows a cell in its column's scale), the rows and the table."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from bench.boards.stats import Estimate


@dataclass(frozen=True)
class Cell:
    """One (row, column): a value over seeds, unscaled (as the records hold it)."""

    mean: float
    std: float  # sample standard deviation, 0 for a single seed
    median: float
    n: int
    values: tuple[float, ...] = ()  # one per seed, sorted
    #: (seed, value) pairs sorted by seed: a row's seeds matched across its columns
    seeds: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, pairs: list[tuple[str, float]]) -> Cell:
        values = sorted(value for _, value in pairs)  # the same in any record order
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(statistics.mean(values), std, statistics.median(values), len(values),
                   tuple(values), tuple(sorted(pairs)))

    def center(self, stat: str) -> float:
        """The cell's value under ``stat`` (one of STATS)."""
        return self.median if stat == "median" else self.mean

    @property
    def estimate(self) -> Estimate:
        """The mean over seeds with the variance of that mean (``bench/boards/stats.py``)."""
        return Estimate.of(self.values)

    def interval(self) -> tuple[float, float] | None:
        """The 95% t-interval of the mean over seeds, unscaled; None for one seed."""
        return self.estimate.interval()
