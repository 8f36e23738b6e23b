"""Confidence intervals and tests for a leaderboard's few seeds.

An ``Estimate`` is a mean with the variance of that mean and its degrees of freedom. A cell over
n seeds is the sample mean, variance s^2 / n, n - 1 degrees of freedom; its 95% interval is
Student's t-interval mean ± t(0.975, n - 1) s / sqrt(n). We use the t-interval, not a bootstrap
over seeds: with the 3 to 5 seeds a fine-tuning protocol affords, a bootstrap over seeds has a
handful of distinct resamples and its percentile interval is too narrow (it cannot reach past the
observed extremes), while the t-interval is exact for normal seed-to-seed noise and its coverage
degrades gracefully otherwise. One seed gives no interval.

A score that averages several tasks (GLUE's macro-average) is a weighted sum of task means from
independent runs: its variance is sum w_t^2 v_t, and its degrees of freedom follow
Welch-Satterthwaite, (sum w_t^2 v_t)^2 / sum (w_t^2 v_t)^2 / df_t (Satterthwaite 1946). The
difference of two independent estimates is tested the same way: Welch's t-test, whose interval
and p-value ``difference`` returns (for two cells: scipy's ``ttest_ind(equal_var=False)``).

Paired comparisons over evaluation examples (the same dev set under two models) are in
``bench/bootstrap.py``; the almost stochastic order test (Dror et al. 2019) in ``aso``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.special import stdtr, stdtrit  # Student's t CDF and its inverse; scipy.stats: 0.8 s

#: the confidence level of every interval plmbench shows, and the test's 1 - alpha
LEVEL = 0.95
#: ASO's threshold: eps_min below it reads as "almost stochastically dominant" (Ulmer et al.
#: 2022, the deepsig authors' recommendation, stricter than the 0.5 of Dror et al. 2019)
ASO_THRESHOLD = 0.2


@dataclass(frozen=True)
class Estimate:
    """A mean, the variance of that mean, and the degrees of freedom of that variance (0: one
    observation, no variance known)."""

    value: float
    variance: float
    df: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate:
        """The sample mean of ``values``, its variance s^2 / n and n - 1 degrees of freedom."""
        n = len(values)
        variance = statistics.variance(values) / n if n > 1 else math.nan
        return cls(statistics.fmean(values), variance, n - 1)

    @property
    def known(self) -> bool:
        return self.df >= 1 and math.isfinite(self.variance)

    def interval(self, level: float = LEVEL) -> tuple[float, float] | None:
        """The t-interval value ± t((1 + level) / 2, df) sqrt(variance); None without a variance."""
        if not self.known:
            return None
        half = stdtrit(self.df, (1 + level) / 2) * math.sqrt(self.variance)
        return self.value - half, self.value + half


def weighted_sum(parts: Sequence[tuple[float, Estimate]]) -> Estimate:
    """sum w_t x_t of independent estimates, with Welch-Satterthwaite degrees of freedom; no
    variance where a part has none."""
    value = math.fsum(w * e.value for w, e in parts)
    if not parts or not all(e.known for _, e in parts):
        return Estimate(value, math.nan, 0)
    terms = [w * w * e.variance for w, e in parts]
    variance = math.fsum(terms)
    if variance == 0:  # every part constant over its seeds: an exact value
        return Estimate(value, 0.0, min(e.df for _, e in parts))
    df = variance ** 2 / math.fsum(t * t / e.df for t, (_, e) in zip(terms, parts, strict=True))
    return Estimate(value, variance, df)


@dataclass(frozen=True)
class Difference:
    """B - A with its confidence interval and the two-sided p-value of "no difference"."""

    value: float
    low: float
    high: float
    p: float

    @property
    def significant(self) -> bool:
        return self.p < 1 - LEVEL


def difference(a: Estimate, b: Estimate, level: float = LEVEL) -> Difference | None:
    """Welch's test of B - A for independent estimates; None where either has no variance."""
    combined = weighted_sum([(-1.0, a), (1.0, b)])
    if not combined.known:
        return None
    if combined.variance == 0:
        p = 1.0 if combined.value == 0 else 0.0
        return Difference(combined.value, combined.value, combined.value, p)
    low, high = combined.interval(level)
    t = combined.value / math.sqrt(combined.variance)
    p = 2 * stdtr(combined.df, -abs(t))  # the upper tail: t's survival function
    return Difference(combined.value, low, high, float(p))


def aso(scores_a: Sequence[float], scores_b: Sequence[float], seed: int = 0,
        iterations: int = 1000) -> float | None:
    """eps_min of the almost stochastic order test (Dror et al. 2019, del Barrio et al. 2018) by
    ``deepsig``: the violation of "B stochastically dominates A", 0 (B dominates) .. 1 (A does);
    below ``ASO_THRESHOLD`` B is almost stochastically better. None where a side has fewer
    than two scores."""
    import warnings

    from deepsig import aso as deepsig_aso  # imports pandas: only when a test asks for it

    if min(len(scores_a), len(scores_b)) < 2:
        return None
    with warnings.catch_warnings():  # identical samples: a 0/0 deepsig warns of, eps_min 1
        warnings.simplefilter("ignore", UserWarning)
        return float(deepsig_aso(list(scores_b), list(scores_a), confidence_level=LEVEL,
                                 num_bootstrap_iterations=iterations, seed=seed,
                                 show_progress=False, num_jobs=1))
