"""The paired bootstrap over examples and seeds (bench/boards/bootstrap.py), its per-example metrics
(bench/example_outputs.py) and ``plmbench significance`` / ``leaderboard --compare``, against
hand computations: the bootstrap distributions of two small cases are worked out exactly, the
resampled metrics on all rows equal scikit-learn's and scipy's."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from bench.boards.bootstrap import ColumnSpec, TaskArms, paired_bootstrap
from bench.boards.significance import compare, find_row
from bench.boards.table import build_table
from bench.example_outputs import REGRESSION, Outputs, classification, read_outputs
from bench.record import write_record
from tests.bench.boards.test_leaderboard import col, record, task_config
from tests.bench.invoke import plmbench
from tests.conftest import require

sklearn = require("sklearn.metrics")


def outputs(predicted, gold, num_labels=2) -> Outputs:
    data = {"prediction": np.array(predicted), "label": np.array(gold)}
    return Outputs(np.arange(len(gold)), data, classification(num_labels))


ACCURACY = [ColumnSpec("acc", "validation", "accuracy", 1.0)]


def test_the_example_bootstrap_matches_its_exact_binomial_distribution():
    """A right on examples 0, 1, 4 of 5; B also on 2. On a resample the difference is (times
    example 2 was drawn) / 5, X ~ Binomial(5, 1/5): observed 0.2, p = P(|X/5 - 0.2| >= 0.2) =
    1 - P(X = 1) = 1 - 0.4096; the 2.5% and 97.5% quantiles are 0 and 3/5."""
    gold = [1, 1, 1, 1, 1]
    a, b = outputs([1, 1, 0, 0, 1], gold), outputs([1, 1, 1, 0, 1], gold)
    per_task, overall = paired_bootstrap([TaskArms("t", ACCURACY, [{"validation": a}],
                                                   [{"validation": b}])], [1.0], 20000, seed=1)
    test = per_task["t"]
    assert test.value == pytest.approx(0.2)
    assert test.p == pytest.approx(1 - 5 * 0.2 * 0.8 ** 4, abs=0.015)
    assert (test.low, test.high) == pytest.approx((0.0, 0.6))
    assert overall == test  # one task of weight 1: the aggregate is the task


def test_the_seed_bootstrap_matches_its_exact_distribution():
    """A: one seed, always right. B: a seed always right and one always wrong; the examples do
    not matter, the seeds drawn do: B's mean is 1 (1/4), 1/2 (1/2) or 0 (1/4). Observed B - A =
    -1/2; p = P(d* in {0, -1}) = 1/2; interval [-1, 0]."""
    gold = [1, 0, 1, 1]
    right, wrong = outputs(gold, gold), outputs([1 - g for g in gold], gold)
    arms = TaskArms("t", ACCURACY, [{"validation": right}],
                    [{"validation": right}, {"validation": wrong}])
    test = paired_bootstrap([arms], [1.0], 20000, seed=2)[0]["t"]
    assert test.value == pytest.approx(-0.5)
    assert test.p == pytest.approx(0.5, abs=0.015)
    assert (test.low, test.high) == pytest.approx((-1.0, 0.0))


def test_resampled_metrics_on_all_rows_are_sklearns_and_scipys():
    rng = np.random.default_rng(0)
    all_rows = np.arange(300)[None, :]
    gold, predicted = rng.integers(0, 3, 300), rng.integers(0, 3, 300)
    three = outputs(predicted, gold, 3)
    assert three.metric("matthews", all_rows)[0] == pytest.approx(
        sklearn.matthews_corrcoef(gold, predicted))
    assert three.metric("accuracy", all_rows)[0] == pytest.approx(
        sklearn.accuracy_score(gold, predicted))
    # macro F1 over the classes present (class 3 of 4 never occurs), micro F1 = accuracy
    four = outputs(predicted, gold, 4)
    assert four.metric("macro_f1", all_rows)[0] == pytest.approx(
        sklearn.f1_score(gold, predicted, average="macro"))
    assert four.metric("micro_f1", all_rows)[0] == pytest.approx(
        sklearn.f1_score(gold, predicted, average="micro"))
    binary_gold, binary = gold % 2, predicted % 2
    two = outputs(binary, binary_gold)
    assert two.metric("f1", all_rows)[0] == pytest.approx(sklearn.f1_score(binary_gold, binary))
    constant = outputs(np.zeros(300, int), binary_gold)  # MCC 0, as scikit-learn says
    assert constant.metric("matthews", all_rows)[0] == sklearn.matthews_corrcoef(
        binary_gold, np.zeros(300, int)) == 0
    scores, truth = rng.normal(size=300), rng.normal(size=300)
    regression = Outputs(np.arange(300), {"prediction": scores, "label": truth}, dict(REGRESSION))
    assert regression.metric("pearson", all_rows)[0] == pytest.approx(
        scipy_stats.pearsonr(scores, truth)[0])
    tied = np.round(scores, 1)  # ties: average ranks, as scipy
    regression.data["prediction"] = tied
    assert regression.metric("spearman", all_rows)[0] == pytest.approx(
        scipy_stats.spearmanr(tied, truth)[0])


RTE = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])
RTE["num_labels"], RTE["label_names"] = 2, ["entailment", "not_entailment"]
NAMES = RTE["label_names"]


def fake_run(root: Path, model: str, seed: int, predicted: list[int], gold: list[int],
             predictions: bool = True) -> dict:
    """A finished RTE run's record and, optionally, its predictions file (the GLUE schema)."""
    run_dir = root / "glue/rte" / model / f"seed{seed}"
    (run_dir / "predictions").mkdir(parents=True)
    with (run_dir / "predictions/validation.tsv").open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["index", "prediction", "label"])
        writer.writerows([i, NAMES[p], NAMES[g]]
                         for i, (p, g) in enumerate(zip(predicted, gold, strict=True)))
    accuracy = float(np.mean(np.array(predicted) == np.array(gold)))
    rec = record(model, "glue/rte", seed, {"validation": {"accuracy": accuracy}}, task_cfg=RTE,
                 run_dir=str(run_dir),
                 predictions={"validation": "predictions/validation.tsv"} if predictions else {})
    write_record(run_dir, rec)
    return rec


