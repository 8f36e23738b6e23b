"""A new task family is its own code plus registrations, with no edit to ``bench/`` (issue 29):
this file defines one, ``ToyParity`` (is the number of 1s in a string of digits even?), registers
it the way every family is registered (a task YAML whose ``family._target_`` names the class,
here in a ``--config-dir`` of the test's own), writes its tiny data in tmp, runs it through
``plmbench run``, and reads the record it leaves (``bench/record.py``) and the board it reaches.

The same run shows DESIGN.md contract 8 for a family bench/ has never seen: its results folder,
copied to a machine whose data mirror lacks the task, boards the same bytes, because the run
kept the family's reference rows in its record (``record.baselines``)."""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.record import Record, record_paths
from datamodules.init_from import InitFrom
from lit_models.families.classify import Classification
from tests.bench.invoke import plmbench

ALWAYS_EVEN = "always even"
TASK = """defaults:
  - /task/glue/_base@_here_
  - _self_
name: toy/parity
family:                     # this file's family for encoders and decoders (the base's ByKind)
  encoder: {_target_: MODULE.ToyParity}
  decoder: {_target_: MODULE.ToyParity}
dataset: toy                # $PLMBENCH_DATA/toy/parity/<split>.parquet
config: parity
hub_id: null                # the tmp mirror only
text_fields: [digits]
num_labels: 2
label_names: [odd, even]
metrics: [accuracy]
columns:                    # its column on the board it reports to (glue)
  - {label: Parity (acc), value: metrics.validation.accuracy}
"""


class ToyParity(Classification):
    """Parity of the 1s in a digit string, a sentence classification (``Classification``'s
    modules) with a reference row of its own: "always even", the share of even strings."""

    def baselines(self, task):
        rows = super().baselines(task)  # the majority class of the training labels
        (labels,) = self.eval_labels(task).values()
        rows[ALWAYS_EVEN] = {"validation": {"accuracy": sum(labels) / len(labels)}}
        return rows


def digit_rows(n: int, rng: random.Random) -> pa.Table:
    strings = [" ".join(rng.choice("0123") for _ in range(rng.randint(3, 8))) for _ in range(n)]
    return pa.table({"digits": strings, "label": [int(s.count("1") % 2 == 0) for s in strings]})


def toy_run(where: Path, monkeypatch) -> None:
    """One toy run on its own mirror under ``where``, its records in ``where/results``."""
    rng = random.Random(0)
    data = where / "mirror" / "toy" / "parity"
    data.mkdir(parents=True)
    pq.write_table(digit_rows(48, rng), data / "train.parquet")
    pq.write_table(digit_rows(24, rng), data / "validation.parquet")
    conf = where / "conf" / "task" / "toy"
    conf.mkdir(parents=True)
    (conf / "parity.yaml").write_text(TASK.replace("MODULE", __name__))  # this very file
    monkeypatch.setenv("PLMBENCH_DATA", str(where / "mirror"))
    result = plmbench("run", "--config-dir", str(where / "conf"), "task=toy/parity",
                      "model=bert-tiny-scratch", "trainer.max_steps=2",
                      "trainer.enable_progress_bar=false", f"results_dir={where / 'results'}")
    assert result.rc == 0, result.err


@pytest.fixture
def ran(tmp_path, monkeypatch) -> Path:
    """One toy run; the directory holding its ``results``."""
    toy_run(tmp_path, monkeypatch)
    return tmp_path


def board(where: Path, monkeypatch) -> str:
    monkeypatch.chdir(where)
    result = plmbench("leaderboard", "results")
    assert result.rc == 0, result.err
    return result.out


def test_a_family_of_its_own_leaves_a_record_and_reaches_a_board(ran, monkeypatch):
    (path,) = record_paths(ran / "results")
    record = Record.from_json(path)
    assert record.status == "ok" and record.task == "toy/parity" and record.board == "glue"
    assert record.steps == 2
    assert record.task_config["family"]["encoder"]["_target_"].endswith(".ToyParity")
    labels = pq.read_table(ran / "mirror/toy/parity/validation.parquet")["label"].to_pylist()
    rows = {row.name: row.metrics["validation"]["accuracy"] for row in record.baselines.rows}
    assert rows[ALWAYS_EVEN] == pytest.approx(sum(labels) / len(labels))
    train = pq.read_table(ran / "mirror/toy/parity/train.parquet")["label"].to_pylist()
    majority = max(set(train), key=train.count)
    assert rows[None] == pytest.approx(sum(label == majority for label in labels) / len(labels))
    accuracy = record.metrics["validation"]["accuracy"]
    assert 0.0 <= accuracy <= 1.0
    here = board(ran, monkeypatch)
    assert "Parity (acc)" in here and "bert-tiny-scratch" in here
    assert f"| {ALWAYS_EVEN} †" in here and f"{100 * accuracy:.1f}" in here

    elsewhere = ran / "elsewhere"  # another machine: its mirror has no toy data at all
    shutil.copytree(ran / "results", elsewhere / "results")
    shutil.rmtree(ran / "mirror")
    (ran / "mirror").mkdir()
    assert board(elsewhere, monkeypatch) == here


def test_the_run_parses_its_checkpoint_setting_only_where_its_config_is_checked(tmp_path,
                                                                                monkeypatch):
    """``init_from`` is parsed by the config check (``plmbench run`` checks every point before
    the first runs, then the run its own) and passed on typed: the family, the hub resolution
    and the record take the parsed value (issue 29)."""
    parsed = []
    parse = InitFrom.parse.__func__

    def counted(cls, value, setting="init_from", pretrained=False):
        parsed.append((setting, sys._getframe(1).f_code.co_name))
        return parse(cls, value, setting, pretrained)

    monkeypatch.setattr(InitFrom, "parse", classmethod(counted))
    toy_run(tmp_path, monkeypatch)
    assert [caller for setting, caller in parsed if setting == "init_from"] == [
        "check_init_from", "check_init_from"]
