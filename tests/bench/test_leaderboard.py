"""Leaderboards (bench/leaderboard.py) against an independent computation with statistics."""

from __future__ import annotations

import csv
import io
import random
import statistics

import pytest

from bench.leaderboard import BOARDS, GLUE, build_table, get_board, render_csv, render_markdown
from bench.records import iter_records, write_record
from datamodules.errors import PlmbenchError

# task -> [(column label, split, metric)] for the synthetic sweep: one- and two-metric tasks,
# and MNLI's two splits.
TASKS = {
    "glue/mrpc": [("MRPC (F1)", "validation", "f1"), ("MRPC (acc)", "validation", "accuracy")],
    "glue/mnli": [
        ("MNLI-m", "validation_matched", "accuracy"),
        ("MNLI-mm", "validation_mismatched", "accuracy"),
    ],
    "glue/rte": [("RTE (acc)", "validation", "accuracy")],
}
MODELS = {"bert-tiny": ("p" * 16, 0.6), "electra-small": ("q" * 16, 0.75)}
SEEDS = (0, 1, 2)


def record(model, task, seed, metrics, status="ok", protocol=None, **extra) -> dict:
    return {
        "schema": 1, "status": status, "model": model, "label": model, "task": task,
        "board": "glue", "seed": seed, "protocol_hash": protocol or MODELS[model][0],
        "metrics": metrics, "finished_at": "2026-01-01T00:00:00Z", **extra,
    }


def sweep() -> tuple[list[dict], dict]:
    """Records of 2 models x 3 tasks x 3 seeds, and the values as {model: {column: [..]}}."""
    rng = random.Random(0)
    records, values = [], {model: {} for model in MODELS}
    for model, (_, level) in MODELS.items():
        for task, columns in TASKS.items():
            for seed in SEEDS:
                metrics = {}
                for column, split, metric in columns:
                    value = level + rng.uniform(-0.05, 0.05)
                    metrics.setdefault(split, {})[metric] = value
                    values[model].setdefault(column, []).append(value)
                records.append(record(model, task, seed, metrics))
    return records, values


def expected_score(columns: dict[str, list[float]]) -> float:
    """GLUE score computed independently: per task the mean of its metrics' seed means."""
    task_scores = [
        statistics.mean(statistics.mean(columns[label]) for label, _, _ in task_columns)
        for task_columns in TASKS.values()
    ]
    return statistics.mean(task_scores)


def cell_text(seed_values: list[float]) -> str:
    mean, std = statistics.mean(seed_values), statistics.stdev(seed_values)
    return f"{100 * mean:.1f} ± {100 * std:.1f} (n={len(seed_values)})"


def test_cells_and_score_match_an_independent_computation():
    records, values = sweep()
    table = build_table(records, GLUE)
    assert table.n_records == len(records) == 18
    assert [row.label for row in table.rows] == ["electra-small", "bert-tiny"]
    for row in table.rows:
        assert set(row.cells) == set(values[row.label])
        for column, seed_values in values[row.label].items():
            cell = row.cells[column]
            assert cell.n == 3
            assert cell.mean == pytest.approx(statistics.mean(seed_values))
            assert cell.std == pytest.approx(statistics.stdev(seed_values))
            assert cell.median == pytest.approx(statistics.median(seed_values))
        assert row.score == pytest.approx(expected_score(values[row.label]))
        assert row.n_tasks == 3