def two_models(root: Path, predictions: bool = True) -> None:
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 80).tolist()
    for seed in range(3):
        weak = [g if rng.random() < 0.55 else 1 - g for g in gold]
        strong = [g if rng.random() < 0.85 else 1 - g for g in gold]
        fake_run(root, "weak", seed, weak, gold, predictions)
        fake_run(root, "strong", seed, strong, gold, predictions)


def test_significance_reports_the_boards_difference_with_its_bootstrap(tmp_path):
    two_models(tmp_path)
    done = plmbench("significance", "weak", "strong", str(tmp_path), "--resamples", "300",
                    "--aso-iterations", "50")
    assert done.rc == 0, done.err
    table = build_table([json.loads(p.read_text()) for p in tmp_path.rglob("record.json")],
                        "glue")
    weak, strong = (find_row(table, label) for label in ("weak", "strong"))
    board_difference = strong.score - weak.score
    lines = {line.split("|")[1].strip(): line for line in done.out.splitlines()
             if line.startswith("| glue/rte") or line.startswith("| **aggregate")}
    rte = lines["glue/rte"].split("|")
    assert rte[4].strip().startswith(f"{board_difference:+.2f} [")  # recomputed = the board's
    assert rte[7].strip() == "bootstrap" and rte[10].strip() == "B better"
    assert float(rte[9].split()[0]) < 0.2  # ASO: B almost stochastically better
    assert float(rte[8]) > 0  # its minimum detectable effect
    assert "α = 0.05" in done.out  # the level the verdicts read
    assert "**aggregate**" in lines


def test_without_predictions_the_test_is_welch_over_seeds_and_says_so(tmp_path):
    two_models(tmp_path, predictions=False)
    table = build_table([json.loads(p.read_text()) for p in tmp_path.rglob("record.json")],
                        "glue")
    lines = compare(find_row(table, "weak"), find_row(table, "strong"), table.columns,
                    table.board, 100, aso_iterations=0)
    rte, aggregate = lines
    assert rte.method == "Welch" and "wrote no predictions" in rte.note
    weak, strong = (np.array(list(find_row(table, m).cells["RTE (acc)"].values)) * 100
                    for m in ("weak", "strong"))
    assert rte.test.p == pytest.approx(scipy_stats.ttest_ind(strong, weak,
                                                             equal_var=False).pvalue)
    assert aggregate.test.value == pytest.approx(rte.test.value)
    assert math.isclose(aggregate.test.p, rte.test.p)


def test_compare_tests_each_row_both_directories_have(tmp_path):
    two_models(tmp_path / "a")
    two_models(tmp_path / "b")
    done = plmbench("leaderboard", "--compare", str(tmp_path / "a"), str(tmp_path / "b"),
                    "--resamples", "200", "--aso-iterations", "50")
    assert done.rc == 0, done.err
    assert "### GLUE score, weak" not in done.out  # sections are titled by the row's label
    assert done.out.count("| **aggregate** |") == 2
    assert "identical predictions" in done.out  # the same runs on both sides: exactly 0


def test_two_rows_evaluated_on_different_examples_are_refused(tmp_path):
    gold = [0, 1, 1, 0]
    rec_a = fake_run(tmp_path, "a", 0, gold, gold)
    rec_b = fake_run(tmp_path, "b", 0, gold[:3], gold[:3])
    arms = TaskArms("glue/rte", ACCURACY, [{"validation": read_outputs(rec_a, "validation")}],
                    [{"validation": read_outputs(rec_b, "validation")}])
    with pytest.raises(Exception, match="evaluated on different examples"):
        arms.paired()
