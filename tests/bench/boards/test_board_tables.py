"""Records into tables through one entry point (bench/boards/tables.py): the command line, a
study's board and the claims report see the same rows, baselines included; a record the board
cannot use is listed with its reason, and never stops the board."""

from __future__ import annotations

from pathlib import Path

from bench.boards.baselines import BASELINE_LABEL
from bench.boards.tables import View, tables_in
from bench.records import write_record
from bench.studies.study import render_board
from tests.bench.boards.test_leaderboard import TASKS, record
from tests.bench.invoke import plmbench

RTE = {**TASKS["glue/rte"], "family": {"_target_": "lit_models.families.classify.Classify"}}
#: what a run of RTE keeps of its baseline: the majority class, 52.7% of the dev set
KEPT = {"rows": [{"name": None, "metrics": {"validation": {"accuracy": 0.527}}}], "gold": None}


def write_runs(results: Path) -> None:
    for model, accuracy in (("bert-tiny-scratch", 0.61), ("electra-small-scratch", 0.66)):
        for seed in (0, 1):
            write_record(results / model / f"seed{seed}",
                         record(model, "glue/rte", seed, {"validation": {"accuracy": accuracy}},
                                task_cfg=RTE, baselines=KEPT, init_from="scratch"))


def test_the_command_line_and_a_study_show_the_same_board_with_its_baseline(tmp_path):
    results = tmp_path / "results"
    write_runs(results)
    (table,) = tables_in(results, "glue")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == {"bert-tiny-scratch", "electra-small-scratch", BASELINE_LABEL}
    assert rows[BASELINE_LABEL].baseline and rows[BASELINE_LABEL].cells["RTE (acc)"].mean == 0.527
    assert rows["electra-small-scratch"].cells["RTE (acc)"].n == 2
    shown = plmbench("leaderboard", str(results), "--board", "glue")
    assert shown.rc == 0 and BASELINE_LABEL in shown.out
    assert shown.out == render_board(results, "glue") + "\n"  # a study's board: the same bytes
    (without,) = tables_in(results, "glue", View(baselines=False))
    assert [row.label for row in without.rows] == ["electra-small-scratch", "bert-tiny-scratch"]


def test_records_a_board_cannot_use_are_listed_with_their_reasons(tmp_path):
    results = tmp_path / "results"
    write_runs(results)
    looping = results / "looping"  # fine-tuned from a checkpoint of itself: a chain that loops
    write_record(looping, record("looping", "glue/rte", 0, {"validation": {"accuracy": 0.7}},
                                 task_cfg=RTE, init_from=f"ckpt:{looping}"))
    no_columns = {key: value for key, value in TASKS["glue/rte"].items() if key != "columns"}
    write_record(results / "bad_metrics",  # its columns come from metrics: a number, no list
                 record("bad-metrics", "glue/rte", 0, {"validation": {"accuracy": 0.7}},
                        task_cfg={**no_columns, "metrics": 3}))
    (table,) = tables_in(results, "glue")
    why = {Path(u.source).parent.name: u.why for u in table.unused}
    assert set(why) == {"looping", "bad_metrics"}
    assert f"returns to {looping}" in why["looping"]
    assert "metrics 3: each must be a list of names" in why["bad_metrics"]
    assert {row.label for row in table.rows} == {"bert-tiny-scratch", "electra-small-scratch",
                                                 BASELINE_LABEL}
    shown = plmbench("leaderboard", str(results), "--board", "glue")
    assert shown.rc == 0 and "not used on board glue: its chain of init_from" in shown.err
