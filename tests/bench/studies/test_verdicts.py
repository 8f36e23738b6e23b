"""Verdicts that cannot call noise a result (bench/studies/claims.py, bench/boards/significance.py,
bench/boards/trivial.py, bench/boards/corrections.py, the MDE of bench/boards/stats.py):

- two rows that predict a constant class are no evidence for a claim (``plmbench claims`` end to
  end over records written directly), a claim with no rows is "not run", and only the claims
  tested enter the correction;
- identical predictions are B - A exactly 0 with p = 1, whatever order the seeds come in;
- a verdict follows the level (p = 0.065 at 5% is no difference, whatever the interval);
- Holm and Benjamini-Hochberg against computations written out independently;
- the paired bootstrap's power at its own MDE is 80% and its size under the null at most 5%,
  over a few hundred simulated paired datasets (binomial tolerances of 3 standard errors).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from bench.boards.bootstrap import ColumnSpec, TaskArms, observed, paired_bootstrap
from bench.boards.corrections import adjust
from bench.boards.significance import IDENTICAL, NO_DIFFERENCE, Line, render, verdict
from bench.boards.stats import ALPHA, POWER, Difference, minimum_detectable_effect
from bench.example_outputs import Outputs, classification
from bench.studies.claims import margin, null_of, stated_test
from bench.studies.claims import verdict as claim_verdict
from tests.bench.boards.test_significance import fake_run
from tests.bench.invoke import plmbench

ACCURACY = [ColumnSpec("acc", "validation", "accuracy", 1.0)]


def outputs(predicted, gold) -> Outputs:
    data = {"prediction": np.asarray(predicted), "label": np.asarray(gold)}
    return Outputs(np.arange(len(gold)), data, classification(2))


def arms(a: list, b: list) -> TaskArms:
    return TaskArms("t", ACCURACY, [{"validation": o} for o in a], [{"validation": o} for o in b])


# --- identical predictions and rounding ----------------------------------------------------------

def seeds_scoring(*hits: int, n: int = 10) -> list[Outputs]:
    """One run per entry of ``hits``: right on the first ``hit`` of ``n`` examples."""
    gold = np.ones(n, int)
    return [outputs(np.r_[np.ones(h, int), np.zeros(n - h, int)], gold) for h in hits]


def test_identical_predictions_are_exactly_zero_with_p_one_in_any_seed_order():
    s1, s2, s3 = seeds_scoring(1, 2, 3)  # accuracies 0.1, 0.2, 0.3
    # summed in these two orders, the same three floats differ in the last bit
    assert (0.1 + 0.2 + 0.3) / 3 != (0.2 + 0.3 + 0.1) / 3
    per_task, overall = paired_bootstrap([arms([s1, s2, s3], [s2, s3, s1])], [1.0], 200)
    test = per_task["t"]
    assert test.identical and test.value == 0.0 and test.p == 1.0
    assert (test.low, test.high) == (0.0, 0.0) and test.mde is None
    assert overall.identical and overall.value == 0.0 and overall.p == 1.0
    line = Line("glue/rte", 20.0, 20.0, test, "bootstrap")
    assert verdict(line) == IDENTICAL
    # the estimate itself no longer depends on the seeds' order: exact 0 without the shortcut
    assert observed(arms([s1, s2, s3], [s2, s3, s1])) == 0.0


def test_one_identical_task_adds_no_noise_to_the_aggregate():
    s1, s2 = seeds_scoring(4, 6)
    weak, strong = seeds_scoring(3, 9)
    per_task, overall = paired_bootstrap(
        [arms([s1, s2], [s2, s1]), TaskArms("u", ACCURACY, [{"validation": weak}],
                                            [{"validation": strong}])], [0.5, 0.5], 300)
    assert per_task["t"].identical and not overall.identical
    alone = paired_bootstrap([TaskArms("u", ACCURACY, [{"validation": weak}],
                                       [{"validation": strong}])], [1.0], 300)[1]
    assert overall.value == pytest.approx(0.5 * alone.value)


# --- the verdict follows the level ---------------------------------------------------------------

def test_the_verdict_follows_the_p_value_at_the_stated_level():
    # an interval that misses 0 but p = 0.065 (the shift test and the percentile interval
    # disagree at the border): no significant difference at 5%
    border = Line("glue/rte", 60.0, 62.0, Difference(2.0, 0.1, 4.0, 0.065, 1.0), "bootstrap")
    assert verdict(border) == NO_DIFFERENCE
    assert verdict(border, alpha=0.10) == "B better"
    clear = Line("glue/rte", 60.0, 62.0, Difference(2.0, -0.1, 4.0, 0.04, 1.0), "bootstrap")
    assert verdict(clear) == "B better" and verdict(clear, higher_is_better=False) == "A better"
    clear.p_adjusted = 0.08  # significant alone, not once adjusted for the other tasks
    assert verdict(clear) == NO_DIFFERENCE
    text = render([border], "a", "b", "GLUE", 1000)
    assert "α = 0.05" in text and NO_DIFFERENCE in text
    assert f"| {minimum_detectable_effect(1.0):.2f} |" in text  # the MDE column


def test_claim_verdicts_read_the_adjusted_p_and_the_margin():
    greater, worse = {"test": "greater"}, {"test": "not_worse", "margin": 1.0}
    up = Line("aggregate", 80.0, 81.0, Difference(1.0, 0.2, 1.8, 0.01, 0.4), "bootstrap")
    down = Line("aggregate", 80.0, 79.5, Difference(-0.5, -0.8, -0.2, 0.001, 0.15), "bootstrap")
    assert claim_verdict(greater, up, 0.01) == "supported"
    assert claim_verdict(greater, up, 0.065) == "inconclusive"
    assert claim_verdict(greater, down, 0.001) == "contradicted"
    assert claim_verdict({"test": "less"}, down, 0.001) == "supported"
    # non-inferiority (CONSORT): significantly worse by 0.5 but clear of the 1-point margin
    assert null_of(worse, 80.0) == -1.0
    assert claim_verdict(worse, down, 0.001) == "supported"
    far = Line("aggregate", 80.0, 77.0, Difference(-3.0, -3.6, -2.4, 0.0, 0.3), "bootstrap")
    assert claim_verdict(worse, far, 0.0) == "contradicted"  # worse by more than the margin
    assert claim_verdict({**worse, "fewer_parameters": True}, up, 0.0, smaller=False) \
        == "contradicted"
    share = {"test": "not_worse", "margin_share": 0.03}
    assert margin(share, 80.0) == pytest.approx(2.4)
    assert stated_test(worse) == "B not worse than A by more than 1 point"
    assert stated_test(share, 80.0) == ("B not worse than A by more than 2.40 points (3% of A's "
                                        "score)")


def test_a_non_inferiority_p_is_the_test_moved_to_the_margin():
    rng = np.random.default_rng(0)
    replicates = rng.normal(-0.5, 0.3, 4000)
    test = Difference(-0.5, -1.1, 0.1, 0.1, 0.3, replicates=replicates)
    # H0: B - A = -1: the share of replicates at least 0.5 from -0.5, about P(|Z| >= 0.5/0.3)
    assert test.p_against(-1.0) == pytest.approx(2 * scipy_stats.norm.sf(0.5 / 0.3), abs=0.02)
    welch = Difference(-0.5, -1.5, 0.5, 0.2, 0.4, df=6)
    assert welch.p_against(-1.0) == pytest.approx(2 * scipy_stats.t.sf(0.5 / 0.4, 6))


# --- corrections ---------------------------------------------------------------------------------

P = [0.01, 0.04, 0.03, 0.005, 0.20, 0.04]


def test_holm_is_the_step_down_of_its_definition():
    """statsmodels' multipletests(method="holm"): sorted p_(i) (m - i + 1) (1-based), running
    maximum, clipped at 1, back in the given order; written out as a loop."""
    m, order = len(P), sorted(range(len(P)), key=lambda i: P[i])
    expected, running = [0.0] * m, 0.0
    for rank, i in enumerate(order, start=1):
        running = max(running, P[i] * (m - rank + 1))
        expected[i] = min(1.0, running)
    assert adjust(P, "holm") == pytest.approx(expected)
    assert adjust(P, "holm")[3] == pytest.approx(0.03)  # the smallest: x m
    assert adjust([0.5, 0.6], "holm") == [1.0, 1.0]  # clipped


def test_benjamini_hochberg_is_the_step_up_of_its_definition():
    """Sorted p_(i) m / i, running minimum from the largest down, clipped at 1."""
    m, order = len(P), sorted(range(len(P)), key=lambda i: P[i], reverse=True)
    expected, running = [0.0] * m, 1.0
    for i, rank in zip(order, range(m, 0, -1), strict=True):
        running = min(running, P[i] * m / rank)
        expected[i] = running
    assert adjust(P, "bh") == pytest.approx(expected)
    assert adjust(P, "none") == P and adjust([], "holm") == []


# --- the paired bootstrap's power and size -------------------------------------------------------

N_DATASETS, N_EXAMPLES, DISCORDANT = 300, 400, 0.15
Z = scipy_stats.norm.ppf(1 - ALPHA / 2) + scipy_stats.norm.ppf(POWER)


def simulate(effect: float, seed: int) -> tuple[float, float]:
    """Over N_DATASETS paired datasets of N_EXAMPLES examples where B is right and A wrong with
    probability DISCORDANT + effect / 2 and the reverse DISCORDANT - effect / 2 (accuracy B - A =
    effect): the paired bootstrap's rejection rate at ALPHA and its mean MDE."""
    rng = np.random.default_rng(seed)
    p_b_only, p_a_only = DISCORDANT + effect / 2, DISCORDANT - effect / 2
    draw = rng.random((N_DATASETS, N_EXAMPLES))
    a_right = (draw >= p_b_only) & (draw < 0.7 + p_b_only)  # 0.7 both right, then A only
    b_right = (draw < p_b_only) | ((draw >= p_b_only) & (draw < 0.7 + p_b_only - p_a_only))
    gold = np.ones(N_EXAMPLES, int)
    rejected, mdes = 0, []
    for i in range(N_DATASETS):
        test = paired_bootstrap([arms([outputs(a_right[i].astype(int), gold)],
                                      [outputs(b_right[i].astype(int), gold)])], [1.0],
                                400, seed=i)[1]
        rejected += test.p < ALPHA
        mdes.append(test.mde)
    return rejected / N_DATASETS, float(np.mean(mdes))


