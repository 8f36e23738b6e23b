"""A board's intervals, marks and aggregates against independent computations: each cell's 95%
t-interval against scipy's, the score's interval against Welch-Satterthwaite worked by hand,
Welch's test against scipy's ttest_ind, GLUE's and BERT's Table 1 averages from hand-written
records, and the published reference rows kept apart from the measured ones."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from scipy import stats as scipy_stats

from bench.boards.config import get_board
from bench.boards.references import load_references
from bench.boards.score import BEST, SCORE, TIED
from bench.boards.stats import Estimate, difference, weighted_sum
from bench.boards.table import build_table
from bench.boards.text import render_csv, render_json, render_markdown
from datamodules.errors import PlmbenchError
from tests.bench.boards.test_leaderboard import col, record, sweep, task_config


def test_cell_intervals_are_scipys_t_intervals():
    records, values = sweep()
    table = build_table(records, "glue")
    for row in table.rows:
        for label, seed_values in values[row.label].items():
            expected = scipy_stats.t.interval(0.95, len(seed_values) - 1,
                                              loc=statistics.mean(seed_values),
                                              scale=scipy_stats.sem(seed_values))
            assert row.cells[label].interval() == pytest.approx(expected)
    csv_rows = render_csv(table).splitlines()
    assert "MNLI-m ci_low" in csv_rows[0] and "score_ci_high" in csv_rows[0]
    cell = json.loads(render_json(table))["rows"][0]["cells"]["RTE (acc)"]
    low, high = table.rows[0].cells["RTE (acc)"].interval()
    assert cell["ci"] == pytest.approx([100 * low, 100 * high])


def test_the_scores_interval_is_welch_satterthwaite_by_hand():
    """Two tasks, three seeds: RTE's accuracies and MRPC's (F1, accuracy) pairs. The score is the
    mean of RTE and MRPC's mean of its two columns; its variance (1/4)(s_rte^2/3 + s_mrpc^2/3),
    its degrees of freedom Welch-Satterthwaite's."""
    mrpc = task_config("glue/mrpc", [col("MRPC (F1)", "metrics.validation.f1"),
                                     col("MRPC (acc)", "metrics.validation.accuracy")],
                       metrics=["f1", "accuracy"])
    rte = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])
    rte_values, f1s, accs = [0.60, 0.64, 0.67], [0.80, 0.83, 0.79], [0.70, 0.74, 0.71]
    records = [record("m", "glue/rte", s, {"validation": {"accuracy": v}}, task_cfg=rte)
               for s, v in enumerate(rte_values)]
    records += [record("m", "glue/mrpc", s, {"validation": {"f1": f, "accuracy": a}},
                       task_cfg=mrpc) for s, (f, a) in enumerate(zip(f1s, accs, strict=True))]
    row = build_table(records, "glue").rows[0]
    mrpc_seeds = [100 * (f + a) / 2 for f, a in zip(f1s, accs, strict=True)]
    rte_seeds = [100 * v for v in rte_values]
    v_rte, v_mrpc = (statistics.variance(x) / 3 for x in (rte_seeds, mrpc_seeds))
    variance = (v_rte + v_mrpc) / 4
    df = variance ** 2 / ((v_rte / 4) ** 2 / 2 + (v_mrpc / 4) ** 2 / 2)
    score = (statistics.mean(rte_seeds) + statistics.mean(mrpc_seeds)) / 2
    half = scipy_stats.t.ppf(0.975, df) * math.sqrt(variance)
    assert row.score == pytest.approx(score)
    assert row.score_interval() == pytest.approx((score - half, score + half))
    assert f"{score:.1f} ± {half:.1f} (2/9 tasks)" in render_markdown(build_table(records, "glue"))


