"""The compute-matched comparison end to end at tiny size (pretrain_compare_tiny.yaml):
one command pretrains BERT, RoBERTa, ALBERT, ELECTRA, SpanBERT and DeBERTa with one vocabulary
and one budget, each with its paper's recipe, and BERT's ablations towards RoBERTa's recipe,
fine-tunes each on RTE, and leaves a row per architecture and ablation on the pretrain board and
on the GLUE board, the latter with each model's parameters, pretraining cost and recipe (copied
from its pretraining record into the fine-tuning record,
bench/run/provenance.py pretraining_costs)."""

from __future__ import annotations

import pytest

from bench.boards.table import build_table
from bench.record import iter_records
from lit_models.interop.hf import from_hf
from tests.bench.invoke import plmbench_on_mirror

ARCHS = ("bert", "roberta", "albert", "electra", "spanbert", "deberta")
ABLATIONS = {"bert-tiny-scratch/dynamic", "bert-tiny-scratch/dynamic-no-nsp"}
ROWS = {f"{arch}-tiny-scratch" for arch in ARCHS} | ABLATIONS
#: each row's recipe as the boards show it: the presets' papers, the ablations' one change each
RECIPES = {
    "bert-tiny-scratch": "mlm_nsp: NSP, static x10 tokens, 64 tok (pairs)",
    "bert-tiny-scratch/dynamic": "mlm_nsp: NSP, dynamic tokens, 64 tok (pairs)",
    "bert-tiny-scratch/dynamic-no-nsp": "mlm: dynamic tokens, 64 tok (full-sentences)",
    "roberta-tiny-scratch": "mlm: dynamic tokens, 64 tok (full-sentences)",
    "albert-tiny-scratch": "mlm_sop: SOP, dynamic n-grams <=3, 64 tok (pairs)",
    "spanbert-tiny-scratch": "sbo: dynamic spans Geo(0.2), 64 tok (full-sentences)",
}
SLOTS = 4 * 8 * 64  # steps x sequences x tokens: the tiny budget


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    result, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "study",
                                         "experiment=pretrain_compare_tiny")
    assert result.rc == 0, result.err[-2000:]
    records = list(iter_records(results))
    assert records and all(r["status"] == "ok" for r in records)
    pretraining = {r["label"]: r for r in records if r["task"] == "pretrain/wikipedia"}
    glue = {r["label"]: r for r in records if r["task"] == "glue/rte"}
    return results, records, pretraining, glue


def test_every_architecture_pretrains_on_one_vocabulary_and_budget(study):
    _, _, pretraining, _ = study
    assert set(pretraining) == ROWS
    for label, record in pretraining.items():
        model = record["config"]["model"]
        assert (model["vocabulary_family"], model["lowercase"]) == ("wordpiece", True), label
        task = record["config"]["task"]
        assert (task["batch_size"], task["max_length"], task["lr"]) == (8, 64, 5e-4), label
        assert record["config"]["optim"]["lr"] == 5e-4 and record["steps"] == 4, label
        # the same token slots: every step's rows are packed full but for the examples'
        # whole-sentence ends, so the non-pad tokens differ by those ends only
        throughput = record["throughput"]
        slots = throughput["train_tokens"] / (1 - throughput["train_padding_fraction"])
        assert slots == pytest.approx(SLOTS), label
        assert throughput["train_tokens"] == pytest.approx(SLOTS, rel=0.05), label
    vocabularies = {r["config"]["model"]["vocab_size"] for r in pretraining.values()}
    assert max(vocabularies) - min(vocabularies) <= 4  # one vocabulary, each arch's own specials
    for label, recipe in RECIPES.items():
        assert pretraining[label]["recipe"]["text"].startswith(recipe), label
        assert pretraining[label]["recipe"]["text"].endswith("batch 8, 4 steps, lr 0.0005, "
                                                             "warmup 1%"), label
    static = pretraining["bert-tiny-scratch"]["config"]["objective"]
    assert (static["name"], static["static"], static["dupe_factor"]) == ("mlm_nsp", True, 10)


def test_both_boards_have_a_row_per_architecture_with_its_cost(study):
    results, records, pretraining, glue = study
    assert set(build_table(records, "pretrain").labels) >= {"tokens", "FLOPs", "parameters"}
    board = build_table(records, "pretrain")
    assert {row.label for row in board.rows} == ROWS and board.text_columns == ["recipe"]
    table = build_table(records, "glue")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == ROWS == set(glue)
    assert "glue" in (results / "glue.md").read_text()
    for label, row in rows.items():
        source = pretraining[label]
        assert row.cells["pretraining tokens"].mean == source["throughput"]["train_tokens"]
        assert row.cells["pretraining FLOPs"].mean == source["throughput"]["train_flops"]
        assert glue[label]["pretraining"]["runs"] == [source["run_dir"]]
        assert row.compute == source["throughput"]["train_flops"]  # the HTML board's x axis
        # the backbone fine-tuned: the pretrained export's encoder (ELECTRA: the discriminator)
        _, encoder, _ = from_hf(f"{source['run_dir']}/model", with_heads=False)
        assert row.cells["parameters"].mean == sum(p.numel() for p in encoder.parameters())
        assert row.texts["recipe"] == source["recipe"]["text"]  # the pretraining's recipe
        # the GLUE score of one task is that task's accuracy x 100
        accuracy = glue[label]["metrics"]["validation"]["accuracy"]
        assert row.score == pytest.approx(100 * accuracy) and row.n_scored == 1
