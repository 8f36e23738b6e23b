"""What a board's numbers promise, checked against independent computations: intervals inside the
metric's range, marks only for columns with a better direction and only above the best constant
answer on the evaluation set, "identical predictions" only for equal prediction vectors, a results
folder read where it is now, and the one-line exits of ``plmbench leaderboard`` and ``docs``."""

from __future__ import annotations

import csv
import json
import math
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from bench.boards.bootstrap import TaskArms, paired_bootstrap
from bench.boards.config import Board, metric_range, task_columns
from bench.boards.score import BEST
from bench.boards.significance import verdict
from bench.boards.table import build_table
from bench.example_outputs import read_outputs
from bench.record import as_record, write_record
from tests.bench.boards.test_leaderboard import col, record, task_config
from tests.bench.boards.test_significance import ACCURACY, fake_run
from tests.bench.invoke import plmbench

FAMILY = {"_target_": "lit_models.families.classify.Classification"}
BOARD = Board("glue", scale=100, format=".1f", aggregate="task_macro")


def t_interval(values: list[float]) -> tuple[float, float]:
    """The 95% t-interval of the mean, by scipy (independent of bench/boards/stats.py)."""
    mean, sem = statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values))
    half = scipy_stats.t.ppf(0.975, len(values) - 1) * sem
    return mean - half, mean + half


@pytest.mark.parametrize(("path", "scale", "bounds"), [
    ("metrics.validation.accuracy", 100, (0, 1)),
    ("metrics.validation.matthews", 100, (-1, 1)),
    ("metrics.test.f1", 1, (0, 100)),  # SQuAD's F1, recorded on 0..100, shown as it is
    ("metrics.validation.recall@5", 1, (0, 100)),
    ("metrics.validation.loss", 1, (None, None)),
    ("throughput.train_tokens_per_s", 1, (None, None)),
])
def test_a_metric_has_the_range_its_recorded_scale_gives(path, scale, bounds):
    assert metric_range(path, scale) == bounds


def test_an_interval_past_a_bound_is_cut_there_and_shown_by_its_ends():
    """3 seeds of accuracy 0.99, 0.9, 0.62: the t-interval reaches past 1 (as 68.2 ± 38.0 reached
    106.2); the cell shows its ends, the upper one 100.0, and the score's interval too."""
    values = [0.99, 0.9, 0.62]
    low, high = t_interval(values)
    assert 0 < low and high > 1  # the case in point
    task = task_config("glue/x", [col("X (acc)", "metrics.validation.accuracy")])
    records = [record("m", "glue/x", seed, {"validation": {"accuracy": v}}, task_cfg=task)
               for seed, v in enumerate(values)]
    table = build_table(records, BOARD)
    (row,) = table.rows
    (column,) = table.columns
    text = column.text(row.cells["X (acc)"])
    assert text == f"{100 * statistics.mean(values):.1f} [{100 * low:.1f}, 100.0] (n=3)"
    assert row.score_interval() == pytest.approx((100 * low, 100.0))
    # a range given in the task's column overrides the metric's: [0, 0.9]
    task["columns"][0]["range"] = [0, 0.9]
    assert task_columns(task, BOARD)[0].bounds == (0.0, 0.9)
    task["columns"][0]["range"] = [1, 0]
    with pytest.raises(Exception, match="range must be \\[low, high\\]"):
        task_columns(task, BOARD)


def test_a_column_with_no_better_direction_is_never_starred():
    """A probe's best layer (higher_is_better: null), and in an older record's columns a best
    layer or centre of gravity given a direction: described, never ranked."""
    task = task_config("probing/x", [
        col("layer 1", "metrics.validation.layer_1"),
        col("best layer", "metrics.validation.best_layer", scale=1, score=False,
            higher_is_better=None),
        col("centre of gravity", "metrics.validation.centre_of_gravity", scale=1, score=False)])
    records = [record(m, "probing/x", 0, {"validation": {"layer_1": acc, "best_layer": layer,
                                                          "centre_of_gravity": layer / 2}},
                      task_cfg=task)
               for m, acc, layer in (("a", 0.9, 1.0), ("b", 0.7, 3.0))]
    table = build_table(records, Board("glue", scale=100))
    marks = {row.label: row.marks for row in table.rows}
    assert marks["a"] == {"layer 1": BEST}  # the probe's accuracy only
    assert marks["b"] == {}


def write_rte(root: Path, model: str, correct_share: float, gold: list[int], seeds=(0, 1, 2)):
    rng = np.random.default_rng(len(model))
    for seed in seeds:
        predicted = [g if rng.random() < correct_share else 1 - g for g in gold]
        fake_run(root, model, seed, predicted, gold)


