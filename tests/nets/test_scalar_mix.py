"""The scalar mix (Peters et al. 2018, eq. 1): gamma * sum_j softmax(w)_j h_j, against the formula
computed by hand, with learned weights that train; the optional layer norm normalises each layer
over its unmasked values."""

import torch

from lit_models.nets.scalar_mix import ScalarMix


def test_the_mix_is_gamma_times_the_softmax_weighted_sum():
    torch.manual_seed(0)
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.7)
    layers = torch.randn(3, 2, 4, 5)
    s = torch.exp(torch.tensor([0.5, -1.0, 2.0]))
    s = s / s.sum()
    expected = 1.7 * (s[0] * layers[0] + s[1] * layers[1] + s[2] * layers[2])
    assert torch.allclose(mix(layers), expected, atol=1e-6)
    assert torch.allclose(mix.weights.sum(), torch.tensor(1.0))


def test_the_weights_start_equal_and_train():
    mix = ScalarMix(4)
    assert torch.allclose(mix.weights, torch.full((4,), 0.25))
    layers = torch.randn(4, 2, 3, 5)
    (mix(layers) * torch.randn(2, 3, 5)).sum().backward()
    assert mix.scalars.grad.abs().sum() > 0 and mix.gamma.grad.abs() > 0


def test_layer_norm_ignores_padding():
    mix = ScalarMix(1, layer_norm=True)
    layers = torch.randn(1, 2, 4, 3)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    changed = layers.clone()
    changed[0, 0, 2:] = 100.0  # padding values
    assert torch.allclose(mix(layers, mask)[mask], mix(changed, mask)[mask], atol=1e-6)
    values = mix(layers, mask)[mask]
    assert abs(values.mean().item()) < 1e-5 and abs(values.std(unbiased=False).item() - 1) < 1e-4
