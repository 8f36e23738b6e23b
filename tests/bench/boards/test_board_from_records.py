"""A board is a pure function of records (DESIGN.md contract 8): a run keeps its task's baseline
in its record, so records copied to a machine whose data mirror lacks the task board the same
bytes, and records written before runs kept baselines still board as they did."""

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.record import read_records
from tests.bench.invoke import plmbench
from tests.conftest import require

sk = require("sklearn.metrics")

RUN = ["model=bert-tiny-scratch", "task=glue/rte", "task.max_train_samples=64",
       "task.max_eval_samples=48", "trainer.max_steps=2", "trainer.enable_progress_bar=false"]


def board(where: Path, monkeypatch, *options: str) -> str:
    """The markdown board of ``where/results``, rendered from ``where`` (paths relative)."""
    monkeypatch.chdir(where)
    result = plmbench("leaderboard", "results", *options)
    assert result.rc == 0, result.err
    return result.out


@pytest.fixture
def ran(mirror, tmp_path) -> Path:
    """One tiny RTE run on the real mirror; the directory holding its ``results``."""
    result = plmbench("run", *RUN, f"results_dir={tmp_path / 'results'}")
    assert result.rc == 0, result.err
    return tmp_path


def test_a_run_keeps_its_baseline_and_a_board_needs_no_data(ran, mirror, tmp_path,
                                                            monkeypatch):
    (record,), _ = read_records(ran / "results")
    train = pq.read_table(mirror / "glue/rte/train.parquet")["label"].to_pylist()[:64]
    dev = pq.read_table(mirror / "glue/rte/validation.parquet")["label"].to_pylist()[:48]
    majority = max(set(train), key=train.count)
    (row,) = record["baselines"]["rows"]
    assert row["name"] is None  # the majority class, scored on the run's own 48 examples
    assert row["metrics"]["validation"]["accuracy"] == pytest.approx(
        sk.accuracy_score(dev, [majority] * len(dev)), abs=1e-7)
    here = board(ran, monkeypatch)
    assert "baseline (no training)" in here

    elsewhere = tmp_path / "elsewhere"  # another machine: its mirror has no GLUE at all
    shutil.copytree(ran / "results", elsewhere / "results")
    empty = tmp_path / "empty_mirror"
    empty.mkdir()
    monkeypatch.setenv("PLMBENCH_DATA", str(empty))
    assert board(elsewhere, monkeypatch) == here


def test_records_without_a_kept_baseline_board_as_before(ran, tmp_path, monkeypatch):
    """A record from before runs kept baselines: its baseline is computed from the data."""
    here = board(ran, monkeypatch)
    older = tmp_path / "older"
    shutil.copytree(ran / "results", older / "results")
    (path,) = (older / "results").rglob("record.json")
    record = json.loads(path.read_text())
    del record["baselines"]
    path.write_text(json.dumps(record))
    assert board(older, monkeypatch) == here
