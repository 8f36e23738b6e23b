"""The GLUE paper's baselines end to end at tiny size (conf/experiment/glue_baselines_tiny.yaml):
one command trains GloVe and ELMo's biLM on the Wikipedia sample, then the BiLSTM on RTE with
each input, and MiniLM-L6 on RTE, and leaves the glue board's BiLSTM, BiLSTM+ELMo and
BiLSTM+ELMo+Attn rows (with the pretraining cost of their inputs) beside MiniLM's; ``plmbench
neighbours`` reads the study's GloVe and biLM."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bench.boards.table import build_table
from bench.record import iter_records
from tests.bench.invoke import plmbench_on_mirror

ROWS = {"BiLSTM", "BiLSTM+ELMo", "BiLSTM+ELMo+Attn"}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    result, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "study",
                                         "experiment=glue_baselines_tiny")
    assert result.rc == 0, result.err[-2000:]
    records = list(iter_records(results))
    assert records and all(r["status"] == "ok" for r in records)
    return results, {r["label"]: r for r in records}, result


def test_the_board_has_the_three_baseline_rows(study):
    _, by, result = study
    table = build_table(list(by.values()), "glue")
    rows = {row.label: row for row in table.rows}
    assert ROWS <= set(rows)
    for label in ROWS:
        accuracy = by[label]["metrics"]["validation"]["accuracy"]
        assert rows[label].score == pytest.approx(100 * accuracy)
        assert by[label]["task"] == "glue/rte" and by[label]["board"] == "glue"
        # GLUE's predictions file (what plmbench significance resamples) gives the accuracy back
        with open(Path(by[label]["run_dir"]) / by[label]["predictions"]["validation"]) as file:
            lines = list(csv.DictReader(file, delimiter="\t"))
        assert [int(line["index"]) for line in lines] == list(range(len(lines)))
        hits = [line["prediction"] == line["label"] for line in lines]
        assert sum(hits) / len(hits) == pytest.approx(accuracy)
    # beside a pretrained Transformer fine-tuned on the same task
    assert rows["minilm-l6"].score == pytest.approx(
        100 * by["minilm-l6"]["metrics"]["validation"]["accuracy"])
    assert by["minilm-l6"]["task"] == "glue/rte"
    assert "BiLSTM+ELMo+Attn" in result.out and "minilm-l6" in result.out  # the printed board


def test_each_row_reads_the_inputs_the_paper_gives_it(study):
    _, by, _ = study
    glove, elmo = by["glove-tiny"], by["elmo-tiny"]
    plain, with_elmo, attention = (by[label]["config"]["model"] for label in sorted(ROWS))
    assert plain["inputs"]["vectors"] == f"ckpt:{glove['run_dir']}" and not plain["attention"]
    assert with_elmo["inputs"]["vectors"] is None
    assert with_elmo["inputs"]["elmo"] == f"ckpt:{elmo['run_dir']}"
    assert attention["attention"] and attention["inputs"]["elmo"] == with_elmo["inputs"]["elmo"]
    # the cost of a row's pretraining is its inputs' training
    assert by["BiLSTM"]["pretraining"]["runs"] == [glove["run_dir"]]
    assert by["BiLSTM"]["pretraining"]["tokens"] == glove["throughput"]["train_tokens"]
    assert by["BiLSTM+ELMo"]["pretraining"]["tokens"] == elmo["throughput"]["train_tokens"]


def test_neighbours_of_a_word_static_and_contextual(study, tmp_path_factory):
    _, by, _ = study
    out = tmp_path_factory.mktemp("neighbours") / "play.json"
    result, _ = plmbench_on_mirror(
        tmp_path_factory, "wikipedia_en_sample", "neighbours", "play",
        f"--vectors=ckpt:{by['glove-tiny']['run_dir']}",
        f"--elmo=ckpt:{by['elmo-tiny']['run_dir']}",
        "--k=2", f"--json={out}", "task.max_train_samples=300",
        "--context=The children play football after school .")
    assert result.rc == 0, result.err[-2000:]
    report = json.loads(out.read_text())
    assert len(report["static"]) == 2 and all(w != "play" for w, _ in report["static"])
    [entry] = report["contextual"]
    assert entry["query"] == "The children play football after school ."
    assert len(entry["neighbours"]) == 2
    assert all(" play " in f" {sentence} " for sentence, _ in entry["neighbours"])
    cosines = [c for _, c in entry["neighbours"]]
    assert cosines == sorted(cosines, reverse=True)
    assert "## Nearest neighbours of \"play\"" in result.out
