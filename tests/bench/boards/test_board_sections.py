"""A board over runs scored on different examples (bench/eval_sets.py, bench/boards/sections.py):
runs capped at 16 and at 128 RTE dev examples are two tables, each with the majority-class
baseline of its own examples (checked against scikit-learn on the mirror's labels); a baseline
whose labels are not those the runs were scored on is left out with a note; ``plmbench
significance`` compares rows of one evaluation set only. Records are written directly, with
predictions files as runs write them: no training."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from bench.boards.sections import build_tables, render_tables
from bench.compose import compose_config
from bench.eval_sets import eval_set
from bench.record import Record, as_record, read_records, write_record
from tests.bench.boards.test_leaderboard import record
from tests.bench.boards.test_significance import RTE, fake_run
from tests.bench.invoke import plmbench
from tests.conftest import require

sk = require("sklearn.metrics")


def rte_task(cap: int) -> dict:
    config = compose_config(["task=glue/rte", "model=bert-tiny-scratch",
                             f"task.max_eval_samples={cap}"], "")
    return OmegaConf.to_container(config.task, resolve=True)


def write_run(root: Path, model: str, seed: int, task: dict, gold: list[int],
              rng: np.random.Generator) -> None:
    """A finished run of ``task`` scored on ``gold`` (label ids), its predictions file written
    as a run writes it (index, prediction, gold label in the submission vocabulary)."""
    names = task["label_names"]
    predicted = [g if rng.random() < 0.7 else 1 - g for g in gold]
    run_dir = root / "glue/rte" / model / f"cap{len(gold)}" / f"seed{seed}"
    (run_dir / "predictions").mkdir(parents=True)
    with (run_dir / "predictions/validation.tsv").open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["index", "prediction", "label"])
        writer.writerows([i, names[p], names[g]]
                         for i, (p, g) in enumerate(zip(predicted, gold, strict=True)))
    accuracy = float(np.mean(np.array(predicted) == np.array(gold)))
    write_record(run_dir, record(model, "glue/rte", seed, {"validation": {"accuracy": accuracy}},
                                 protocol="p" * 16, task_cfg=task, run_dir=str(run_dir),
                                 predictions={"validation": "predictions/validation.tsv"}))


def mirror_labels(mirror: Path) -> tuple[list[int], int]:
    """RTE's dev labels and the majority class of its training labels, from the Parquet files."""
    dev = pq.read_table(mirror / "glue/rte/validation.parquet")["label"].to_pylist()
    train = pq.read_table(mirror / "glue/rte/train.parquet")["label"].to_pylist()
    return dev, max(set(train), key=train.count)


def cell(markdown: str, row: str) -> float:
    """The RTE accuracy of ``row`` in a one-task Markdown table."""
    line = next(line for line in markdown.splitlines() if line.startswith(f"| {row} "))
    return float(line.split("|")[3].split()[0])


def test_runs_on_16_and_128_examples_are_two_tables_each_with_its_own_baseline(mirror, tmp_path):
    dev, majority = mirror_labels(mirror)
    rng = np.random.default_rng(0)
    for seed in (0, 1):
        write_run(tmp_path, "a", seed, rte_task(16), dev[:16], rng)
        write_run(tmp_path, "b", seed, rte_task(16), dev[:16], rng)
        write_run(tmp_path, "a", seed, rte_task(128), dev[:128], rng)
        write_run(tmp_path, "c", seed, rte_task(128), dev[:128], rng)
    done = plmbench("leaderboard", str(tmp_path))
    assert done.rc == 0, done.err
    parts = done.out.split("\n## ")
    assert len(parts) == 2 and "evaluation set 1 of 2" in parts[0] and "2 of 2" in parts[1]
    by_cap = {("max_eval_samples=16" in part): part for part in parts}
    for small, part in by_cap.items():
        n = 16 if small else 128
        assert "scored on 2 different evaluation sets" in part
        assert {line.split("|")[1].strip() for line in part.splitlines()
                if line.startswith("| ") and "Model" not in line} == (
            {"a", "b", "baseline (no training) †"} if small else
            {"a", "c", "baseline (no training) †"})
        expected = 100 * sk.accuracy_score(dev[:n], [majority] * n)
        assert cell(part, "baseline (no training) †") == pytest.approx(expected, abs=0.05)
    # a row is compared with rows of its own evaluation set, never across
    ok = plmbench("significance", "a", "b", str(tmp_path), "--resamples", "50",
                  "--aso-iterations", "0")
    assert ok.rc == 0, ok.err
    refused = plmbench("significance", "b", "c", str(tmp_path))
    assert refused.rc == 2
    assert "were scored on different examples" in refused.err
    assert len(refused.err.strip().splitlines()) == 1


