"""Bottleneck adapters (Houlsby et al. 2019, "Parameter-Efficient Transfer Learning for NLP",
§2.1 and Figure 2).

An adapter projects a layer's d-dimensional output down to m << d dimensions, applies a
nonlinearity and projects back up, with a skip connection around it:

    adapter(h) = h + W_up f(W_down h + b_down) + b_up

Two of them sit in every Transformer layer: after the attention sub-layer's output projection and
after the feed-forward network, each before the sub-layer's residual addition and layer norm
(``TransformerLayer``'s ``attention_adapter`` / ``ffn_adapter`` slots, ``blocks.py``). Houlsby et
al. initialise both projections near zero, so the adapter starts near the identity (§2.1,
"near-identity initialization"); here the up-projection starts at exactly zero, so a net with
fresh adapters computes what it computed without them.
"""

from torch import Tensor, nn

from lit_models.nets.blocks import activation


class BottleneckAdapter(nn.Module):
    """h + W_up f(W_down h): ``hidden_size`` -> ``bottleneck`` -> ``hidden_size``."""

    def __init__(self, hidden_size: int, bottleneck: int, hidden_act: str = "gelu",
                 init_std: float = 1e-2) -> None:
        super().__init__()
        self.down = nn.Linear(hidden_size, bottleneck)
        self.act = activation(hidden_act)
        self.up = nn.Linear(bottleneck, hidden_size)
        nn.init.normal_(self.down.weight, std=init_std)
        nn.init.zeros_(self.down.bias)
        nn.init.zeros_(self.up.weight)  # the identity at the start
        nn.init.zeros_(self.up.bias)

    def forward(self, h: Tensor) -> Tensor:
        return h + self.up(self.act(self.down(h)))
