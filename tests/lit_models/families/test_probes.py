"""Probes (lit_models/families/probes.py) on synthetic features whose answer only one layer holds:
the per-layer accuracy peaks at that layer, the scalar mix puts its weight there (its centre of
gravity near it), and Hewitt & Liang's control task gives every word type one label drawn from
the task's label distribution."""

from collections import Counter

import pytest
import torch

from lit_models.families.probes import (
    ProbeSettings,
    centre_of_gravity,
    control_labels,
    layer_accuracies,
    mixed_accuracy,
)

LAYERS, WIDTH, LABELS, ANSWER = 5, 16, 4, 2


def synthetic(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer ANSWER holds a linear code of the label plus noise; every other layer, noise with
    the same statistics and no relation to the label."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(LABELS, (n,), generator=generator)
    code = torch.randn(LABELS, WIDTH, generator=torch.Generator().manual_seed(99))
    features = torch.randn(n, LAYERS, WIDTH, generator=generator)
    features[:, ANSWER] = code[labels] + 0.3 * torch.randn(n, WIDTH, generator=generator)
    return features, labels


@pytest.fixture(scope="module")
def data():
    return (*synthetic(800, 0), *synthetic(400, 1))


def test_the_probe_peaks_at_the_only_layer_that_holds_the_answer(data):
    settings = ProbeSettings(epochs=15, batch_size=64, lr=1e-2)
    scores = layer_accuracies(*data, LABELS, settings)
    assert max(range(LAYERS), key=scores.__getitem__) == ANSWER
    assert scores[ANSWER] > 0.95
    assert all(score < 0.45 for layer, score in enumerate(scores) if layer != ANSWER)  # ~chance
    mlp = layer_accuracies(*data, LABELS, ProbeSettings(kind="mlp", hidden=32, epochs=15,
                                                         batch_size=64, lr=1e-2))
    assert max(range(LAYERS), key=mlp.__getitem__) == ANSWER


def test_the_scalar_mix_weights_the_layer_that_holds_the_answer(data):
    accuracy, weights = mixed_accuracy(*data, LABELS, ProbeSettings(epochs=30, batch_size=64,
                                                                    lr=2e-2))
    assert accuracy > 0.9
    assert max(range(LAYERS), key=weights.__getitem__) == ANSWER
    assert sum(weights) == pytest.approx(1.0)
    assert centre_of_gravity(weights) == pytest.approx(ANSWER, abs=0.6)
    assert centre_of_gravity([0.0, 0.5, 0.5]) == 1.5


def test_the_control_task_labels_each_word_type_once_from_the_label_distribution():
    labels = torch.tensor([0] * 700 + [1] * 200 + [2] * 100)
    types = [f"w{i}" for i in range(3000)]
    control = control_labels(types, labels, seed=3)
    assert set(control) == set(types)
    assert control == control_labels(list(reversed(types)), labels, seed=3)  # per type, stable
    shares = Counter(control.values())
    assert shares[0] / 3000 == pytest.approx(0.7, abs=0.04)
    assert shares[2] / 3000 == pytest.approx(0.1, abs=0.03)
