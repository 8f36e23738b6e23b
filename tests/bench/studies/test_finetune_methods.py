"""The fine-tuning methods end to end at tiny size (conf/experiment/finetune_methods_tiny.yaml):
one command fine-tunes bert-tiny-scratch on RTE under every method (full, frozen, a frozen scalar
mix, adapters, ULMFiT), each run leaves a record that counts what it trained, and the
finetune_methods board has a row per method, its trained parameters in a column and on the
HTML plot's cost axis. A frozen encoder feeds NER's tagging head too, and a method that cannot
apply (frozen pretraining) is refused in one line."""

from __future__ import annotations

import statistics

import pytest

from bench.boards.cells import Cell
from bench.boards.config import Board
from bench.boards.table import build_table
from bench.record import iter_records
from bench.studies.claims import HEADER
from tests.bench.invoke import plmbench, plmbench_on_mirror

METHODS = {"full", "frozen", "frozen-mix", "adapters", "ulmfit"}
TINY = ["model=bert-tiny-scratch", "task.max_train_samples=32", "task.max_eval_samples=16",
        "task.max_length=64", "trainer.max_steps=2", "trainer.enable_progress_bar=false"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    result, results = plmbench_on_mirror(tmp_path_factory, "glue", "study",
                                         "experiment=finetune_methods_tiny",
                                         "study.tasks=glue/rte", "trainer.max_steps=2")
    assert result.rc == 0, result.err[-2000:]
    records = {r["label"].split("/")[1]: r for r in iter_records(results)}
    assert set(records) == METHODS and all(r["status"] == "ok" for r in records.values())
    return results, records


def test_every_method_records_what_it_trained(study):
    _, records = study
    full, frozen, mix = records["full"], records["frozen"], records["frozen-mix"]
    head = full["parameters"] - full["encoder_parameters"]
    assert full["trained_parameters"] == full["parameters"]
    assert frozen["trained_parameters"] == head  # the classifier over the frozen pooler
    assert mix["trained_parameters"] == head + 3 + 1  # + the mix's 3 weights and gamma
    assert mix["config"]["finetune"] == {"_target_": "lit_models.core.finetune.frozen.Frozen",
                                         "name": "frozen", "layers": [0, 1, 2],
                                         "combine": "mix"}
    adapters = records["adapters"]
    hidden, layers = 128, 2  # bert-tiny-scratch
    adapter = 2 * 64 * hidden + 64 + hidden  # down and up projections with biases
    norms = (1 + 2 * layers) * 2 * hidden  # embeddings' and each layer's two LayerNorms
    assert adapters["parameters"] == full["parameters"] + 2 * layers * adapter
    assert adapters["trained_parameters"] == 2 * layers * adapter + norms + head
    ulmfit = records["ulmfit"]  # 2 steps, a group a step: head + pooler, then the top layer
    assert head < ulmfit["trained_parameters"] < ulmfit["parameters"]
    assert ulmfit["config"]["optim"]["schedule"] == "slanted_triangular"
    assert ulmfit["config"]["optim"]["layerwise_lr_decay"] == pytest.approx(1 / 2.6)


def test_the_board_has_a_row_per_method_against_its_trained_parameters(study):
    results, records = study
    table = build_table(records.values(), "finetune_methods")
    rows = {row.label: row for row in table.rows if not row.baseline}
    assert set(rows) == {f"bert-tiny-scratch/{method}" for method in METHODS}
    for label, row in rows.items():
        trained = records[label.split("/")[1]]["trained_parameters"]
        assert row.parameters == trained  # the board's size: what the method trained
        assert list(row.cells["trained parameters"].values) == [trained]
        assert row.cells["RTE (acc)"].n == 1
    html = plmbench("leaderboard", str(results), "--board", "finetune_methods",
                    "--format", "html")
    assert html.rc == 0 and "score against trained parameters" in html.out


def test_a_board_of_finetune_columns_shows_frozen_runs_beside_fine_tuning(study):
    """The domain board's SciBERT columns: one model's frozen and fine-tuned runs in one row, the
    frozen ones in columns of their own that the score leaves out."""
    _, records = study
    one_model = [{**records[method], "label": "bert-tiny-scratch", "board": "scibert"}
                 for method in ("full", "frozen")]
    board = Board.from_config({"name": "scibert", "rows": "label", "finetune_columns": ["frozen"],
                               "aggregate": {"method": "task_macro"}})
    (row,) = build_table(one_model, board).rows
    for method, label in (("full", "RTE (acc)"), ("frozen", "RTE (acc) (frozen)")):
        assert list(row.cells[label].values) == [
            records[method]["metrics"]["validation"]["accuracy"]]
    assert row.score == pytest.approx(records["full"]["metrics"]["validation"]["accuracy"])


def test_trained_parameters_show_their_range_over_tasks_not_a_seed_interval():
    """A frozen encoder's heads differ between tasks (2 labels: 258, 3 tags: 387): the column
    spanning both shows the range; values equal once formatted show once."""
    board = Board.from_config({"name": "t", "columns": [
        {"tasks": "*", "label": "trained", "value": "trained_parameters", "scale": 1,
         "format": "#.3g", "varies": False}]})
    (column,) = board.columns
    assert column.text(Cell.of([("a", 258.0), ("b", 387.0)])) == "258.–387."
    assert column.text(Cell.of([("a", 22_713_218.0), ("b", 22_713_603.0)])) == "2.27e+07"
    assert column.text(Cell.of([("a", 258.0)])) == "258."


def test_a_frozen_encoder_feeds_the_tagging_head(tmp_path_factory):
    result, results = plmbench_on_mirror(tmp_path_factory, "ncbi_disease", "run", *TINY,
                                         "task=ner/ncbi_disease", "finetune=frozen",
                                         "finetune.layers=[1,2]", "finetune.combine=sum")
    assert result.rc == 0, result.err[-2000:]
    (record,) = iter_records(results)
    assert record["status"] == "ok" and "f1" in record["metrics"]["test"]
    assert record["trained_parameters"] == record["parameters"] - record["encoder_parameters"]


def test_a_method_that_cannot_pretrain_is_refused_in_one_line(tmp_path_factory):
    result, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "run", *TINY,
                                         "task=pretrain/wikipedia", "finetune=adapters")
    assert result.rc == 2
    assert "pretrains, and finetune=adapters applies to fine-tuning" in result.err_lines[-1]


