"""The distillation study end to end at tiny size (conf/experiment/distill_glue_tiny.yaml): one
command pretrains a BERT teacher, distils a student of half its layers from it, fine-tunes both on
RTE and leaves the distill board (conf/board/distill.yaml: the GLUE board with ``reference:
teacher``), whose shares of the teacher's score and parameters match the records'."""

from __future__ import annotations

import pytest

from bench.boards.table import build_table
from bench.boards.text import render_csv, render_markdown
from bench.record import iter_records
from tests.bench.invoke import plmbench_on_mirror


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    result, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "study",
                                         "experiment=distill_glue_tiny")
    assert result.rc == 0, result.err[-2000:]
    records = list(iter_records(results))
    assert records and all(r["status"] == "ok" for r in records)
    by = {(r["label"], r["task"]): r for r in records}
    return results, records, by


def test_the_student_is_distilled_from_the_teacher_it_halves(study):
    _, _, by = study
    teacher = by["teacher", "pretrain/wikipedia"]
    student = by["student", "pretrain/wikipedia"]
    assert student["config"]["objective"]["name"] == "distillation"
    assert student["init_from"] == f"ckpt:{teacher['run_dir']}"
    layers = teacher["config"]["model"]["num_hidden_layers"]
    assert student["config"]["model"]["n_layers"] == layers // 2
    # the student's pretraining cost is the teacher's and its own distillation, summed
    glue = by["student", "glue/rte"]["pretraining"]
    assert glue["runs"] == [teacher["run_dir"], student["run_dir"]]
    for key, value in (("tokens", "train_tokens"), ("flops", "train_flops")):
        assert glue[key] == teacher["throughput"][value] + student["throughput"][value]


def test_the_board_gives_the_students_share_of_the_teachers_score(study):
    results, records, by = study
    table = build_table(records, "distill")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == {"teacher", "student"}
    teacher, student = by["teacher", "glue/rte"], by["student", "glue/rte"]
    assert teacher["board"] == student["board"] == "distill"
    accuracy = {label: by[label, "glue/rte"]["metrics"]["validation"]["accuracy"]
                for label in rows}
    assert rows["student"].score == pytest.approx(100 * accuracy["student"])
    if accuracy["teacher"]:
        assert rows["student"].share == pytest.approx(accuracy["student"] / accuracy["teacher"])
    assert rows["teacher"].parameter_share == 1.0
    assert rows["student"].parameter_share == pytest.approx(
        student["encoder_parameters"] / teacher["encoder_parameters"])
    assert 0 < rows["student"].parameter_share < 1
    markdown = render_markdown(table)
    assert "% of teacher" in markdown
    assert f"{100 * rows['student'].parameter_share:.1f}" in markdown
    assert "parameter_share" in render_csv(table).splitlines()[0]
    assert "% of teacher" in (results / "distill.md").read_text()
