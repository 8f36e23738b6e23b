"""Tiny SQuAD runs end to end: the record's EM/F1 are what the official v1.1 / v2.0 evaluation
logic computes from the prediction files the run wrote, and the runs reach the squad board."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from bench.example_outputs import read_outputs
from tests.bench.invoke import plmbench, read, run_dir
from tests.lit_models.metrics import official_squad

TINY = ["model=bert-tiny-scratch", "task.max_train_samples=48", "task.max_eval_samples=40",
        "trainer.max_steps=3", "trainer.enable_progress_bar=false", "task.max_length=128",
        "task.doc_stride=32"]
V2 = [*TINY, "task=squad/v2", "task.splits.train=validation"]  # v2.0 train is hub-only


def questions(mirror, dataset: str, n: int) -> list[tuple[str, list[str]]]:
    rows = pq.read_table(mirror / f"{dataset}/validation.parquet").to_pylist()[:n]
    return [(row["id"], row["answers"]["text"]) for row in rows]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


def test_v1_record_equals_the_official_script_on_its_predictions(mirror, results):
    done = plmbench("run", *TINY, "task=squad/v1", f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "squad/v1", *TINY)
    record = read(where)
    assert record["predictions"] == {"validation": "predictions/validation.json"}
    predictions = json.loads((where / "predictions/validation.json").read_text())
    official = official_squad.evaluate_v1(questions(mirror, "squad/plain_text", 40), predictions)
    assert record["metrics"]["validation"] == pytest.approx(official, rel=1e-6)
    assert len(predictions) == 40 and any(predictions.values())

    # the paired bootstrap's per-example scores give back the recorded metrics on all rows
    outputs = read_outputs(record, "validation")
    every = np.arange(len(outputs.ids))[None, :]
    for name in ("exact_match", "f1"):
        assert outputs.metric(name, every)[0] == pytest.approx(
            record["metrics"]["validation"][name], rel=1e-6)


def test_v2_record_equals_the_official_script_on_its_predictions(mirror, results):
    done = plmbench("run", *V2, f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "squad/v2", *V2[:-2], "task.splits.train=validation")
    metrics = read(where)["metrics"]["validation"]
    predictions = json.loads((where / "predictions/validation.json").read_text())
    odds = json.loads((where / "predictions/validation.null_odds.json").read_text())
    asked = questions(mirror, "squad_v2/squad_v2", 40)
    assert set(odds) == set(predictions) == {qid for qid, _ in asked}
    official = official_squad.evaluate_v2(asked, predictions)
    for name in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
        assert metrics[name.replace("exact", "exact_match")] == pytest.approx(official[name],
                                                                              rel=1e-6)
    outputs = read_outputs(read(where), "validation")  # v2.0's final answers, per question
    every = np.arange(len(outputs.ids))[None, :]
    for name in ("exact_match", "f1"):
        assert outputs.metric(name, every)[0] == pytest.approx(metrics[name], rel=1e-6)


def test_runs_reach_the_squad_board(results):
    done = plmbench("leaderboard", str(results), "--board", "squad")
    assert done.rc == 0, done.err
    header, rule, *rows = [line for line in done.out.splitlines() if line.startswith("|")]
    for label in ("EM [squad/v1]", "F1 [squad/v2]", "HasAns F1", "NoAns EM", "max length"):
        assert label in header
    assert len(rows) == 1 and "bert-tiny-scratch" in rows[0] and "128" in rows[0]


def test_long_contexts_in_one_window_with_longformer(mirror, tmp_path):
    """SQuAD at 1,024 tokens with no windows: one window per question, global attention on it."""
    long = ["model=longformer-tiny-scratch", "task=squad/v1", "task.max_length=1024",
            "task.doc_stride=null", *TINY[1:5]]
    done = plmbench("run", *long, f"results_dir={tmp_path}")
    assert done.rc == 0, done.err
    record = read(run_dir(tmp_path, "squad/v1", *long[1:], label="longformer-tiny-scratch"))
    assert record["status"] == "ok" and set(record["metrics"]["validation"]) == {"exact_match",
                                                                                 "f1"}


def test_a_saved_reader_evaluates_again_to_the_same_scores(mirror, results):
    """``save_model=true`` exports the reader (encoder + span head); a run from that export with
    no training steps scores the dev questions exactly as the run that trained it."""
    trained = [*TINY, "task=squad/v1", "save_model=true"]
    done = plmbench("run", *trained, f"results_dir={results}")
    assert done.rc == 0, done.err
    source = run_dir(results, "squad/v1", *trained)
    assert (source / "model/config.json").is_file()
    again = [*(o for o in TINY if not o.startswith("trainer.max_steps")), "trainer.max_steps=0",
             "task=squad/v1", f"init_from=ckpt:{source}", "label=reloaded", "save_model=true"]
    done = plmbench("run", *again, f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "squad/v1", *again, label="reloaded")
    assert read(where)["metrics"] == read(source)["metrics"]
    # the span head came from the export (a fresh one is drawn from the same seed: not equal)
    first, second = (load_file(d / "model/model.safetensors") for d in (source, where))
    assert first.keys() == second.keys() and "qa_outputs.weight" in first
    assert all(torch.equal(first[name], second[name]) for name in first)