def test_markdown_shows_present_columns_in_board_order_aligned():
    records, values = sweep()
    text = render_markdown(build_table(records, GLUE))
    lines = text.splitlines()
    assert "glue" in lines[0] and "18 records" in lines[0]
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header == ["Model", "GLUE score", "MRPC (F1)", "MRPC (acc)", "MNLI-m", "MNLI-mm",
                      "RTE (acc)"]
    table_lines = [line for line in lines if line.startswith("|")]
    assert len(table_lines) == 4 and len({len(line) for line in table_lines}) == 1
    assert set(lines[3]) <= set("|-:")
    for line, model in zip(table_lines[2:], ["electra-small", "bert-tiny"], strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == model
        assert cells[1] == f"{100 * expected_score(values[model]):.1f} (3/9 tasks)"
        assert cells[2:] == [cell_text(values[model][column]) for column in header[2:]]
    assert "mean ± std over seeds (n)" in text


def test_failed_and_foreign_records_are_ignored():
    records, _ = sweep()
    extra = [
        record("bert-tiny", "glue/rte", 9, {"validation": {"accuracy": 0.0}}, status="failed"),
        record("bert-tiny", "glue/rte", 8, {"validation": {"accuracy": 0.0}}, board="pretrain"),
        record("bert-tiny", "glue/ax", 7, {"validation": {"accuracy": 0.0}}),
        record("bert-tiny", "glue/rte", 6, {"validation": {"f1": 0.0}}),  # no metric shown
    ]
    expected = render_markdown(build_table(records, GLUE))
    table = build_table(records + extra, GLUE)
    assert table.n_records == 18
    assert render_markdown(table) == expected


def test_missing_tasks_give_dashes_and_a_partial_task_count():
    records, values = sweep()
    only_rte = [r for r in records if r["model"] == "electra-small" or r["task"] == "glue/rte"]
    table = build_table(only_rte, GLUE)
    tiny = next(row for row in table.rows if row.label == "bert-tiny")
    assert tiny.n_tasks == 1
    assert tiny.score == pytest.approx(statistics.mean(values["bert-tiny"]["RTE (acc)"]))
    line = next(line for line in render_markdown(table).splitlines() if "bert-tiny" in line)
    assert line.count("–") == 4 and "(1/9 tasks)" in line


def test_single_seed_has_zero_std_and_a_rerun_replaces_its_seed():
    first = record("bert-tiny", "glue/rte", 0, {"validation": {"accuracy": 0.5}},
                   finished_at="2026-01-01T00:00:00Z")
    rerun = record("bert-tiny", "glue/rte", 0, {"validation": {"accuracy": 0.7}},
                   finished_at="2026-01-02T00:00:00Z")
    for records in ([first, rerun], [rerun, first]):
        cell = build_table(records, GLUE).rows[0].cells["RTE (acc)"]
        assert (cell.mean, cell.std, cell.n) == (pytest.approx(0.7), 0.0, 1)


def test_one_label_under_two_protocols_gets_two_tagged_rows():
    records = [
        record("bert-tiny", "glue/rte", 0, {"validation": {"accuracy": 0.6}}, protocol="abcdef99"),
        record("bert-tiny", "glue/rte", 0, {"validation": {"accuracy": 0.5}}, protocol="123456ff"),
        record("electra-small", "glue/rte", 0, {"validation": {"accuracy": 0.4}}),
    ]
    labels = [row.label for row in build_table(records, GLUE).rows]
    assert labels == ["bert-tiny [abcdef]", "bert-tiny [123456]", "electra-small"]


def test_output_does_not_depend_on_record_order():
    records, _ = sweep()
    shuffled = records[:]
    random.Random(1).shuffle(shuffled)
    table, other = build_table(records, GLUE), build_table(shuffled, "glue")
    assert render_markdown(table) == render_markdown(other)
    assert render_csv(table) == render_csv(other)


def test_csv_parses_and_matches_the_markdown_numbers():
    records, _ = sweep()
    table = build_table(records, GLUE)
    rows = list(csv.DictReader(io.StringIO(render_csv(table))))
    markdown = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in render_markdown(table).splitlines()[4:6]
    ]
    assert [row["model"] for row in rows] == ["electra-small", "bert-tiny"]
    for row, shown, table_row in zip(rows, markdown, table.rows, strict=True):
        assert shown[1] == f"{float(row['score']):.1f} ({row['n_tasks']}/9 tasks)"
        for column, text in zip(table.columns, shown[2:], strict=True):
            mean, std, n = (row[f"{column} {stat}"] for stat in ("mean", "std", "n"))
            assert text == f"{float(mean):.1f} ± {float(std):.1f} (n={n})"
            median = float(row[f"{column} median"])
            assert median == pytest.approx(100 * table_row.cells[column].median, abs=1e-4)


def test_records_written_to_disk_make_the_same_table(tmp_path):
    records, _ = sweep()
    for i, rec in enumerate(records):
        write_record(tmp_path / f"run{i:02d}", rec)
    assert render_csv(build_table(iter_records(tmp_path), GLUE)) == render_csv(
        build_table(records, GLUE)
    )


def test_no_matching_records_gives_an_empty_table_and_a_message(tmp_path):
    records, _ = sweep()
    failed = [dict(r, status="failed") for r in records]
    table = build_table(failed, GLUE)
    assert table.rows == [] and table.n_records == 0
    message = render_markdown(table, tmp_path)
    assert "no finished runs" in message.lower() and "glue" in message and str(tmp_path) in message
    assert render_csv(table) == "model,protocol_hash,score,n_tasks\n"


def test_unknown_board_lists_the_known_ones():
    assert get_board("glue") is BOARDS["glue"] is GLUE
    with pytest.raises(PlmbenchError, match="known boards: glue") as error:
        get_board("superglue")
    assert "\n" not in str(error.value)
