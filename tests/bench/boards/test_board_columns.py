"""Columns that are no contest (bench/boards/score.py, bench/boards/config.py): a config setting
shown as a column (SQuAD's max length, a beam count) and a size that does not vary with the seed
get no best star; a record that holds its parameter count shows it, whether its family counts
the encoder alone (``encoder_parameters``) or the whole net with its heads (``parameters``: a
T5's text-to-text GLUE run), and the shipped boards' size columns are never starred."""

from __future__ import annotations

import pytest

from bench.boards.config import get_board
from bench.boards.score import BEST
from bench.boards.table import build_table
from bench.boards.text import render_markdown
from tests.bench.boards.test_leaderboard import col, markdown_table, record, task_config

SQUAD = task_config("squad/v1", [col("EM", "metrics.validation.exact_match"),
                                 col("max length", "config.task.max_length", score=False,
                                     format=".0f")], board="squad")


def squad_record(model: str, seed: int, em: float, max_length: int) -> dict:
    made = record(model, "squad/v1", seed, {"validation": {"exact_match": em}},
                  task_cfg={**SQUAD, "max_length": max_length}, protocol=model * 4)
    made["config"]["task"]["max_length"] = max_length
    return made


def test_a_config_setting_column_is_never_starred_a_score_column_is():
    records = [squad_record(m, s, em + s, length) for m, em, length in
               (("aaaa", 70.0, 384), ("bbbb", 80.0, 512)) for s in (0, 1)]
    table = build_table(records, "squad")
    setting = next(c for c in table.columns if c.label == "max length")
    assert setting.is_setting
    assert all("max length" not in row.marks for row in table.rows)
    best = next(row for row in table.rows if row.label == "bbbb")
    assert best.marks["EM"] == BEST
    cells = {line[0]: line for line in markdown_table(render_markdown(table))}
    assert cells["bbbb"][-1] == "512" and cells["aaaa"][-1] == "384"  # shown, unmarked


RTE = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")])


@pytest.mark.parametrize(("held", "shown"), [
    ({"encoder_parameters": 4_385_920, "parameters": 4_386_178}, "4.39e+06"),
    ({"encoder_parameters": None, "parameters": 60_506_624}, "6.05e+07"),  # T5: heads kept
    ({"parameters": 14_340_000}, "1.43e+07"),  # a record from before encoder_parameters
])
def test_a_record_holding_a_parameter_count_shows_it(held, shown):
    records = [record("m", "glue/rte", s, {"validation": {"accuracy": 0.6 + s / 100}},
                      task_cfg=RTE, **held) for s in (0, 1)]
    table = build_table(records, "glue")
    (row,) = table.rows
    column = next(c for c in table.columns if c.label == "parameters")
    assert column.text(row.cells["parameters"]) == shown
    assert row.parameters == held.get("encoder_parameters") or held["parameters"]
    assert "parameters" not in row.marks


@pytest.mark.parametrize("board", ["glue", "t5_objectives", "compression", "distill"])
def test_no_shipped_size_column_can_be_starred(board):
    sizes = [c for c in get_board(board).columns
             if "parameters" in c.label or "FLOPs" in c.label or "tokens" in c.label]
    assert sizes and all(not c.varies for c in sizes)