def test_a_baseline_whose_labels_are_not_the_runs_is_left_out_and_said(mirror, tmp_path):
    dev, _ = mirror_labels(mirror)
    changed = [1 - label for label in dev[:16]]  # the runs read other data than the mirror's
    rng = np.random.default_rng(1)
    for seed in (0, 1):
        write_run(tmp_path, "a", seed, rte_task(16), changed, rng)
    done = plmbench("leaderboard", str(tmp_path))
    assert done.rc == 0, done.err
    assert "baseline (no training)" not in done.out.split("Note:")[0]  # no such row
    assert "No baseline (no training) row for glue/rte" in done.out
    assert "the data changed since the runs" in done.out
    # and on the runs' own labels it is a row again
    same = tmp_path / "same"
    write_run(same, "a", 0, rte_task(16), dev[:16], rng)
    assert "| baseline (no training) †" in plmbench("leaderboard", str(same)).out


def test_the_same_config_on_other_gold_labels_is_another_evaluation_set(tmp_path):
    gold = [0, 1, 1, 0, 1, 0]
    for seed in (0, 1):
        fake_run(tmp_path / "old", "a", seed, gold, gold)
        fake_run(tmp_path / "new", "b", seed, gold, [1 - g for g in gold])
    # a record without predictions says nothing of its labels: it joins either set
    write_record(tmp_path / "c", record("c", "glue/rte", 0, {"validation": {"accuracy": 0.5}},
                                        task_cfg=RTE, protocol="q" * 16))
    records, _ = read_records(tmp_path)
    tables = build_tables(records, "glue")
    assert len(tables) == 2
    assert sorted(sorted(row.label for row in t.rows) for t in tables) == [["a", "c"], ["b"]]
    for table in tables:
        assert "gold labels" in table.notes[0]
    data = json.loads(render_tables(tables, "json"))
    assert [len(s["rows"]) for s in data["sections"]] == [len(t.rows) for t in tables]
    rows = list(csv.DictReader(render_tables(tables, "csv").splitlines()))
    assert sorted((r["evaluation_set"], r["model"]) for r in rows) == [
        ("1", "a"), ("1", "c"), ("2", "b")]
    assert build_tables(list(reversed(records)), "glue")[0].rows[0].label == tables[0].rows[0].label
    one = build_tables([r for r in records if r["label"] != "b"], "glue")
    assert len(one) == 1 and one[0].section == "" and one[0].notes == []


def test_a_jsonl_digest_reads_the_examples_never_what_a_run_predicted_or_retrieved(tmp_path):
    def run(name: str, rows: list[dict]) -> Record:
        (tmp_path / name / "predictions").mkdir(parents=True)
        (tmp_path / name / "predictions/validation.jsonl").write_text(
            "".join(json.dumps(row) + "\n" for row in rows))
        return as_record({"run_dir": str(tmp_path / name),
                          "predictions": {"validation": "predictions/validation.jsonl"},
                          "config": {"task": {"name": "open_qa/nq",
                                              "splits": {"eval": ["validation"]}}}})

    def rows(references: list[str], prediction: str, passages: list[str]) -> list[dict]:
        return [{"id": f"q{i}", "references": [ref], "prediction": prediction,
                 "passages": passages} for i, ref in enumerate(references)]

    a = eval_set(run("a", rows(["Paris", "1969"], "Paris", ["p1", "p2"])))
    b = eval_set(run("b", rows(["Paris", "1969"], "Rome", ["p9"])))
    c = eval_set(run("c", rows(["Paris", "1970"], "Paris", ["p1", "p2"])))
    assert a.gold is not None and a == b and a != c and not a.agrees(c)
