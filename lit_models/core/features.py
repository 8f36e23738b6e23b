"""Frozen features from chosen layers of a pretrained encoder: the feature-based use of a
pretrained model, as opposed to fine-tuning it.

Devlin et al. 2019 (BERT), §5.3 and Table 7: BERT's activations, not fine-tuned, as the input of
a BiLSTM (NER): the last hidden layer, the sum or the concatenation of the last four, the sum of
all twelve ... Peters et al. 2018 (ELMo), §3.2: a task-specific scalar mix of all the biLM's
layers (``lit_models/nets/scalar_mix.py``); Tenney et al. 2019 mix BERT's layers the same way.

``LayerFeatures`` wraps any encoder whose forward takes ``output_hidden_states=True`` and returns
``hidden_states`` (the L + 1 states: the embedding or token layer, then each layer's output), a
plmbench Transformer encoder or ELMo's biLM alike. The encoder's weights never train (no
gradient, dropout off even in training mode); what trains is the mix, if any. ``layers`` are
indices into the L + 1 states (negative from the top: [-1] the last layer, [-4, -3, -2, -1] the
last four), combined by ``combine``:

- ``last``: one layer as it is (``layers`` must name one);
- ``sum``: their sum; ``concat``: their concatenation (width x len(layers));
- ``mix``: gamma * sum_j softmax(w)_j h_j, w and gamma learned (a ``ScalarMix``).

With a ``FeatureCache`` (``feature_cache.py``) the chosen states of each sentence are computed
once and read back afterwards (inputs given with a ``mask``, padding last).
"""

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from datamodules.errors import PlmbenchError
from lit_models.core.feature_cache import FeatureCache
from lit_models.nets.scalar_mix import ScalarMix

COMBINE = ("last", "sum", "concat", "mix")


def hidden_states(encoder: nn.Module, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The encoder's L + 1 hidden states, stacked: [L + 1, B, T, H]."""
    states = encoder(**inputs, output_hidden_states=True).hidden_states
    if states is None:
        raise PlmbenchError(f"{type(encoder).__name__} returns no hidden states; frozen "
                            "features need an encoder that does (output_hidden_states=True)")
    return torch.stack(tuple(states))


def layer_indices(layers: Sequence[int], num_states: int) -> list[int]:
    """``layers`` as indices in 0 .. num_states - 1 (negative ones from the top)."""
    indices = [layer + num_states if layer < 0 else layer for layer in layers]
    wrong = [layer for layer, index in zip(layers, indices, strict=True)
             if not 0 <= index < num_states]
    if not layers or wrong:
        raise PlmbenchError(f"feature layers {list(layers)}: the encoder has {num_states} "
                            f"hidden states (0 = embeddings, -1 = last); name layers in "
                            f"{-num_states}..{num_states - 1}")
    return indices


class LayerFeatures(nn.Module):
    """A frozen encoder's states of chosen ``layers``, combined: inputs -> [B, T, output_dim]."""

    def __init__(self, encoder: nn.Module, num_states: int, width: int, layers: Sequence[int],
                 combine: str, cache: FeatureCache | None = None) -> None:
        super().__init__()
        if combine not in COMBINE:
            raise PlmbenchError(f"feature combination {combine!r}: use one of {list(COMBINE)}")
        if combine == "last" and len(layers) != 1:
            raise PlmbenchError(f"combine=last takes one layer, got {list(layers)}; use sum, "
                                "concat or mix for several")
        self.encoder = encoder.requires_grad_(False).eval()
        self.layers = layer_indices(layers, num_states)
        self.combine = combine
        self.mix = ScalarMix(len(self.layers)) if combine == "mix" else None
        self.output_dim = width * (len(self.layers) if combine == "concat" else 1)
        self.cache = cache

    def train(self, mode: bool = True) -> "LayerFeatures":
        super().train(mode)
        self.encoder.eval()  # frozen features: no dropout in the encoder, ever
        return self

    def chosen_states(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return hidden_states(self.encoder, inputs)[self.layers]

    def forward(self, inputs: Mapping[str, torch.Tensor],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad():
            if self.cache is None or mask is None:
                states = self.chosen_states(inputs)
            else:
                states = self.cache.states(self.encoder, inputs, mask, self.chosen_states)
        if self.combine == "mix":
            return self.mix(states, mask)
        if self.combine == "concat":
            return torch.cat(tuple(states), dim=-1)
        return states.sum(dim=0)  # one layer (last) or several (sum)
