"""``task.batch_size`` is the global batch of one optimizer step (``datamodules/batching.py``):
the first optimizer step of two gloo processes, each loading 16 examples, has the gradients of
one process loading 32, and of one process accumulating two batches of 16; each record names its
world size, per-process batch, accumulation and global batch.

Tolerance: every gradient is the mean over the same 32 examples, computed in float32 in another
order (each rank's mean of 16, averaged by DDP's all-reduce; or the mean of two accumulated
halves). Reordering a float32 sum of n terms moves it by about n x 2^-24 of the terms'
magnitudes: with 32 examples x at most 128 positions behind a weight's gradient, a few 1e-5 of the
largest gradient of the tensor. The tolerance is 1e-4 of that largest value (and 1e-7 absolute for
a tensor of near-zero gradients). The one-process step on the first 16 examples alone, what each
rank's step would be if a rank's batch were the recipe's, differs by far more: the test can fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.bench.invoke import mirror_with
from tests.bench.run.ddp_ranks import launch

#: no dropout: the ranks draw other masks than one process
DETERMINISTIC = ["model.hidden_dropout_prob=0", "model.attention_probs_dropout_prob=0",
                 "task.classifier_dropout=0", "task.max_train_samples=64",
                 "task.max_eval_samples=5", "trainer.gradient_clip_val=0"]


def case(name: str, gradients: Path, *overrides: str) -> dict:
    return {"name": name, "arch": "bert", "task": "glue/mrpc", "max_steps": 1,
            "overrides": [*DETERMINISTIC, *overrides,
                          "finetune._target_=tests.bench.run.first_step.FirstGradients",
                          f"+finetune.path={gradients / name}.pt"]}


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> Path:
    mirror, results = mirror_with("glue"), tmp_path_factory.mktemp("first_step")
    launch([case("one", results, "task.batch_size=32"),
            case("accumulated", results, "task.batch_size=32",
                 "trainer.accumulate_grad_batches=2"),
            case("half", results, "task.batch_size=16")], results, 1, mirror)
    launch([case("two", results, "task.batch_size=32")], results, 2, mirror)
    return results


def close(ours: dict, theirs: dict) -> bool:
    return ours.keys() == theirs.keys() and all(
        (ours[k] - theirs[k]).abs().max() <= 1e-4 * theirs[k].abs().max() + 1e-7 for k in ours)


def batching(results: Path, world: int, name: str) -> dict:
    return json.loads((results / f"world{world}" / name / "record.json").read_text())["batching"]


def test_two_processes_take_the_first_step_of_one_process_with_the_global_batch(steps):
    one, two = torch.load(steps / "one.pt"), torch.load(steps / "two.pt")
    assert len(one) > 10 and close(two, one)
    assert batching(steps, 2, "two") == {"world_size": 2, "per_process_batch": 16,
                                         "accumulate_grad_batches": 1, "global_batch": 32}


def test_accumulation_splits_the_global_batch_too(steps):
    one, accumulated = torch.load(steps / "one.pt"), torch.load(steps / "accumulated.pt")
    assert close(accumulated, one)
    assert batching(steps, 1, "accumulated") == {
        "world_size": 1, "per_process_batch": 16, "accumulate_grad_batches": 2,
        "global_batch": 32}


def test_a_step_on_half_the_batch_is_another_step(steps):
    assert not close(torch.load(steps / "half.pt"), torch.load(steps / "one.pt"))