def test_welch_difference_is_scipys_ttest():
    a, b = [0.61, 0.64, 0.66, 0.60], [0.70, 0.66, 0.72]
    test = difference(Estimate.of(a), Estimate.of(b))
    expected = scipy_stats.ttest_ind(b, a, equal_var=False)
    assert test.p == pytest.approx(expected.pvalue)
    interval = expected.confidence_interval(0.95)
    assert (test.low, test.high) == pytest.approx((interval.low, interval.high))
    assert test.value == pytest.approx(statistics.mean(b) - statistics.mean(a))
    # one seed: no variance, no test; constant seeds: an exact difference
    assert difference(Estimate.of([0.5]), Estimate.of(b)) is None
    exact = difference(Estimate.of([0.5, 0.5]), Estimate.of([0.7, 0.7]))
    assert (exact.value, exact.low, exact.high, exact.p) == pytest.approx((0.2, 0.2, 0.2, 0.0))
    assert not weighted_sum([(1.0, Estimate.of([0.5]))]).known


def test_best_and_tied_marks_follow_welchs_test():
    rte = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])
    seeds = {"best": [0.80, 0.82, 0.81], "close": [0.79, 0.83, 0.78], "far": [0.50, 0.51, 0.52],
             "single": [0.81]}
    records = [record(model, "glue/rte", s, {"validation": {"accuracy": v}}, task_cfg=rte,
                      protocol=model * 4) for model, values in seeds.items()
               for s, v in enumerate(values)]
    table = build_table(records, "glue")
    marks = {row.label: row.marks.get("RTE (acc)") for row in table.rows}
    assert marks == {"best": BEST, "close": TIED, "far": None, "single": None}
    assert difference(Estimate.of(seeds["best"]), Estimate.of(seeds["close"])).p > 0.05
    assert difference(Estimate.of(seeds["best"]), Estimate.of(seeds["far"])).p < 0.05
    assert {row.label: row.marks.get(SCORE) for row in table.rows}["close"] == TIED
    text = render_markdown(table)
    assert "81.0 ± " in text and " ★" in text and " ≈" in text


def test_no_mark_for_a_row_not_above_the_baseline_by_more_than_its_interval():
    """Majority class at 60%: "noise" (59-62%, interval over 60) has learned nothing and is not
    starred though it is the best row of its column; once "learned" (80-82%) is there, that is
    the best and "noise" is not even tied."""
    rte = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])
    baseline = {**record("baseline (no training)", "glue/rte", 0,
                         {"validation": {"accuracy": 0.60}}, task_cfg=rte), "baseline": True}
    noise = [record("noise", "glue/rte", s, {"validation": {"accuracy": v}}, task_cfg=rte,
                    protocol="n" * 16) for s, v in enumerate([0.59, 0.62, 0.61])]
    table = build_table([baseline, *noise], "glue")
    assert all(not row.marks for row in table.rows)
    learned = [record("learned", "glue/rte", s, {"validation": {"accuracy": v}}, task_cfg=rte,
                      protocol="l" * 16) for s, v in enumerate([0.80, 0.82, 0.81])]
    marks = {row.label: row.marks.get("RTE (acc)")
             for row in build_table([baseline, *noise, *learned], "glue").rows}
    assert marks == {"learned": BEST, "noise": None, "baseline (no training)": None}


# the nine GLUE tasks' columns and one seed's values, as hand-written records
GLUE = {
    "glue/cola": {"CoLA (MCC)": ("matthews", "validation", 0.50)},
    "glue/sst2": {"SST-2 (acc)": ("accuracy", "validation", 0.90)},
    "glue/mrpc": {"MRPC (F1)": ("f1", "validation", 0.88), "MRPC (acc)": ("accuracy", "validation",
                                                                          0.84)},
    "glue/stsb": {"STS-B (P)": ("pearson", "validation", 0.86), "STS-B (S)": ("spearman",
                                                                              "validation", 0.85)},
    "glue/qqp": {"QQP (F1)": ("f1", "validation", 0.70), "QQP (acc)": ("accuracy", "validation",
                                                                       0.88)},
    "glue/mnli": {"MNLI-m": ("accuracy", "validation_matched", 0.84),
                  "MNLI-mm": ("accuracy", "validation_mismatched", 0.83)},
    "glue/qnli": {"QNLI (acc)": ("accuracy", "validation", 0.91)},
    "glue/rte": {"RTE (acc)": ("accuracy", "validation", 0.66)},
    "glue/wnli": {"WNLI (acc)": ("accuracy", "validation", 0.56)},
}


