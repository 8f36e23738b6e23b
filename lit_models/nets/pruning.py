"""Attention heads removed from the weights: a smaller net that computes what the head-masked one
did.

Michel et al. 2019, "Are Sixteen Heads Really Better than One?", §3-4: multi-head attention is
MHAtt(x) = Σ_h ξ_h Att_h(x) W^O_h; a head whose mask ξ_h is 0 contributes nothing, so its query,
key and value rows and its columns of W^O can go, and the output is the same (the output bias
stays). ``PrunableHeads.prune_heads({layer: [heads]})`` does that on an encoder, as transformers
4's ``prune_heads`` did (Voita et al. 2019 and Michel et al. 2019 prune the same way), and keeps
``config.pruned_heads`` (transformers 4's key: each layer's removed heads by their original
index), so an export carries it and an import builds the same smaller net. A layer may lose
every head: its attention sub-layer then adds its output bias alone.
"""

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn


def prune_linear(linear: nn.Linear, index: Tensor, dim: int) -> nn.Linear:
    """``linear`` keeping only ``index`` of its outputs (``dim`` 0: weight rows and bias) or of
    its inputs (``dim`` 1: weight columns; the bias is kept whole), in place."""
    weight = linear.weight.detach().index_select(dim, index.to(linear.weight.device))
    linear.weight = nn.Parameter(weight, requires_grad=linear.weight.requires_grad)
    if linear.bias is not None and dim == 0:
        bias = linear.bias.detach()[index.to(linear.bias.device)]
        linear.bias = nn.Parameter(bias, requires_grad=linear.bias.requires_grad)
    linear.out_features, linear.in_features = weight.shape
    return linear


def head_index(heads: Sequence[int], head_dim: int, blocks: int = 1,
               block_size: int | None = None) -> Tensor:
    """The features of ``heads`` in a projection laid out as ``blocks`` blocks (query, key,
    value) of ``block_size`` features, each block all heads' ``head_dim`` features in head
    order (``attention.split_heads``'s layout)."""
    within = (torch.tensor(list(heads), dtype=torch.long)[:, None] * head_dim
              + torch.arange(head_dim)).flatten()
    return torch.cat([within + b * (block_size or 0) for b in range(blocks)])


def kept_heads(num_heads: int, removed: Iterable[int]) -> list[int]:
    """The positions of a layer's ``num_heads`` heads that stay once ``removed`` go."""
    removed = set(removed)
    if not removed <= set(range(num_heads)):
        raise ValueError(f"heads {sorted(removed)} are not all among the layer's {num_heads}")
    return [h for h in range(num_heads) if h not in removed]


class PrunableHeads:
    """Mixed into an encoder whose ``head_layers()`` are its layers' self-attention modules, each
    with ``num_heads`` and ``prune_heads(positions)``."""

    config: object

    def head_layers(self) -> list[nn.Module]:
        """Each layer's self-attention, first layer first."""
        raise NotImplementedError

    def heads_per_layer(self) -> list[int]:
        """The heads each layer has now."""
        return [attention.num_heads for attention in self.head_layers()]

    def prune_heads(self, heads: Mapping[int, Iterable[int]]) -> None:
        """Remove ``heads`` ({layer: original head indices}) from the weights; heads removed
        before are skipped. Refused where layers share their attention (ALBERT): a head there
        is every layer's."""
        layers = self.head_layers()
        if len({id(layer) for layer in layers}) < len(layers):
            raise ValueError("the layers share their attention weights (ALBERT's sharing), so a "
                             "head cannot leave one layer alone; mask it with head_mask instead")
        total = self.config.num_attention_heads
        pruned = {int(layer): set(ids) for layer, ids in self.config.pruned_heads.items()}
        for layer, ids in heads.items():
            layer, ids = int(layer), {int(h) for h in ids}
            if not 0 <= layer < len(layers) or not ids <= set(range(total)):
                raise ValueError(f"cannot prune heads {sorted(ids)} of layer {layer}: the net has "
                                 f"{len(layers)} layers of {total} heads")
            before = pruned.get(layer, set())
            remaining = kept_heads(total, before)
            layers[layer].prune_heads([remaining.index(h) for h in sorted(ids - before)])
            pruned[layer] = before | ids
        self.config.pruned_heads = {layer: sorted(ids) for layer, ids in sorted(pruned.items())
                                    if ids}

    def prune_configured_heads(self) -> None:
        """Apply ``config.pruned_heads`` to a net just built at full size (an import of a pruned
        export)."""
        pending, self.config.pruned_heads = self.config.pruned_heads, {}
        if pending:
            self.prune_heads(pending)
