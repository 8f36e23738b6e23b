"""The issue's GPU targets, measured with ``plmbench perf`` as a user runs it (bf16 autocast,
fp32 weights): BERT-base pretraining at sequence 128 at least 1.5x transformers' sdpa step and
at least 50% MFU on an H100 or H200; the same table for every other encoder is printed (and
written to $PLMBENCH_PERF_JSON when set) for docs/benchmarks.md. The fine-tuning and inference
steps of every architecture must not be slower than transformers' best."""

import argparse
import json
import os

import pytest
import torch

from bench.perf.measure import measure, render
from lit_models.archs import ARCHS
from lit_models.measure.peak_flops import chip
from tests.conftest import scratch_preset_name


def args(**changes) -> argparse.Namespace:
    values = dict(batch_size=128, seq_len=128, repeats=10, warmup=5, device="cuda",
                  steps=["pretrain", "finetune", "inference"], attention=["sdpa", "eager"],
                  precision="bf16-mixed", threads=None)
    return argparse.Namespace(**{**values, **changes})


def record(report: dict) -> None:
    print(render(report))
    if os.environ.get("PLMBENCH_PERF_JSON"):
        with open(os.environ["PLMBENCH_PERF_JSON"], "a") as out:
            out.write(json.dumps(report) + "\n")


def test_bert_base_pretraining_beats_transformers_at_half_the_peak():
    report = measure(args(steps=["pretrain"]), ["model=bert-base-scratch"])
    record(report)
    results = report["workloads"][0]["results"]
    assert results["transformers sdpa"]["speedup"] >= 1.5
    if chip(torch.cuda.get_device_name()) in ("h100 sxm", "h200 sxm"):
        assert results["plmbench"]["mfu"] >= 0.5


def base_preset(name: str) -> str:
    """The architecture's BERT-base-sized from-scratch preset (GPT-2's is called small)."""
    return next(preset for size in ("base", "small") if (preset := scratch_preset_name(name, size)))


@pytest.mark.parametrize("preset", sorted(base_preset(name) for name in ARCHS))
def test_every_architecture_is_no_slower_than_transformers(preset):
    report = measure(args(batch_size=32), [f"model={preset}"])
    record(report)
    for workload in report["workloads"]:
        fastest = min(r["step_ms"] for name, r in workload["results"].items()
                      if name != "plmbench")
        assert workload["results"]["plmbench"]["step_ms"] <= 1.05 * fastest, workload["step"]
