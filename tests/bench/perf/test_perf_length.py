"""``plmbench perf --lengths``: Longformer's saved activations grow linearly with the length
(doubling the tokens at most doubles them, plus a constant), and the table has a row per length."""

import pytest
import torch

from bench.perf.length import length_scaling
from bench.perf.measure import model_config
from datamodules.errors import PlmbenchError
from tests.bench.invoke import plmbench

OVERRIDES = ["model=longformer-tiny-scratch", "model.attention_window=32"]


def test_longformer_memory_is_linear_in_length():
    results = length_scaling(model_config(OVERRIDES), [256, 512, 1024], "roberta", 1,
                             torch.device("cpu"), warmup=0, repeats=1)
    memory = [results[n]["longformer"]["activation_mib"] for n in (256, 512, 1024)]
    growth = (memory[2] - memory[1]) / (memory[1] - memory[0])
    assert growth == pytest.approx(2.0, rel=0.05)  # linear: equal steps per added token
    assert all(results[n]["roberta"]["step_ms"] > 0 for n in results)


def test_table_and_too_long_inputs():
    done = plmbench("perf", "--lengths", "64,128", "--repeats", "1", "--warmup", "0", *OVERRIDES)
    assert done.rc == 0, done.err
    rows = [line for line in done.out.splitlines() if line.startswith("| 64 ") or
            line.startswith("| 128 ")]
    assert len(rows) == 2
    with pytest.raises(PlmbenchError, match="max_position_embeddings"):
        length_scaling(model_config(OVERRIDES), [2048], "roberta", 1, torch.device("cpu"), 0, 1)