def tolerance(rate: float) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / N_DATASETS)


def test_a_planted_effect_at_the_mde_is_found_at_the_stated_power():
    """The MDE of a paired difference of accuracies: Var(d) = 2 q - effect^2 per example, so the
    effect equal to its own MDE is Z sqrt((2 q - effect^2) / n): Z sqrt(2 q / (n + Z^2))."""
    effect = Z * math.sqrt(2 * DISCORDANT / (N_EXAMPLES + Z * Z))
    rate, mde = simulate(effect, seed=1)
    assert rate == pytest.approx(POWER, abs=tolerance(POWER))
    assert mde == pytest.approx(effect, rel=0.05)  # what the report would have quoted


def test_a_planted_null_is_rejected_at_most_at_the_level():
    rate, _ = simulate(0.0, seed=2)
    assert rate <= ALPHA + tolerance(ALPHA)


def test_the_mde_multiplier_is_the_normal_or_t_quantiles():
    assert minimum_detectable_effect(1.0) == pytest.approx(2.8016, abs=1e-4)
    assert minimum_detectable_effect(2.0, df=4) == pytest.approx(
        2 * (scipy_stats.t.ppf(0.975, 4) + scipy_stats.t.ppf(0.8, 4)))


# --- plmbench claims end to end ------------------------------------------------------------------