def glue_records() -> list[dict]:
    records = []
    for task, columns in GLUE.items():
        metrics: dict = {}
        for metric, split, value in columns.values():
            metrics.setdefault(split, {})[metric] = value
        config = task_config(task, [col(label, f"metrics.{split}.{metric}")
                                    for label, (metric, split, _) in columns.items()])
        records.append(record("bert-base-scratch", task, 0, metrics, task_cfg=config))
    return records


def test_glue_and_bert_table1_aggregates_from_hand_written_records():
    v = {label: 100 * value for columns in GLUE.values() for label, (_, _, value) in
         columns.items()}
    # the GLUE leaderboard: every task, a two-metric task the mean of its two
    glue = statistics.mean([v["CoLA (MCC)"], v["SST-2 (acc)"],
                            (v["MRPC (F1)"] + v["MRPC (acc)"]) / 2,
                            (v["STS-B (P)"] + v["STS-B (S)"]) / 2,
                            (v["QQP (F1)"] + v["QQP (acc)"]) / 2,
                            (v["MNLI-m"] + v["MNLI-mm"]) / 2, v["QNLI (acc)"], v["RTE (acc)"],
                            v["WNLI (acc)"]])
    # BERT's Table 1: nine figures, no WNLI, F1 for MRPC and QQP, Spearman for STS-B
    bert = statistics.mean([v["MNLI-m"], v["MNLI-mm"], v["QQP (F1)"], v["QNLI (acc)"],
                            v["SST-2 (acc)"], v["CoLA (MCC)"], v["STS-B (S)"], v["MRPC (F1)"],
                            v["RTE (acc)"]])
    assert glue != pytest.approx(bert)
    board = get_board("glue")
    default = build_table(glue_records(), board)
    table1 = build_table(glue_records(), board.with_aggregate("bert_table1"))
    assert default.rows[0].score == pytest.approx(glue) and default.rows[0].n_scored == 9
    assert table1.rows[0].score == pytest.approx(bert) and table1.rows[0].n_scored == 9
    assert board.with_aggregate("glue") == board
    text = render_markdown(table1)
    assert text.startswith("## GLUE (score: BERT's Table 1 average): board 'glue'")
    assert "| BERT Table 1 average |" in text.splitlines()[2].replace("  ", " ")
    assert render_markdown(default).startswith("## GLUE (score: the GLUE leaderboard's "
                                               "aggregate)")
    # the published figure checks the definition: BERT-Base's Table 1 test figures give 79.6
    published = [84.6, 83.4, 71.2, 90.5, 93.5, 52.1, 85.8, 88.9, 66.4]
    assert round(statistics.mean(published), 1) == 79.6
    with pytest.raises(PlmbenchError, match="no aggregate 'table2'; use one of glue, bert_table1"):
        board.with_aggregate("table2")


def test_reference_rows_are_their_own_table_with_sources():
    records, _ = sweep()
    table = build_table(records, "glue")
    table.references = load_references("glue_dev")
    text = render_markdown(table)
    measured, published = text.split("### Published results (not measured here, not ranked)")
    assert "bert-base-uncased" not in measured and "ModernBERT-base ‡" in published
    assert "Sanh et al. 2019 (DistilBERT), Table 1" in published
    assert "Warner et al. 2024 (ModernBERT), Table 5" in published
    assert "86.7?" in published  # bert-base-uncased's MNLI: one figure, matched or not unsaid
    bert = next(r for r in table.references if r.label == "bert-base-uncased")
    assert bert.score == 79.5 and bert.values["CoLA (MCC)"] == 56.3
    assert [r["label"] for r in json.loads(render_json(table))["references"]] == [
        "bert-base-uncased", "distilbert-base-uncased", "electra-small-discriminator",
        "roberta-base", "deberta-v3-base", "ModernBERT-base", "roberta-large", "deberta-base",
        "deberta-v3-base", "ettin-encoder-150m"]
    assert render_csv(table) == render_csv(build_table(records, "glue"))  # measured rows only
