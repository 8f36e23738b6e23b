"""Transformer encoder blocks shared by every architecture in ``lit_models/nets``.

Vaswani et al. 2017, "Attention Is All You Need": scaled dot-product attention (§3.2.1, Eq. 1)
softmax(Q K^T / sqrt(d_k)) V, multi-head attention (§3.2.2), the position-wise feed-forward
network (§3.3, Eq. 2) and residual + LayerNorm sub-layers (§3.1) in the post-LN order
LayerNorm(x + Sublayer(x)) that BERT uses (Devlin et al. 2019, §3). The pre-LN order
x + Sublayer(LayerNorm(x)) with a final LayerNorm follows Xiong et al. 2020, "On Layer
Normalization in the Transformer Architecture", §3 (Figure 1b).

Attention runs through ``torch.nn.functional.scaled_dot_product_attention`` so GPUs get the
flash / memory-efficient kernels; padding enters as a boolean mask (True = may attend).
"""

from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: ``hidden_act`` names as in Hugging Face configs: exact erf GELU (Hendrycks & Gimpel 2016),
#: its tanh approximation (``gelu_new``, as in the original BERT/GPT-2 code), ReLU and SiLU.
#: The aliases are transformers' other names for the same functions.
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_python": F.gelu,
    "gelu_new": partial(F.gelu, approximate="tanh"),
    "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"),
    "gelu_fast": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """The activation function called ``name`` in a model config."""
    if name not in ACTIVATIONS:
        raise ValueError(
            f"unknown hidden_act {name!r}; use one of {sorted(ACTIVATIONS)} in the model config"
        )
    return ACTIVATIONS[name]


def padding_mask(attention_mask: Tensor | None) -> Tensor | None:
    """``[B, T]`` 1 = token / 0 = pad -> boolean ``[B, 1, 1, T]`` (True = key may be attended),
    broadcast over heads and query positions. A batch without padding needs no mask (``None``),
    which lets SDPA take its flash kernel on GPU (full-length packed pretraining batches)."""
    if attention_mask is None or bool(attention_mask.all()):
        return None
    return attention_mask[:, None, None, :].bool()


class MultiHeadSelfAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O (§3.2.2) with Q = K = V = x.

    The per-head projections W^Q_i, W^K_i, W^V_i are one fused ``qkv`` Linear whose output rows
    are [all query heads; all key heads; all value heads], so checkpoints with separate
    query/key/value matrices map onto it by concatenation along the output dimension.
    """

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(
                f"hidden_size {hidden_size} is not divisible by num_attention_heads {num_heads}; "
                "pick a head count that divides the hidden size"
            )
        self.num_heads = num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.out = nn.Linear(hidden_size, hidden_size)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x`` [B, T, H], ``mask`` boolean broadcastable to [B, heads, T, T] -> [B, T, H]."""
        B, T, H = x.shape
        # [B, T, 3, heads, d_k] -> three [B, heads, T, d_k] views, no copies
        q, k, v = self.qkv(x).view(B, T, 3, self.num_heads, -1).transpose(1, 3).unbind(2)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(B, T, H))


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2 (§3.3, Eq. 2; GELU in BERT)."""

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str = "gelu"):
        super().__init__()
        self.linear1 = nn.Linear(hidden_size, intermediate_size)
        self.act = activation(hidden_act)
        self.linear2 = nn.Linear(intermediate_size, hidden_size)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.act(self.linear1(x)))


class TransformerLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in dropout + residual + LayerNorm.

    post-LN (``pre_norm=False``, BERT): x = LN(x + Dropout(Sublayer(x)));
    pre-LN (``pre_norm=True``, Xiong et al. 2020): x = x + Dropout(Sublayer(LN(x))).
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        hidden_act: str = "gelu",
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        pre_norm: bool = False,
    ):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = MultiHeadSelfAttention(hidden_size, num_heads, attention_dropout)
        self.attention_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.feed_forward = FeedForward(hidden_size, intermediate_size, hidden_act)
        self.ffn_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.attention_norm(x), mask))
            return x + self.dropout(self.feed_forward(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, mask)))
        return self.ffn_norm(x + self.dropout(self.feed_forward(x)))


class TransformerEncoder(nn.Module):
    """A stack of layers; pre-LN stacks end with ``final_norm`` (Xiong et al. 2020, §3).

    The same layer object may appear several times (cross-layer parameter sharing).
    """

    def __init__(self, layers: Sequence[TransformerLayer], final_norm: nn.Module | None = None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(
        self, x: Tensor, mask: Tensor | None = None, output_hidden_states: bool = False
    ) -> tuple[Tensor, tuple[Tensor, ...] | None]:
        """-> (last hidden state, (input, output of each layer) if ``output_hidden_states``)."""
        hidden_states = [x] if output_hidden_states else None
        for layer in self.layers:
            x = layer(x, mask)
            if hidden_states is not None:
                hidden_states.append(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, None if hidden_states is None else tuple(hidden_states)


def init_normal_(module: nn.Module, std: float) -> None:
    """BERT initialisation as in transformers (the original TF code draws a truncated normal):
    weights N(0, std), biases 0, LayerNorm weight 1 / bias 0, padding embedding row 0.
    Use as ``model.apply(partial(init_normal_, std=config.initializer_range))``."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