def test_claims_over_constant_predictors_are_no_evidence(tmp_path):
    """no_nsp (not worse by 1 point) between two rows predicting the majority class: no evidence,
    not 'supported at +0.00 [+0.00, +0.00]'; dynamic_masking between two rows that learned: a
    verdict with its p and MDE, alone in the correction; rtd_vs_mlm with no records: not run."""
    rng = np.random.default_rng(5)
    gold = (rng.random(150) < 0.4).astype(int).tolist()  # 60% class 0
    for seed in range(2):
        fake_run(tmp_path, "const-a", seed, [0] * len(gold), gold)
        fake_run(tmp_path, "const-b", seed, [0] * len(gold), gold)
        for label, right in (("learned-a", 0.85), ("learned-b", 0.86)):
            fake_run(tmp_path, label, seed,
                     [g if rng.random() < right else 1 - g for g in gold], gold)
    done = plmbench("claims", "experiment=claims_tiny", f"results_dir={tmp_path}",
                    "study.claims=[no_nsp,dynamic_masking,rtd_vs_mlm]", "study.resamples=300",
                    *(f"claims.{claim}.runs=[]" for claim in ("no_nsp", "dynamic_masking",
                                                               "rtd_vs_mlm")),
                    "claims.no_nsp.a.label=const-a", "claims.no_nsp.b.label=const-b",
                    "claims.dynamic_masking.a.label=learned-a",
                    "claims.dynamic_masking.b.label=learned-b")
    assert done.rc == 0, done.err[-2000:]
    text = (tmp_path / "claims.md").read_text()
    rows = {cells[1].strip(): [c.strip() for c in cells[1:-1]]
            for cells in (line.split("|") for line in text.split("\n## ")[0].splitlines())
            if len(cells) > 10 and cells[1].strip() in ("no_nsp", "dynamic_masking",
                                                         "rtd_vs_mlm")}
    no_nsp = rows["no_nsp"]
    assert no_nsp[9] == "no evidence"
    assert no_nsp[5] == "B not worse than A by more than 1 point"  # the margin, stated
    assert no_nsp[6] == "+0 exactly (identical predictions)" and no_nsp[7] == "–"
    assert "const-a: identical predictions against the best trivial predictor, NOT above" in text
    masking = rows["dynamic_masking"]
    assert masking[9] in ("supported", "contradicted", "inconclusive")
    assert float(masking[8]) > 0 and masking[7] != "–"  # its MDE and its (adjusted) p
    assert "learned-a: +" in text and "above it" in text
    assert rows["rtd_vs_mlm"][9] == "not run"
    assert "one claim tested, so Holm leaves its p as it is" in text
    assert 'class="no-evidence"' in (tmp_path / "claims.html").read_text()


def test_significance_of_two_constant_rows_says_identical_and_not_learned(tmp_path):
    gold = [0, 0, 0, 1, 1, 0, 1, 0, 0, 0] * 6
    for seed in range(2):
        fake_run(tmp_path, "const-a", seed, [0] * len(gold), gold)
        fake_run(tmp_path, "const-b", seed, [0] * len(gold), gold)
    done = plmbench("significance", "const-a", "const-b", str(tmp_path), "--resamples", "200",
                    "--aso-iterations", "0")
    assert done.rc == 0, done.err
    rte = next(line for line in done.out.splitlines() if line.startswith("| glue/rte")).split("|")
    assert rte[4].strip() == "+0.00 [+0.00, +0.00]" and rte[5].strip() == "1.000"
    assert rte[10].strip() == IDENTICAL
    assert "const-a: identical predictions against the best trivial predictor, NOT above" \
        in done.out
    assert "no evidence about the two models" in done.out
