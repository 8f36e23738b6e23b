"""The compression study end to end at tiny size (conf/experiment/compression_tiny.yaml): one
command fine-tunes a bert-tiny-scratch teacher on RTE rows, measures it, quantizes it to int8,
prunes half its heads (Michel et al. 2019's curve in the record, the pruned model exported
smaller) and distils it into a one-layer DistilBERT student, itself quantized; the compression
board gives every row's score, parameters, size and CPU latency against the teacher's. One
study (about a minute on two cores) serves every test here: the four compression paths only meet
on one board."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.boards.table import build_table
from bench.boards.text import render_markdown
from bench.record import iter_records
from lit_models.interop.hf import from_hf
from tests.bench.invoke import plmbench, plmbench_on_mirror
from tests.bench.test_cli import assert_one_error_line


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    result, results = plmbench_on_mirror(tmp_path_factory, "glue", "study",
                                         "experiment=compression_tiny")
    assert result.rc == 0, result.err[-3000:]
    records = list(iter_records(results))
    assert records and all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    return results, {(r["label"], r["task"]): r for r in records}


def test_the_board_measures_every_compressed_model_against_the_teacher(study):
    results, by = study
    table = build_table([r for r in by.values() if r["board"] == "compression"], "compression")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == {"teacher", "teacher-int8", "teacher-pruned", "student", "student-int8"}
    compression = {label: by[label, task]["metrics"]["compression"] for label, task in by
                   if by[label, task]["board"] == "compression"}
    teacher = compression["teacher"]
    accuracy = by["teacher", "glue/rte"]["metrics"]["validation"]["accuracy"]
    assert teacher["score"] == pytest.approx(100 * accuracy)  # the fine-tuned run's own score
    for label, row in rows.items():
        assert row.cells["size (MB)"].mean == pytest.approx(compression[label]["size_mb"])
        assert compression[label]["latency_ms"] > 0 and compression[label]["threads"] >= 1
    # int8 keeps every weight, in a quarter of the bytes (the embeddings stay float)
    assert compression["teacher-int8"]["parameters"] == teacher["parameters"]
    assert rows["teacher-int8"].parameter_share == 1.0
    assert compression["teacher-int8"]["size_mb"] < 0.7 * teacher["size_mb"]
    assert compression["teacher-pruned"]["parameters"] < teacher["parameters"]
    assert compression["student"]["parameters"] < teacher["parameters"]
    assert 0 < rows["student"].parameter_share < 1
    assert "% of teacher" in render_markdown(table)
    assert "% of teacher" in (results / "compression.md").read_text()


def test_head_pruning_records_the_curve_and_exports_the_smaller_model(study):
    _, by = study
    record = by["teacher-pruned", "analysis/head_pruning"]
    analysis = record["analysis"]
    curve = analysis["curve"]
    heads = analysis["heads"]  # bert-tiny-scratch: 2 layers x 2 heads
    assert heads == 4 and [point["heads_kept"] for point in curve] == [4, 3, 2, 1, 0]
    measured = by["teacher", "compression/measure"]["metrics"]
    assert curve[0]["metrics"]["validation"] == measured["validation"]  # nothing pruned yet
    assert curve[0]["importance"] is None
    assert all(len(point["removed"]) == 1 for point in curve[1:])
    pruned = analysis["pruned"]
    assert pruned["heads_kept"] == 2  # task.keep = 0.5
    # the model without the heads scores as the masked one did
    assert record["metrics"]["validation"] == pruned["masked_metrics"]["validation"]
    run_dir = Path(record["run_dir"])
    _, net, _ = from_hf(run_dir / "model")
    assert sum(net.heads_per_layer()) == 2
    assert {int(k): v for k, v in pruned["removed"].items()} == net.config.pruned_heads
    assert record["encoder_parameters"] == sum(p.numel() for p in net.parameters())
    full = json.loads((Path(by["teacher", "glue/rte"]["run_dir"]) / "model/config.json")
                      .read_text())
    assert full.get("pruned_heads", {}) == {}
    page = (run_dir / analysis["page"]).read_text()
    assert page.count("<polyline") == 1 and 'data-plot="curve"' in page
    assert page.count('class="heatmap"') == 4  # the importance behind each step


def test_the_student_learns_from_the_teachers_soft_targets(study):
    _, by = study
    student = by["student", "compression/distill"]
    assert student["config"]["task"]["target"]["name"] == "glue/rte"
    assert student["config"]["model"]["n_layers"] == 1  # every other layer of the teacher's 2
    assert student["steps"] > 0 and "compression" in student["metrics"]
    assert student["config"]["task"]["alpha_cos"] == 1.0  # DistilBERT's L_cos, end to end
    int8 = by["student-int8", "compression/quantize"]
    assert int8["config"]["task"]["target"]["name"] == "glue/rte"  # read from the student's run


def test_a_pruning_without_a_fine_tuned_model_or_with_an_unknown_target_is_one_line(mirror,
                                                                                    tmp_path):
    results = tmp_path / "results"
    result = plmbench("run", "task=analysis/head_pruning", f"results_dir={results}")
    assert result.rc == 2
    assert_one_error_line(result, "works on a fine-tuned run's task", "init_from=ckpt:")
    result = plmbench("run", "task=compression/quantize", "task.target=glue/nope",
                      f"results_dir={results}")
    assert result.rc == 2
    assert_one_error_line(result, "task=glue/nope: there is no conf/task/glue/nope.yaml")
    assert not list(results.rglob("record.json")) or all(
        json.loads(p.read_text())["status"] == "failed" for p in results.rglob("record.json"))


def test_soft_targets_mix_the_teachers_softened_distribution_with_the_task_loss():
    from lit_models.families.distillation import SoftTargets

    teacher_logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 0.3, -0.2]])

    class Teacher(torch.nn.Module):
        def __init__(self, output):
            super().__init__()
            self.unused = torch.nn.Linear(1, 1)
            self.output = output

        def forward(self, batch):
            return self.output

    student = torch.tensor([[1.0, 0.0, 0.0], [0.5, -0.5, 1.0]])
    hard, T, alpha = torch.tensor(0.7), 2.0, 0.3
    mixed = SoftTargets(Teacher(teacher_logits), T, alpha, regression=False)(hard, student, {})
    p = torch.softmax(teacher_logits / T, -1).double()
    q = torch.softmax(student / T, -1).double()
    kl = (p * (p.log() - q.log())).sum(-1).mean()  # Hinton et al.: T^2 KL, batch mean
    assert mixed.item() == pytest.approx(alpha * T**2 * kl.item() + (1 - alpha) * 0.7, rel=1e-5)
    both = (teacher_logits, teacher_logits)
    qa = SoftTargets(Teacher(both), T, 1.0, regression=False)(hard, (student, student), {})
    assert qa.item() == pytest.approx(T**2 * kl.item(), rel=1e-5)  # start and end averaged
    scores = torch.tensor([3.0, 1.0])
    mse = SoftTargets(Teacher(scores), T, 1.0, regression=True)(hard, torch.tensor([2.0, 2.0]), {})
    assert mse.item() == pytest.approx(1.0)


def test_the_cosine_loss_aligns_the_last_hidden_states_of_the_real_forwards():
    """``alpha_cos``: + α_cos mean over non-padding positions of 1 - cos(h_s, h_t), h the last
    hidden states of the student's and the teacher's encoders on the batch (DistilBERT's L_cos),
    against torch's CosineEmbeddingLoss (target 1) over the kept positions."""
    from types import SimpleNamespace

    from lit_models.families.distillation import SoftTargets

    torch.manual_seed(0)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return SimpleNamespace(last_hidden_state=self.proj(x))

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.head = Encoder(), torch.nn.Linear(4, 2)

        def forward(self, batch):
            return self.head(self.encoder(batch["x"]).last_hidden_state[:, 0])

    student, teacher = Classifier(), Classifier()
    batch = {"x": torch.randn(2, 3, 4), "attention_mask": torch.tensor([[1, 1, 0], [1, 1, 1]])}
    hard, T, alpha, alpha_cos = torch.tensor(0.4), 2.0, 0.5, 2.0
    plain = SoftTargets(teacher, T, alpha, regression=False)
    with_cos = SoftTargets(teacher, T, alpha, False, alpha_cos, student.encoder)
    scores = student(batch)
    h_s = student.encoder(batch["x"]).last_hidden_state  # the same forward, recomputed
    h_t = teacher.encoder(batch["x"]).last_hidden_state
    keep = batch["attention_mask"].bool()
    expected = torch.nn.CosineEmbeddingLoss()(h_s[keep], h_t[keep], torch.ones(int(keep.sum())))
    scores = student(batch)  # the forward the loss follows
    got = with_cos(hard, scores, batch) - plain(hard, scores, batch)
    assert got.item() == pytest.approx(alpha_cos * expected.item(), rel=1e-5)
    unpadded = {"x": batch["x"], "input_ids": torch.ones(2, 3, dtype=torch.long)}  # no mask
    every = torch.nn.CosineEmbeddingLoss()(h_s.flatten(0, 1), h_t.flatten(0, 1), torch.ones(6))
    assert (with_cos(hard, student(unpadded), unpadded) - plain(hard, scores, unpadded)).item() \
        == pytest.approx(alpha_cos * every.item(), rel=1e-5)
    got.backward()  # the student's encoder learns from it, the frozen teacher does not
    assert student.encoder.proj.weight.grad.abs().sum() > 0
    assert teacher.encoder.proj.weight.grad is None
