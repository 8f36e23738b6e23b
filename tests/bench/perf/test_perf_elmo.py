"""``plmbench perf model=elmo-*``: ELMo's biLM timed against the same biLM on torch.nn.LSTM, and
the two computing the same loss and layers (in eval mode, clipping off: torch's LSTM has none).
``plmbench perf model=bilstm-*``: the BiLSTM baseline's steps against their FLOP bound, its fused
LSTMs' FLOPs counted by hand as torch's counter counts the same LSTM stepped by LSTMCells."""

import argparse

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bench.perf.measure import measure, model_config, render, step_flops
from lit_models.families.bilstm_perf import lstm_flops
from lit_models.families.perf_workloads import BASELINE_WORKLOADS

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


def unrolled_lstm_flops(words: int, input_dim: int, hidden: int, layers: int,
                        train: bool) -> int:
    """What torch's FLOP counter counts of the same bidirectional LSTM stepped by LSTMCells (their
    matmuls are counted; the fused nn.LSTM's are not)."""
    counter = FlopCounterMode(display=False)
    with counter:
        for layer in range(layers):
            width = input_dim if layer == 0 else 2 * hidden
            for _ in range(2):  # directions
                cell = torch.nn.LSTMCell(width, hidden)
                # inputs and states of a trained LSTM carry gradients (its backward computes them)
                x, state = (torch.randn(words, n, requires_grad=True) for n in (width, hidden))
                h, _ = cell(x, (state, torch.zeros(words, hidden)))
                if train:
                    h.sum().backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("train", [False, True])
def test_the_hand_counted_lstm_flops_are_the_counters_over_lstm_cells(train):
    assert lstm_flops(7, 5, 6, 2, train) == unrolled_lstm_flops(7, 5, 6, 2, train)


@pytest.mark.parametrize("attention", [False, True])
def test_the_bilstm_steps_are_measured_against_their_flop_bound(attention):
    args = argparse.Namespace(batch_size=3, seq_len=8, repeats=1, warmup=0, device="cpu",
                              steps=["pretrain", "finetune", "inference"], attention=["sdpa"],
                              precision="32-true", threads=None)
    overrides = ["model=bilstm-tiny", f"model.attention={attention}"]
    report = measure(args, overrides)
    assert report["arch"] == "bilstm" and report["skipped"] == ["pretrain"]
    model = model_config(overrides)
    for workload, train in zip(report["workloads"], (True, False), strict=True):
        torch.manual_seed(0)
        built = BASELINE_WORKLOADS["bilstm"][workload["step"]](model, 3, 8, CPU)
        impl = built.implementations["plmbench"]
        c = impl.net.config
        lstm = lstm_flops(built.tokens, c.input_dim, c.hidden_size, c.num_layers, train) + (
            lstm_flops(built.tokens, 4 * c.hidden_size, c.hidden_size, 1, train)
            if attention else 0)
        assert impl.uncounted_flops == lstm > 0
        counted = step_flops(impl.net, impl.run, train, CPU, "32-true")
        ours = workload["results"]["plmbench"]
        assert ours["flops"] == counted + lstm and ours["mfu"] > 0
        assert workload["tokens"] == built.tokens == int(
            built.batch["word_mask"].sum() + built.batch["word_mask_b"].sum())
    assert "| plmbench |" in render(report)
