"""Frozen features from chosen layers (lit_models/core/features.py): each combination against the
encoder's hidden states computed directly, a frozen encoder that a training step leaves
bit-identical (and in eval mode), and a learned mix that trains."""

import pytest
import torch

from datamodules.errors import PlmbenchError
from lit_models.core.features import LayerFeatures, hidden_states
from lit_models.nets.bert import BertConfig, BertModel


@pytest.fixture
def encoder():
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3,
                                num_attention_heads=2, intermediate_size=32))


INPUTS = {"input_ids": torch.randint(5, 50, (2, 7))}


@pytest.mark.parametrize(("layers", "combine", "expected"), [
    ([-1], "last", lambda s: s[3]),
    ([0], "last", lambda s: s[0]),
    ([-2, -1], "sum", lambda s: s[2] + s[3]),
    ([1, 3], "concat", lambda s: torch.cat([s[1], s[3]], -1)),
    ([0, 1, 2, 3], "mix", lambda s: s.mean(0)),  # equal weights and gamma 1 at the start
])
def test_combinations_of_the_encoders_states(encoder, layers, combine, expected):
    features = LayerFeatures(encoder, 4, 16, layers, combine)
    with torch.no_grad():
        states = hidden_states(encoder.eval(), INPUTS)
    out = features(INPUTS)
    assert out.shape[-1] == features.output_dim
    assert torch.allclose(out, expected(states), atol=1e-6)


def test_a_training_step_leaves_the_encoder_bit_identical(encoder):
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    features = LayerFeatures(encoder, 4, 16, [0, 1, 2, 3], "mix").train()
    assert not encoder.training  # no dropout in frozen features
    optimizer = torch.optim.SGD(features.parameters(), lr=1.0)
    (features(INPUTS) ** 2).sum().backward()
    optimizer.step()
    assert all(torch.equal(before[k], v) for k, v in encoder.state_dict().items())
    assert not torch.allclose(features.mix.scalars, torch.zeros(4))
    trained = [n for n, p in features.named_parameters() if p.requires_grad]
    assert trained == ["mix.scalars", "mix.gamma"]


@pytest.mark.parametrize(("layers", "combine"), [([4], "last"), ([-5], "sum"), ([], "mix"),
                                                 ([1, 2], "last"), ([1], "average")])
def test_bad_layer_choices_are_one_line(encoder, layers, combine):
    with pytest.raises(PlmbenchError):
        LayerFeatures(encoder, 4, 16, layers, combine)