def test_no_mark_below_the_best_constant_answer_of_the_evaluation_set(tmp_path):
    """The kept baseline (the training majority) reads 40 on a dev set whose own majority class
    scores 65: a row at 55 is above the baseline row but below a constant answer, so unmarked;
    one at 90 is marked."""
    gold = [0] * 65 + [1] * 35
    always = float(np.mean(np.array(gold) == 0))
    write_rte(tmp_path / "weak", "weak", 0.55, gold)
    write_rte(tmp_path / "weak", "also-weak", 0.56, gold)
    baseline = {"rows": [{"name": None, "metrics": {"validation": {"accuracy": 0.40}}}],
                "gold": None}
    for path in (tmp_path / "weak").rglob("record.json"):
        rec = as_record(json.loads(path.read_text())).to_dict()
        rec["config"]["task"]["family"] = FAMILY  # as a run's record names it
        write_record(path.parent, {**rec, "baselines": baseline})
    out = plmbench("leaderboard", str(tmp_path / "weak"))
    assert out.rc == 0, out.err
    rows = {line.split("|")[1].strip(): line for line in out.out.splitlines()
            if line.startswith("| ")}
    assert "★" not in rows["weak"] + rows["also-weak"] and "≈" not in rows["weak"]
    assert "40.0" in rows["baseline (no training) †"]
    assert always == 0.65
    write_rte(tmp_path / "weak", "strong", 0.95, gold)
    out = plmbench("leaderboard", str(tmp_path / "weak"))
    strong = next(line for line in out.out.splitlines() if line.startswith("| strong "))
    assert "★" in strong and "best constant answer on the evaluation set" in out.out


def test_different_predictions_scoring_alike_are_not_identical(tmp_path):
    """Two runs whose every prediction is an invalid generation, each a different text: both
    score 0 (a wrong class), but their predictions differ: equal scores, not identical."""
    gold = [0, 1, 1, 0]
    arms = []
    for name, text in (("a", "maybe"), ("b", "perhaps")):
        rec = fake_run(tmp_path, name, 0, [1 - g for g in gold], gold)
        path = Path(rec["run_dir"]) / "predictions/validation.tsv"
        rows = list(csv.reader(path.open(), delimiter="\t"))
        with path.open("w", newline="") as handle:
            csv.writer(handle, delimiter="\t", lineterminator="\n").writerows(
                [rows[0], *([r[0], text, r[2]] for r in rows[1:])])
        arms.append([{"validation": read_outputs(rec, "validation")}])
    test = paired_bootstrap([TaskArms("t", ACCURACY, *arms)], [1.0], 200)[1]
    assert not test.identical and test.equal_scores and test.value == 0
    assert test.exact_zero_text() == "equal scores, different predictions"
    same = paired_bootstrap([TaskArms("t", ACCURACY, arms[0], arms[0])], [1.0], 200)[1]
    assert same.identical and same.exact_zero_text() == "identical predictions"
    line = type("L", (), {"test": test, "p": 1.0})()
    assert verdict(line) == "equal scores, different predictions"


def test_a_moved_results_folder_is_read_where_it_is_now(tmp_path):
    """The records name their run directories where they ran; copied elsewhere (the original
    gone), their predictions are read beside them and the significance test is the bootstrap."""
    gold = [0, 1] * 30
    write_rte(tmp_path / "old", "a", 0.6, gold)
    write_rte(tmp_path / "old", "b", 0.9, gold)
    shutil.copytree(tmp_path / "old", tmp_path / "new")
    shutil.rmtree(tmp_path / "old")
    done = plmbench("significance", "a", "b", str(tmp_path / "new"), "--resamples", "200",
                    "--aso-iterations", "0")
    assert done.rc == 0, done.err
    rte = next(line for line in done.out.splitlines() if line.startswith("| glue/rte"))
    assert rte.split("|")[7].strip() == "bootstrap"


def test_a_folder_of_one_board_renders_it_and_other_selections_are_one_line(tmp_path):
    task = task_config("probing/x", [col("layer 1", "metrics.validation.layer_1")],
                       board="probing")
    write_record(tmp_path / "r" / "x", record("m", "probing/x", 0,
                                              {"validation": {"layer_1": 0.5}}, task_cfg=task))
    board = plmbench("leaderboard", str(tmp_path / "r"))  # no --board: the records' own
    assert board.rc == 0 and "board 'probing' (1 record used)" in board.out
    tasks = plmbench("leaderboard", str(tmp_path / "r"), "--tasks", "probing/y*")
    assert tasks.rc == 2 and tasks.err.strip() == (
        f"error: --tasks probing/y* matches no task of board 'probing' under {tmp_path / 'r'}; "
        "its tasks: probing/x")
    other = plmbench("leaderboard", str(tmp_path / "r"), "--board", "glue")
    assert other.rc == 2 and "only of probing; pass --board" in other.err
    glue = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])
    write_record(tmp_path / "r" / "y", record("m", "glue/rte", 0,
                                              {"validation": {"accuracy": 0.5}}, task_cfg=glue))
    both = plmbench("leaderboard", str(tmp_path / "r"))
    assert both.rc == 2 and "holds runs of 2 boards (glue, probing); pass --board" in both.err


