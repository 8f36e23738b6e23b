"""A board reads records through its results directory's index (bench/board_index.py): the same
tables with or without it, and current after a run rewrites, adds or removes a record."""

from __future__ import annotations

import json
import shutil

import pytest

from bench import board_index
from bench.boards.tables import tables_in
from bench.boards.text import render_markdown
from bench.record import write_record
from tests.bench.boards.test_board_tables import KEPT, RTE, write_runs
from tests.bench.boards.test_leaderboard import record


@pytest.fixture
def small_index(monkeypatch):
    monkeypatch.setattr(board_index, "MIN_RECORDS", 2)  # an index for a handful of records


def board(results) -> str:
    (table,) = tables_in(results, "glue")
    return render_markdown(table, str(results))


def test_the_index_gives_the_same_board_and_drops_what_boards_never_read(tmp_path, small_index):
    results = tmp_path / "results"
    write_runs(results)
    run = results / "bert-tiny-scratch" / "seed0"
    rewritten = json.loads((run / "record.json").read_text())
    rewritten["outputs"] = {"validation": [[0, [1, 1]], [1, [0, 1]]]}
    write_record(run, rewritten)
    (run / "predictions").mkdir()
    (run / "predictions" / "validation.tsv").write_text("index\tprediction\tlabel\n0\t1\t1\n")
    write_record(run, {**rewritten, "predictions": {"validation": "predictions/validation.tsv"}})
    indexed = board(results)
    index = json.loads((results / board_index.INDEX).read_text())
    entries = index["entries"]
    assert len(entries) == 4 and all("outputs" not in e["record"] for e in entries.values())
    gold = entries["bert-tiny-scratch/seed0/record.json"]["gold"]  # its predictions' digest, kept
    assert list(gold) == ["validation"] and len(gold["validation"]) == 16
    assert board(results) == indexed  # read through the index
    shutil.rmtree(results / ".plmbench")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(board_index, "MIN_RECORDS", 100)  # no index: every record parsed
        assert board(results) == indexed


def test_the_index_follows_records_rewritten_added_and_removed(tmp_path, small_index):
    results = tmp_path / "results"
    write_runs(results)
    before = board(results)
    assert "66.0" in before and "80.0" not in before
    for seed in (0, 1):  # electra re-run better, a third model added, bert's runs removed
        write_record(results / "electra-small-scratch" / f"seed{seed}",
                     record("electra-small-scratch", "glue/rte", seed,
                            {"validation": {"accuracy": 0.8}}, task_cfg=RTE, baselines=KEPT))
    write_record(results / "roberta" / "seed0",
                 record("roberta", "glue/rte", 0, {"validation": {"accuracy": 0.7}}, task_cfg=RTE,
                        baselines=KEPT))
    shutil.rmtree(results / "bert-tiny-scratch")
    after = board(results)
    assert "80.0" in after and "66.0" not in after and "roberta" in after
    assert "bert-tiny-scratch" not in after
    entries = json.loads((results / board_index.INDEX).read_text())["entries"]
    assert sorted(entries) == ["electra-small-scratch/seed0/record.json",
                               "electra-small-scratch/seed1/record.json",
                               "roberta/seed0/record.json"]
    (results / board_index.INDEX).write_text("{not json")  # a broken index is rebuilt
    assert board(results) == after


def test_a_record_a_board_cannot_use_is_kept_with_its_reason(tmp_path, small_index):
    results = tmp_path / "results"
    write_runs(results)
    (results / "broken").mkdir()
    (results / "broken" / "record.json").write_text('{"status": "ok", "task": ')
    for _ in range(2):  # parsed, then from the index: the same reason
        (table,) = tables_in(results, "glue")
        assert [(u.source.split("/")[-2], u.why.split(" (")[0]) for u in table.unused] == [
            ("broken", "is not valid JSON")]


def test_a_finished_run_puts_its_record_in_the_index(tmp_path, small_index):
    """What ``bench/run/execute.py`` calls after writing a record: the index holds it at once."""
    results = tmp_path / "results"
    write_runs(results)
    board(results)  # the index, of four records
    path = write_record(results / "roberta" / "seed0",
                        record("roberta", "glue/rte", 0, {"validation": {"accuracy": 0.7}},
                               task_cfg=RTE, baselines=KEPT))
    board_index.record_finished(results, path)
    entries = json.loads((results / board_index.INDEX).read_text())["entries"]
    assert entries["roberta/seed0/record.json"]["record"]["label"] == "roberta"
    board_index.record_finished(results, tmp_path / "elsewhere" / "record.json")  # no index of it
    assert "roberta" in board(results)

@pytest.mark.benchmark
def test_a_board_of_4000_records_in_5_cpu_seconds_and_400_mb(tmp_path):
    """Issue 37's target: 4,000 records of a GLUE grid (65 KB each, tests/bench/boards/
    board_scale.py) board within 5 s of CPU and 400 MB, read through the index; the first read,
    which builds it, gives the same bytes."""
    from tests.bench.boards.board_scale import measure, write_scale

    write_scale(tmp_path / "results", 4000)
    first, second = (measure(tmp_path / "results") for _ in range(2))
    print(f"first read {first}, second read {second}")
    assert first["bytes"] == second["bytes"] > 0
    assert second["cpu_s"] <= 5 and second["peak_mb"] <= 400, second
