"""``plmbench perf --generate``: for a decoder and the encoder-decoders, ours with and without
the cache and transformers' ``generate`` with and without it produce the same ids on the same
weights and prompts (so the rates compare equal work), every row generates exactly the asked
number of tokens, and encoders are refused in one line."""

import argparse

import pytest

from bench.perf.generation import IMPLEMENTATIONS, measure, render
from bench.perf.measure import model_config
from datamodules.errors import PlmbenchError
from tests.conftest import require

require("transformers")

ARGS = argparse.Namespace(batch_size=2, seq_len=8, new_tokens=5, beams=1, repeats=1, warmup=0,
                          device="cpu")


@pytest.mark.parametrize(("preset", "beams"), [("gpt2-tiny-scratch", 1), ("bart-tiny-scratch", 2),
                                               ("t5-tiny-scratch", 1)])
def test_every_implementation_generates_the_same_ids(preset, beams):
    args = argparse.Namespace(**{**vars(ARGS), "beams": beams})
    results = measure(model_config([f"model={preset}"]), args)
    assert set(results) == set(IMPLEMENTATIONS)
    for r in results.values():
        assert r["same_ids"] and r["new_tokens"] == 5
        assert r["tokens_per_s"] == pytest.approx(2 * 5 / (r["call_ms"] / 1e3))
    table = render(results, args, preset)
    assert "| plmbench, no cache |" in table and "cache speed-up" in table


def test_encoders_are_refused():
    with pytest.raises(PlmbenchError, match="decoder or encoder-decoder"):
        measure(model_config(["model=bert-tiny-scratch"]), ARGS)
