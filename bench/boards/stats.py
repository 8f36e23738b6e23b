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

Every test is read at one level, ALPHA = 1 - LEVEL (two-sided): a difference is significant when
its p-value is below ALPHA, whatever its interval looks like. Beside each test we report its
minimum detectable effect (MDE): the smallest true difference the test finds with probability
POWER at level ALPHA, from the standard error SE of the observed difference,

    MDE = (z_{1 - ALPHA/2} + z_{POWER}) SE          (about 2.80 SE at 5% and 80% power)

or, for a t statistic with df degrees of freedom (Welch's test over seeds), the t quantiles
t_{1 - ALPHA/2, df} + t_{POWER, df} in place of the z's (Bloom 1995, "Minimum detectable effects:
a simple way to report the statistical power of experimental designs", Evaluation Review 19(5),
eq. 1; Cohen 1988, ch. 2; for NLP, Card et al. 2020, "With little power comes great
responsibility", EMNLP). A test that finds nothing and an MDE of 6 points says nothing of a
1-point effect; one with an MDE of 0.5 says such an effect is unlikely.

Paired comparisons over evaluation examples (the same dev set under two models) are in
``bench/boards/bootstrap.py``; the almost stochastic order test (Dror et al. 2019) in ``aso``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# the normal's and Student's t quantiles and t's CDF (scipy.stats would cost 0.8 s of start-up)
from scipy.special import ndtri, stdtr, stdtrit

#: the confidence level of every interval plmbench shows, and the test's 1 - alpha
LEVEL = 0.95
#: the level every test is read at (two-sided): significant when p < ALPHA
ALPHA = round(1 - LEVEL, 12)
#: the power at which a minimum detectable effect is quoted (Cohen 1988's convention)
POWER = 0.8
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


def minimum_detectable_effect(se: float, df: float = math.inf, alpha: float = ALPHA,
                              power: float = POWER) -> float:
    """(q_{1 - alpha/2} + q_{power}) se: the MDE of a two-sided test at ``alpha`` with ``power``
    (module docstring); q is the normal quantile, Student's t with ``df`` degrees of freedom when
    df is finite."""
    quantile = ndtri if math.isinf(df) else (lambda q: stdtrit(df, q))
    return float((quantile(1 - alpha / 2) + quantile(power)) * se)


def shift_p(estimate: float, replicates: np.ndarray, null: float = 0.0) -> float:
    """The bootstrap's two-sided p-value of "B - A = null" by the shift method (Efron &
    Tibshirani 1993, §16.4): the share of replicates at least as far from the estimate as the
    estimate is from the null, |d* - d| >= |d - null|; 1 where the estimate is the null."""
    distance = abs(estimate - null)
    if distance == 0:
        return 1.0
    # ">=" up to rounding: a replicate as far as the observation counts (ties are common with
    # accuracies, multiples of 1/n)
    return float(np.mean(np.abs(replicates - estimate) >= distance * (1 - 1e-9)))


@dataclass(frozen=True)
class Difference:
    """B - A with its confidence interval and the two-sided p-value of "no difference"; its
    standard error ``se`` with ``df`` degrees of freedom (inf: a bootstrap's, read as normal),
    ``identical`` where the two sides' predictions are the same (exact 0, p = 1), and the
    bootstrap's ``replicates`` (None for Welch's test)."""

    value: float
    low: float
    high: float
    p: float
    se: float = math.nan
    df: float = math.inf
    identical: bool = False
    replicates: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def significant(self) -> bool:
        return self.p < ALPHA

    @property
    def equal_scores(self) -> bool:
        """Different predictions that score alike on every resample (two generations both
        invalid, both scoring 0): B - A exactly 0, though the predictions are not identical."""
        return (not self.identical and self.value == 0 and self.replicates is not None
                and bool(np.all(self.replicates == 0)))

    def monte_carlo(self, level: float = LEVEL) -> tuple[float, float] | None:
        """The Monte-Carlo error of a bootstrap's (its ``replicates``) interval ends and p-value:
        a percentile q of B replicates has standard error sqrt(q (1 - q) / B) / f(x_q), f the
        replicates' density there, taken as normal with their standard deviation (Efron &
        Tibshirani 1993, §19.3); a p-value's, sqrt(p (1 - p) / B). None for a test with no
        replicates or an exact result."""
        if self.replicates is None or self.identical or self.equal_scores \
                or not math.isfinite(self.se) or self.se == 0:
            return None
        b, q = len(self.replicates), (1 - level) / 2
        density = math.exp(-float(ndtri(q)) ** 2 / 2) / math.sqrt(2 * math.pi) / self.se
        return (math.sqrt(q * (1 - q) / b) / density,
                math.sqrt(max(self.p * (1 - self.p), 1 / b) / b))

    def exact_zero_text(self) -> str | None:
        """What an exact 0 is: "identical predictions", "equal scores, different
        predictions", or None where B - A is no exact 0."""
        if self.identical:
            return "identical predictions"
        return "equal scores, different predictions" if self.equal_scores else None

    @property
    def mde(self) -> float | None:
        """The minimum detectable effect at ALPHA and POWER; None without a standard error
        (identical predictions need none)."""
        if self.identical or self.equal_scores or not math.isfinite(self.se):
            return None
        return minimum_detectable_effect(self.se, self.df)

    def p_against(self, null: float) -> float:
        """The two-sided p-value of "B - A = null" by the same test (a non-inferiority claim
        tests its margin: null = -margin)."""
        if null == 0:
            return self.p
        if self.replicates is not None:
            return shift_p(self.value, self.replicates, null)
        if self.se == 0 or self.identical:
            return 1.0 if self.value == null else 0.0
        t = (self.value - null) / self.se
        return float(2 * stdtr(self.df, -abs(t)))


def difference(a: Estimate, b: Estimate, level: float = LEVEL) -> Difference | None:
    """Welch's test of B - A for independent estimates; None where either has no variance."""
    combined = weighted_sum([(-1.0, a), (1.0, b)])
    if not combined.known:
        return None
    if combined.variance == 0:
        p = 1.0 if combined.value == 0 else 0.0
        return Difference(combined.value, combined.value, combined.value, p, 0.0, combined.df)
    low, high = combined.interval(level)
    se = math.sqrt(combined.variance)
    p = 2 * stdtr(combined.df, -abs(combined.value / se))  # the upper tail: t's survival function
    return Difference(combined.value, low, high, float(p), se, combined.df)


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
