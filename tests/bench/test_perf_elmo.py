"""``plmbench perf model=elmo-*``: ELMo's biLM timed against the same biLM on torch.nn.LSTM, and
the two computing the same loss and layers (in eval mode, clipping off: torch's LSTM has none)."""

import argparse

import pytest
import torch

from bench.perf import measure, model_config, render
from bench.perf_workloads import BASELINE_WORKLOADS

CPU = torch.device("cpu")


def test_the_bilm_is_measured_against_torch_lstm():
    args = argparse.Namespace(batch_size=2, seq_len=8, repeats=1, warmup=0, device="cpu",
                              steps=["pretrain", "finetune", "inference"], attention=["sdpa"],
                              precision="32-true", threads=None)
    report = measure(args, ["model=elmo-tiny"])
    assert report["arch"] == "elmo" and report["skipped"] == ["finetune"]
    for workload in report["workloads"]:
        assert set(workload["results"]) == {"plmbench", "torch nn.LSTM"}
        ours, theirs = workload["results"]["plmbench"], workload["results"]["torch nn.LSTM"]
        assert ours["flops"] > 0 and theirs["flops"] == ours["flops"] and theirs["uncounted"]
        assert theirs["speedup"] == pytest.approx(ours["tokens_per_s"] / theirs["tokens_per_s"])
    assert "| torch nn.LSTM |" in render(report)


@pytest.mark.parametrize("step", ["pretrain", "inference"])
def test_both_compute_the_same_thing_without_clipping(step):
    model = model_config(["model=elmo-tiny", "model.cell_clip=null", "model.proj_clip=null"])
    torch.manual_seed(0)
    workload = BASELINE_WORKLOADS["elmo"][step](model, 3, 9, CPU)
    with torch.no_grad():
        ours, theirs = (impl.net.eval() and impl.run() for impl in
                        workload.implementations.values())
    assert (ours - theirs).abs().max() <= 1e-5