def test_the_feature_based_claim_compares_frozen_features_with_fine_tuning(tmp_path_factory):
    """BERT's Table 7 claim (conf/claims/feature_based.yaml) runs its two NER arms and gives the
    tagging board's difference of the frozen row and the fine-tuned one, with a verdict."""
    done, results = plmbench_on_mirror(tmp_path_factory, "ncbi_disease", "claims",
                                       "experiment=claims_tiny", "study.claims=[feature_based]")
    assert done.rc == 0, done.err[-2000:]
    records = {r["label"]: r for r in iter_records(results)}
    assert set(records) == {"bert-tiny-scratch/full", "bert-tiny-scratch/frozen-sum"}
    frozen = records["bert-tiny-scratch/frozen-sum"]
    assert frozen["config"]["finetune"]["layers"] == [-2, -1]
    assert frozen["trained_parameters"] == frozen["parameters"] - frozen["encoder_parameters"]
    table = build_table(records.values(), "tagging")
    a, b = (next(r for r in table.rows if r.label == label)
            for label in ("bert-tiny-scratch/full", "bert-tiny-scratch/frozen-sum"))
    (row,) = [line for line in (results / "claims.md").read_text().splitlines()
              if line.startswith("| feature_based")]
    cells = dict(zip(HEADER, (c.strip() for c in row.split("|")[1:-1]), strict=True))
    assert cells["paper"].startswith("Devlin et al. 2019 (BERT), §5.3, Table 7")
    assert cells["test"] == "B not worse than A by more than 1 point"  # the claim's margin
    # decided on dev alone: the F1 (dev) columns' difference (the test split's is shown apart)
    dev = [c for c in table.columns if c.value == "metrics.validation.f1"]
    effect = statistics.fmean(100 * (b.cells[c.label].mean - a.cells[c.label].mean)
                              for c in dev)
    shown = cells["effect B - A [95% CI]"]  # tiny arms may both find no entity: an exact 0
    assert shown.startswith(f"{effect:+.2f} [") or (effect == 0 and shown.startswith("+0 exactly"))
    assert "on the test split (reported, not deciding)" in (results / "claims.md").read_text()
    assert cells["verdict"] in ("supported", "contradicted", "inconclusive", "no evidence")


def test_a_method_whose_weights_transformers_cannot_hold_refuses_save_model(tmp_path_factory):
    result, _ = plmbench_on_mirror(tmp_path_factory, "glue", "run", *TINY, "task=glue/rte",
                                   "finetune=adapters", "save_model=true")
    assert result.rc == 2
    assert "finetune=adapters adds weights" in result.err_lines[-1]


def test_a_bilstm_model_is_no_pretrained_net_to_freeze(tmp_path_factory):
    result, _ = plmbench_on_mirror(tmp_path_factory, "glue", "run", *TINY[1:], "model=bilstm-tiny",
                                   "task=glue/rte", "finetune=frozen")
    assert result.rc == 2
    assert "model.inputs.encoder=hf:<dir>" in result.err_lines[-1]
