"""The data-only baseline rows against scikit-learn and scipy on the full dev sets: CoLA's
majority class has Matthews correlation 0 (torchmetrics gave it 0.0256), STS-B's mean score
correlates 0 with the gold scores (scipy: undefined, NaN), RTE's majority class is as
accurate as scikit-learn says."""

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from bench.boards.baselines import baseline_records
from bench.compose import compose_config
from tests.conftest import require

sk = require("sklearn.metrics")


def baseline(task: str) -> dict:
    config = compose_config([f"task={task}", "model=bert-tiny-scratch"], "")
    record = {"status": "ok", "board": "glue",
              "config": {"task": OmegaConf.to_container(config.task, resolve=True)}}
    (made,) = baseline_records([record], "glue")
    return made.metrics["validation"]


@pytest.mark.parametrize(("task", "config", "metric"), [("glue/cola", "cola", "matthews"),
                                                        ("glue/rte", "rte", "accuracy")])
def test_majority_class_rows_equal_scikit_learn(mirror, task, config, metric):
    train = pq.read_table(mirror / f"glue/{config}/train.parquet")["label"].to_pylist()
    dev = pq.read_table(mirror / f"glue/{config}/validation.parquet")["label"].to_pylist()
    majority = max(set(train), key=train.count)
    expected = {"matthews": sk.matthews_corrcoef, "accuracy": sk.accuracy_score}[metric](
        dev, [majority] * len(dev))
    got = baseline(task)
    assert got == {metric: pytest.approx(expected, abs=1e-7)}
    if metric == "matthews":
        assert got[metric] == 0.0


def test_mean_score_row_correlates_zero(mirror):
    assert baseline("glue/stsb") == {"pearson": 0.0, "spearman": 0.0}