def test_docs_render_from_the_pages_checkout_name_each_stale_block_and_refuse_a_missing_page(
        tmp_path, monkeypatch):
    """A page's blocks name paths from its checkout's root: checked from another directory they
    render the same; a stale block is named by file, line and command with a diff."""
    root = tmp_path / "checkout"
    task = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])
    for seed, value in enumerate((0.5, 0.75)):
        write_record(root / "docs/results/s" / f"seed{seed}",
                     record("m", "glue/rte", seed, {"validation": {"accuracy": value}},
                            task_cfg=task))
    (root / "pyproject.toml").write_text("")
    page = root / "docs/page.md"
    page.write_text("x\n\n<!-- plmbench leaderboard docs/results/s --no-baselines -->\nOLD\n"
                    "<!-- end plmbench -->\n")
    monkeypatch.chdir(tmp_path)  # not the checkout
    stale = plmbench("docs", str(page))
    assert stale.rc == 1, stale.err
    assert stale.out.startswith(f"differs from its records: {page}:3: <!-- plmbench leaderboard "
                                "docs/results/s --no-baselines -->\n--- committed\n+++ rendered")
    assert "-OLD\n" in stale.out and "+| m " in stale.out
    assert plmbench("docs", "--write", str(page)).rc == 0
    assert "62.5" in page.read_text() and plmbench("docs", str(page)).rc == 0
    missing = plmbench("docs", str(tmp_path / "nope.md"))
    assert missing.rc == 2 and missing.err.strip() == (
        f"error: {tmp_path / 'nope.md'} does not exist: pass Markdown pages (README.md, "
        "docs/*.md), or none for the checkout's own")


def test_a_row_name_reads_the_resolved_config_not_the_command_line():
    """One run set task.max_train_samples=500 on its command line, the other got 2000 from its
    experiment: the second row's name says 2000, never "unset"."""
    rte = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])
    records = []
    for protocol, cap, variant in (("a" * 16, 500, ["task.max_train_samples=500"]),
                                   ("b" * 16, 2000, [])):
        rec = record("m", "glue/rte", 0, {"validation": {"accuracy": 0.6}}, protocol=protocol,
                     task_cfg={**rte, "max_train_samples": cap}, variant=variant)
        records.append(rec)
    names = sorted(row.label for row in build_table(records, BOARD).rows)
    assert names == ["m max_train_samples=2000", "m max_train_samples=500"]


def test_an_evaluation_set_is_its_examples_however_its_size_was_spelled(tmp_path):
    """The whole dev set asked for as its size and as null: one set, one table, one row; a
    smaller cap (other examples) is another."""
    gold = [0, 1] * 10
    for seed, cap in enumerate((None, 20, 20)):
        rec = fake_run(tmp_path, "m", seed, gold, gold)
        rec["config"]["task"] = {**rec["config"]["task"], "max_eval_samples": cap}
        write_record(Path(rec["run_dir"]), rec)
    tables = build_table_sections(tmp_path)
    assert len(tables) == 1 and [row.cells["RTE (acc)"].n for row in tables[0].rows] == [3]
    rec = fake_run(tmp_path, "m", 3, gold[:10], gold[:10])
    rec["config"]["task"] = {**rec["config"]["task"], "max_eval_samples": 10}
    write_record(Path(rec["run_dir"]), rec)
    assert len(build_table_sections(tmp_path)) == 2


def build_table_sections(root: Path) -> list:
    from bench.boards.sections import build_tables
    from bench.record import records_in

    return build_tables(records_in(root)[0], BOARD)


def test_runs_that_kept_different_baselines_show_each_never_one_for_both():
    """Two seeds of one task whose runs kept different baselines (the training data changed in
    between): two baseline rows, each named as one of two, never the first silently."""
    rte = {**task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")]),
           "family": FAMILY}
    records = [record("m", "glue/rte", seed, {"validation": {"accuracy": 0.6}}, task_cfg=rte,
                      baselines={"rows": [{"name": None,
                                           "metrics": {"validation": {"accuracy": kept}}}],
                                 "gold": None})
               for seed, kept in enumerate((0.473, 0.527))]
    from bench.boards.baselines import baseline_records

    made = baseline_records(records, "glue")
    assert sorted((r.label, r.metrics["validation"]["accuracy"]) for r in made) == [
        ("baseline (no training) [1 of 2 kept]", 0.473),
        ("baseline (no training) [2 of 2 kept]", 0.527)]
    rows = build_table(records + made, BOARD).rows
    assert sorted(row.label for row in rows if row.baseline) == [r.label for r in made]
