"""T5's objective study end to end at tiny size (conf/experiment/t5_objectives_tiny.yaml): one
command pretrains t5-tiny-scratch under each of the seven objective modes with one vocabulary and
one budget, fine-tunes every checkpoint on RTE, AESLC and WMT'16 En-Ro (a fixture in the hub's
schema), and leaves a row per objective on the t5_objectives board with its GLUE score, ROUGE,
BLEU and pretraining cost copied from the pretraining run it started from."""

from __future__ import annotations

import datasets
import pytest

from bench.boards.table import build_table
from bench.record import iter_records
from tests import hub_fixtures
from tests.bench.invoke import plmbench

OBJECTIVES = {"prefix_lm": "t5_prefix_lm", "bert_style": "t5_bert_style",
              "deshuffling": "t5_deshuffling", "mass_style": "t5_mass_style",
              "replace_spans_15": "t5_replace_spans", "drop_tokens": "t5_drop_tokens",
              "span_corruption_3": "span_corruption"}
ROWS = {f"t5-tiny-scratch/{name}" for name in OBJECTIVES}
FINE_TUNING = {"glue/rte", "summarization/aeslc", "translation/wmt16_en_ro"}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = hub_fixtures.linked_mirror(tmp_path_factory.mktemp("mirror"), *hub_fixtures.WMT)
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(root))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.mktemp("hf")))
        result = plmbench("study", "experiment=t5_objectives_tiny", f"results_dir={results}")
    assert result.rc == 0, result.err[-2000:]
    records = list(iter_records(results))
    assert records and all(r["status"] == "ok" for r in records)
    return results, records


def test_every_objective_pretrains_on_one_budget_and_vocabulary(study):
    _, records = study
    pretraining = {r["label"]: r for r in records if r["task"] == "pretrain/wikipedia"}
    assert set(pretraining) == ROWS
    for label, record in pretraining.items():
        config = record["config"]
        assert config["objective"]["name"] == OBJECTIVES[label.split("/")[1]]
        assert (config["task"]["batch_size"], config["task"]["max_length"]) == (8, 64)
        assert (config["optim"]["name"], config["optim"]["lr"], record["steps"]) == (
            "adafactor", 1e-2, 3)
        assert record["throughput"]["train_flops"] > 0
    assert len({r["tokenizer"] for r in pretraining.values()}) == 1  # one vocabulary
    # the same raw blocks: full-text targets (BERT-style, MASS, deshuffling) decode more
    flops = {label.split("/")[1]: r["throughput"]["train_flops"]
             for label, r in pretraining.items()}
    assert flops["bert_style"] > flops["span_corruption_3"] < flops["mass_style"]


def test_a_board_row_per_objective_with_glue_rouge_bleu_and_cost(study):
    results, records = study
    pretraining = {r["label"]: r for r in records if r["task"] == "pretrain/wikipedia"}
    fine_tuned = [r for r in records if r["task"] != "pretrain/wikipedia"]
    assert {(r["label"], r["task"]) for r in fine_tuned} == {
        (row, task) for row in ROWS for task in FINE_TUNING}
    assert {r["board"] for r in fine_tuned} == {"t5_objectives"}
    assert "GLUE score" in (results / "t5_objectives.md").read_text()
    table = build_table(records, "t5_objectives")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == ROWS
    for label, row in rows.items():
        by_task = {r["task"]: r for r in fine_tuned if r["label"] == label}
        rte = by_task["glue/rte"]["metrics"]["validation"]["accuracy"]
        assert row.score == pytest.approx(100 * rte) and row.n_scored == 1  # GLUE only
        rouge = by_task["summarization/aeslc"]["metrics"]["validation"]["rouge2"]
        assert row.cells["AESLC R-2"].mean == rouge
        bleu = by_task["translation/wmt16_en_ro"]["metrics"]["test"]["bleu"]
        assert row.cells["EnRo BLEU"].mean == bleu
        source = pretraining[label]["throughput"]
        assert row.cells["pretraining tokens"].mean == source["train_tokens"]
        assert row.cells["pretraining FLOPs"].mean == source["train_flops"]
