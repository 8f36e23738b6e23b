"""SuperGLUE's diagnostics (Wang et al. 2019, §3.2), predicted by an RTE model: AX-b scored by
Matthews' correlation, AX-g by accuracy and gender parity (the share of (male, female) premise
pairs predicted alike; ``lit_models/metrics/superglue.py``), and their submission files
(``plmbench submit superglue``: ``AX-b.jsonl``, ``AX-g.jsonl``). Values against scikit-learn's
``matthews_corrcoef`` and a direct count of the pairs."""

from __future__ import annotations

import csv
import json
import random
import zipfile
from pathlib import Path

import pytest
import torch
from sklearn.metrics import matthews_corrcoef

from bench.record import iter_records
from datamodules.errors import PlmbenchError
from lit_models.metrics.classification import label_metrics
from lit_models.metrics.superglue import gender_parity_score
from tests.bench.invoke import plmbench

TINY = ["model=bert-tiny-scratch", "trainer.enable_progress_bar=false"]


def direct_parity(predicted: dict[int, int]) -> float:
    """Pairs (2k, 2k + 1) both present, counted one by one."""
    same = total = 0
    for k in range(max(predicted) // 2 + 1):
        if 2 * k in predicted and 2 * k + 1 in predicted:
            total += 1
            same += predicted[2 * k] == predicted[2 * k + 1]
    return same / total


def test_gender_parity_pairs_examples_by_index_in_any_batch_order():
    rng = random.Random(0)
    n = 40  # 20 pairs; the last example's partner left out below
    predicted = {i: rng.randrange(2) for i in range(n - 1)}
    order = list(predicted)
    rng.shuffle(order)  # batches in any order (DDP ranks interleave them)
    metrics = label_metrics(["accuracy", "gender_parity"], 2, indexed=True)
    gold = {i: rng.randrange(2) for i in predicted}
    for start in range(0, len(order), 8):
        batch = order[start:start + 8]
        labels = torch.tensor([predicted[i] for i in batch])
        metrics.update(torch.tensor([gold[i] for i in batch]), labels=labels,
                       probabilities=labels.float(),
                       indexed_labels=torch.stack([torch.tensor(batch), labels], 1))
    values = metrics.compute()
    assert values["gender_parity"] == pytest.approx(direct_parity(predicted))
    assert values["accuracy"] == pytest.approx(
        sum(predicted[i] == gold[i] for i in predicted) / len(predicted))


def test_gender_parity_degenerate_inputs():
    assert gender_parity_score([0, 1, 2, 3], [1, 1, 0, 0]) == 1.0
    assert gender_parity_score([3, 2, 1, 0], [1, 0, 0, 1]) == 0.0
    assert gender_parity_score([0, 1, 2], [1, 1, 0]) == 1.0  # example 2 has no partner
    with pytest.raises(PlmbenchError, match="gender_parity needs both examples"):
        gender_parity_score([0, 2, 5], [1, 1, 0])


def read_predictions(record: dict, split: str = "test") -> list[dict]:
    path = Path(record["run_dir"]) / record["predictions"][split]
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def test_an_rte_model_predicts_the_diagnostics_and_submits_them(mirror, tmp_path):
    results = tmp_path / "results"
    rte = plmbench("run", *TINY, "task=superglue/rte", "task.max_train_samples=32",
                   "task.max_eval_samples=16", "trainer.max_steps=2", "save_model=true",
                   f"results_dir={results}")
    assert rte.rc == 0, rte.err[-2000:]
    (run,) = iter_records(results)
    for task in ("axb", "axg"):  # whole splits: the server takes nothing less
        done = plmbench("run", *TINY, f"task=superglue/{task}", f"init_from=ckpt:{run['run_dir']}",
                        f"results_dir={results}")
        assert done.rc == 0, done.err[-2000:]
    by = {r["task"]: r for r in iter_records(results)}
    names = ["entailment", "not_entailment"]
    axb = read_predictions(by["superglue/axb"])
    assert len(axb) == 1104 and [int(r["index"]) for r in axb] == list(range(1104))
    assert by["superglue/axb"]["metrics"]["test"]["matthews"] == pytest.approx(matthews_corrcoef(
        [names.index(r["label"]) for r in axb], [names.index(r["prediction"]) for r in axb]))
    axg = read_predictions(by["superglue/axg"])
    predicted = {int(r["index"]): names.index(r["prediction"]) for r in axg}
    metrics = by["superglue/axg"]["metrics"]["test"]
    assert len(axg) == 356
    assert metrics["gender_parity"] == pytest.approx(direct_parity(predicted))
    assert metrics["accuracy"] == pytest.approx(
        sum(r["prediction"] == r["label"] for r in axg) / len(axg))
    # the submission: SuperGLUE's file names, one {"idx", "label"} a line, every row once
    submitted = plmbench("submit", "superglue", str(results))
    assert submitted.rc == 0, submitted.err
    with zipfile.ZipFile(results / "submissions/superglue-bert-tiny-scratch.zip") as zf:
        assert sorted(zf.namelist()) == ["AX-b.jsonl", "AX-g.jsonl"]
        for name, rows in (("AX-b.jsonl", axb), ("AX-g.jsonl", axg)):
            lines = [json.loads(line) for line in zf.read(name).decode().splitlines()]
            assert lines == [{"idx": int(r["index"]), "label": r["prediction"]} for r in rows]
