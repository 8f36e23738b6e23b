"""A learned, task-specific scalar mix of a network's layers (Peters et al. 2018, §3.2, eq. 1).

    ELMo_k^task = gamma^task * sum_j s_j^task * h_{k,j}

with s^task = softmax(w) over the L + 1 layers j (the token layer and each biLSTM layer) and a
scalar gamma^task that scales the whole vector. Tenney et al. 2019 ("BERT Rediscovers the
Classical NLP Pipeline", §3) mix a Transformer's layers with the same module. The weights start
equal (w = 0) and gamma at 1; ``weights`` gives s for inspection. Peters et al. also try a layer
normalisation of each layer before mixing (§3.2, "in some cases"): ``layer_norm`` applies it
over the unmasked positions.
"""

import torch
from torch import nn


class ScalarMix(nn.Module):
    def __init__(self, num_layers: int, layer_norm: bool = False) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"a scalar mix needs at least one layer, got {num_layers}")
        self.scalars = nn.Parameter(torch.zeros(num_layers))  # w: s = softmax(w)
        self.gamma = nn.Parameter(torch.ones(()))
        self.layer_norm = layer_norm

    @property
    def weights(self) -> torch.Tensor:
        """s_j: the softmax-normalised layer weights."""
        return torch.softmax(self.scalars, dim=0)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``layers`` [L, B, T, D] (``mask`` [B, T], True at tokens, for ``layer_norm``) ->
        [B, T, D]."""
        if layers.shape[0] != len(self.scalars):
            raise ValueError(f"mixing {layers.shape[0]} layers with weights for "
                             f"{len(self.scalars)}")
        if self.layer_norm:
            layers = _masked_layer_norm(layers, mask)
        mixed = torch.einsum("l,lbtd->btd", self.weights.to(layers.dtype), layers)
        return self.gamma * mixed


def _masked_layer_norm(layers: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Each layer normalised by the mean and variance of its values at the tokens (all of one
    layer's unmasked vectors together, as the released ELMo's ``do_layer_norm``)."""
    if mask is None:
        mask = torch.ones(layers.shape[1:3], dtype=torch.bool, device=layers.device)
    weight = mask[None, :, :, None].to(layers.dtype)
    count = weight.sum(dim=(1, 2, 3), keepdim=True) * layers.shape[-1]
    mean = (layers * weight).sum(dim=(1, 2, 3), keepdim=True) / count
    variance = (((layers - mean) * weight) ** 2).sum(dim=(1, 2, 3), keepdim=True) / count
    return (layers - mean) / torch.sqrt(variance + 1e-12)
