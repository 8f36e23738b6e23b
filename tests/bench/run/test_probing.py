"""``plmbench run task=probing/ner`` end to end on two untrained tiny encoders of different depth
(NCBI-disease sentences of the mirror): each record holds a probe per layer (the embeddings and
every layer), the scalar mix with weights that sum to one, and the control task whose accuracy
the selectivity subtracts; the probing board gives each model's accuracy by layer and its page
draws one curve per model. A wrong probe setting is one line before anything is read."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.boards.html import render_html
from bench.boards.table import build_table
from bench.record import iter_records
from tests.bench.invoke import mirror_with, plmbench, plmbench_on_mirror
from tests.bench.test_cli import assert_one_error_line

SAMPLES = 16
RUN = ["run", "task=probing/ner", "init_from=scratch", f"task.max_train_samples={4 * SAMPLES}",
       f"task.max_eval_samples={SAMPLES}", "task.probe.epochs=3", "task.max_length=512",
       "trainer.enable_progress_bar=false"]


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """Records of bert-tiny-scratch (2 layers) and distilbert-tiny-scratch (1 layer), in one results
    directory."""
    result, results = plmbench_on_mirror(tmp_path_factory, "ncbi_disease", *RUN,
                                         "model=bert-tiny-scratch")
    assert result.rc == 0, result.err[-3000:]
    result = plmbench(*RUN, "model=distilbert-tiny-scratch", f"results_dir={results}")
    assert result.rc == 0, result.err[-3000:]
    records = list(iter_records(results))
    assert len(records) == 2 and all(r["status"] == "ok" for r in records)
    return {r["model"]: r for r in records}


def test_the_record_holds_a_probe_per_layer_the_mix_and_the_control_task(probed):
    validation = pd.read_parquet(mirror_with("ncbi_disease") / "ncbi_disease" / "ncbi_disease"
                                 / "validation.parquet").head(SAMPLES)
    for model, layers in (("bert-tiny-scratch", 2), ("distilbert-tiny-scratch", 1)):
        record = probed[model]
        metrics, findings = record["metrics"]["validation"], record["analysis"]
        assert len(findings["layers"]) == layers + 1  # the embeddings, then each layer
        assert findings["eval_items"] == sum(len(words) for words in validation["tokens"])
        assert findings["labels"] == ["O", "B-Disease", "I-Disease"]
        assert all(0 <= metrics[f"layer_{i}"] <= 1 for i in range(layers + 1))
        assert sum(findings["mix_weights"]) == pytest.approx(1.0)
        assert metrics["centre_of_gravity"] == pytest.approx(
            sum(i * w for i, w in enumerate(findings["mix_weights"])))
        assert 0 <= metrics["centre_of_gravity"] <= layers
        assert metrics["best_layer"] == max(range(layers + 1), key=findings["layers"].__getitem__)
        for i in range(layers + 1):
            assert metrics[f"selectivity_{i}"] == pytest.approx(
                metrics[f"layer_{i}"] - metrics[f"control_{i}"])
        assert metrics["selectivity_max"] == max(findings["selectivity"])


def test_the_board_gives_the_accuracy_by_layer_and_draws_a_curve_per_model(probed):
    table = build_table(list(probed.values()), "probing")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == {"bert-tiny-scratch", "distilbert-tiny-scratch"}
    for model, row in rows.items():
        metrics = probed[model]["metrics"]["validation"]
        layers = {label for label in row.cells if label.startswith("layer ")}
        assert len(layers) == len(probed[model]["analysis"]["layers"])  # what the model has
        for i in range(len(layers)):
            assert row.cells[f"layer {i}"].mean == pytest.approx(metrics[f"layer_{i}"])
        assert row.cells["mix"].mean == pytest.approx(metrics["mix"])
    html = render_html(table)
    assert 'data-plot="curves-0"' in html and "probing/ner: by layer" in html
    assert html.count('<polyline points="') == 2  # one line per model, through its layers
    assert html.count('<circle cx=') >= 5  # 3 + 2 layers, and the other plots' points
    assert all(html.count(f'stroke-width="1.5" data-series="{model}"') == 1 for model in rows)


def test_a_wrong_probe_is_one_line(tmp_path):
    results = tmp_path / "results"
    for override, fragment in (("task.probe.kind=svm", "task.probe.kind=svm: use one of"),
                               ("+task.probe.layers=2", "unknown key task.probe.layers")):
        result = plmbench("run", "task=probing/ner", "model=bert-tiny-scratch", override,
                          f"results_dir={results}")
        assert result.rc == 2
        assert_one_error_line(result, fragment)
