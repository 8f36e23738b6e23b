"""The head-pruning curve board (conf/board/head_pruning.yaml): each step of a record's
``analysis.curve`` is a column, read through a dotted path that indexes the list; a curve of
fewer steps leaves the rest empty; the HTML page draws the curves."""

from __future__ import annotations

import pytest

from bench.boards.config import Board
from bench.boards.html import curves
from bench.boards.table import build_table, lookup
from bench.boards.text import render_markdown
from bench.record import as_record
from datamodules.errors import PlmbenchError

PRUNING = {"name": "analysis/head_pruning", "board": "compression"}


def pruning_record(label: str, seed: int, scores: list[float], heads: int = 72) -> dict:
    return {"schema": 1, "status": "ok", "model": "minilm-l6", "label": label,
            "task": "analysis/head_pruning", "board": "compression", "seed": seed,
            "protocol_hash": "p" * 16, "finished_at": "2026-01-01T00:00:00Z",
            "metrics": {"compression": {"score": 100 * scores[-1]}},
            "config": {"model": {"name": "minilm-l6"}, "seed": seed, "task": PRUNING},
            "analysis": {"heads": heads, "step": 0.1,
                         "curve": [{"heads_kept": heads - i, "score": s}
                                   for i, s in enumerate(scores)]}}


def test_a_number_in_a_path_indexes_a_list():
    record = as_record(pruning_record("a", 0, [0.9, 0.8]))
    assert lookup(record, "analysis.curve.1.score") == 0.8
    assert lookup(record, "analysis.curve.2.score") is None  # past the end: absent
    assert lookup(record, "analysis.curve.x.score") is None
    digit = as_record({**pruning_record("b", 0, [0.9]), "metrics": {"0": 1.5}})
    assert lookup(digit, "metrics.0") == 1.5  # a key that is a digit still reads


def test_each_step_is_a_column_scaled_and_averaged_over_seeds():
    long = [1.0 - 0.05 * i for i in range(11)]
    records = [pruning_record("minilm", 0, long), pruning_record("minilm", 1, long[:6] + [0.3] * 5),
               pruning_record("coarse", 0, [0.7, 0.6, 0.5], heads=12)]
    measured = {**pruning_record("teacher", 0, [0.9]), "task": "compression/measure"}
    table = build_table([*records, measured], "head_pruning")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == {"minilm", "coarse"}  # the compression board's other tasks: not curves
    assert rows["minilm"].cells["step 0"].mean == pytest.approx(1.0)
    assert rows["minilm"].cells["step 10"].mean == pytest.approx((0.5 + 0.3) / 2)
    assert rows["minilm"].cells["step 0"].n == 2
    assert rows["coarse"].cells["heads"].mean == 12 and "step 3" not in rows["coarse"].cells
    text = render_markdown(table)
    assert "Head pruning" in text and "| 100.0" in text  # x100, as the target's metric on GLUE
    assert "step 10" in text
    assert curves(table).count("<svg") == 1  # one task's curve figure, a line per row


@pytest.mark.parametrize("reads", ["compression", {"tasks": "x"}, {"board": "b", "extra": 1}])
def test_a_malformed_reads_is_refused_naming_it(reads):
    with pytest.raises(PlmbenchError, match="reads"):
        Board.from_config({"name": "view", "reads": reads})


def test_no_step_is_marked_that_a_constant_answer_matches(tmp_path):
    """A step's score is the target's metric on the examples the run's predictions file lists
    (``analysis.split``, ``analysis.metric``): a step below always answering the dev set's
    majority class (65 of 100 negative: 65.0) is not marked, a step above it is, though the
    curve is the table's only row (its best on every column)."""
    import csv

    from bench.record import write_record

    run_dir = tmp_path / "analysis/head_pruning/minilm/seed0"
    (run_dir / "predictions").mkdir(parents=True)
    gold = ["negative"] * 65 + ["positive"] * 35
    with (run_dir / "predictions/validation.tsv").open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["index", "prediction", "label"])
        writer.writerows([i, "negative", g] for i, g in enumerate(gold))
    target = {"name": "glue/sst2", "num_labels": 2, "label_names": ["negative", "positive"],
              "metrics": ["accuracy"]}
    made = pruning_record("minilm", 0, [0.9, 0.66, 0.6, 0.5])
    made["config"]["task"] = {**PRUNING, "target": target}
    made["analysis"] |= {"split": "validation", "metric": "accuracy"}
    write_record(run_dir, {**made, "run_dir": str(run_dir),
                           "predictions": {"validation": "predictions/validation.tsv"}})
    from bench.record import iter_records

    table = build_table([as_record(r) for r in iter_records(tmp_path)], "head_pruning")
    (row,) = table.rows
    assert set(row.marks) == {"step 0", "step 1"}  # 90 and 66 above 65; 60 and 50 not
