"""Transformer layers shared by every architecture in ``lit_models/nets`` (attention itself is in
``attention.py``).

Vaswani et al. 2017, "Attention Is All You Need": the position-wise feed-forward network (§3.3,
Eq. 2) and residual + LayerNorm sub-layers (§3.1) in the post-LN order LayerNorm(x +
Sublayer(x)) that BERT (Devlin et al. 2019, §3) and BART use; decoder layers insert
encoder-decoder attention between self-attention and the feed-forward network (§3.1). The pre-LN
order x + Sublayer(LayerNorm(x)) with a final norm after the stack follows Xiong et al. 2020,
"On Layer Normalization in the Transformer Architecture", §3 (Figure 1b), as GPT-2 and T5 do.

T5 (Raffel et al. 2020, §2.1) drops every bias and uses a scale-only norm, RMSNorm (Zhang &
Sennrich 2019, "Root Mean Square Layer Normalization"): x / RMS(x) * g; T5 v1.1 uses the
gated-GELU feed-forward (Shazeer 2020, "GLU Variants Improve Transformer"):
(act(x W_0) * x W_1) W_2.
"""

from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.nets.attention import (
    HeadProbe,
    LayerCache,
    MultiHeadCrossAttention,
    MultiHeadSelfAttention,
    Unpadding,
)

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
    broadcast over heads and query positions; a pairwise ``[B, T, T]`` mask (query i may attend
    key j: the block-diagonal mask of packed rows, Krell et al. 2021 §4) -> ``[B, 1, T, T]``.
    ``None`` means no padding: the collate leaves the mask out of a batch without padding
    (``datamodules/collate.py``), so SDPA gets no mask and takes its flash kernel on GPU, and no
    forward asks the device whether the mask is all ones."""
    if attention_mask is None:
        return None
    if attention_mask.ndim == 3:
        return attention_mask[:, None].bool()
    return attention_mask[:, None, None, :].bool()


def make_norm(kind: str, size: int, eps: float, bias: bool = True) -> nn.Module:
    """``kind`` "layernorm" (with a bias unless ``bias=False``) or "rmsnorm" (scale only, T5)."""
    if kind == "layernorm":
        return nn.LayerNorm(size, eps=eps, bias=bias)
    if kind == "rmsnorm":
        return nn.RMSNorm(size, eps=eps)
    raise ValueError(f"unknown norm {kind!r}; use 'layernorm' or 'rmsnorm' in the model config")


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2 (§3.3, Eq. 2; GELU in BERT), or with ``gated=True``
    (act(x W_0) * x W_1) W_2 (T5 v1.1), W_0 and W_1 fused in ``linear1`` as [W_0; W_1] rows.
    ``dropout`` acts on the inner activations, before W_2 (BART's activation_dropout, T5's and
    XLNet's feed-forward dropout); BERT's encoders have none there."""

    def __init__(
        self,
        hidden_size: int,
        intermediate_size: int,
        hidden_act: str = "gelu",
        gated: bool = False,
        bias: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.gated = gated
        self.linear1 = nn.Linear(hidden_size, (1 + gated) * intermediate_size, bias=bias)
        self.act = activation(hidden_act)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.linear2 = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear1(x)
        if self.gated:
            gate, h = h.chunk(2, dim=-1)
            return self.linear2(self.dropout(self.act(gate) * h))
        return self.linear2(self.dropout(self.act(h)))


class TransformerLayer(nn.Module):
    """Self-attention, cross-attention over an encoder ``memory`` (decoder layers, with
    ``cross_attention=True``), then feed-forward; each wrapped in dropout + residual + norm.

    post-LN (``pre_norm=False``, BERT, BART): x = Norm(x + Dropout(Sublayer(x)));
    pre-LN (``pre_norm=True``, GPT-2, T5, Xiong et al. 2020): x = x + Dropout(Sublayer(Norm(x))).
    Each sub-layer's output passes its adapter slot before the residual addition: the identity,
    or a bottleneck adapter (Houlsby et al. 2019, Figure 2; ``adapters.py``) that
    ``lit_models/core/finetune/adapters.py`` puts there.
    ``norm`` "layernorm" or "rmsnorm"; ``bias=False`` drops the biases of every Linear and
    LayerNorm (T5); ``head_dim`` and ``scale`` go to the attention (T5: d_kv and 1.0);
    ``activation_dropout`` is the feed-forward's inner dropout (``FeedForward``).
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
        *,
        cross_attention: bool = False,
        head_dim: int | None = None,
        scale: float | None = None,
        norm: str = "layernorm",
        bias: bool = True,
        gated: bool = False,
        activation_dropout: float = 0.0,
    ):
        super().__init__()
        self.pre_norm = pre_norm
        attention = dict(dropout=attention_dropout, head_dim=head_dim, scale=scale, bias=bias)
        self.attention = MultiHeadSelfAttention(hidden_size, num_heads, **attention)
        self.attention_norm = make_norm(norm, hidden_size, layer_norm_eps, bias)
        self.cross_attention = self.cross_attention_norm = None
        if cross_attention:
            self.cross_attention = MultiHeadCrossAttention(hidden_size, num_heads, **attention)
            self.cross_attention_norm = make_norm(norm, hidden_size, layer_norm_eps, bias)
        self.feed_forward = FeedForward(hidden_size, intermediate_size, hidden_act, gated, bias,
                                        activation_dropout)
        self.ffn_norm = make_norm(norm, hidden_size, layer_norm_eps, bias)
        self.dropout = nn.Dropout(dropout)
        #: Houlsby et al. 2019's adapter slots (no parameters while they are the identity)
        self.attention_adapter = nn.Identity()
        self.cross_attention_adapter = nn.Identity()
        self.ffn_adapter = nn.Identity()

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        bias: Tensor | None = None,
        causal: bool = False,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
        unpadding: Unpadding | None = None,
        probe: HeadProbe | None = None,
    ) -> Tensor:
        """``x`` [B, T, H] -> [B, T, H] (with ``unpadding``, an encoder's real tokens [N, H]).
        Self-attention: boolean ``mask`` and additive ``bias`` broadcast to [B, heads, T, Tk]
        (Tk = T plus the positions in ``cache``), ``causal`` for decoders; ``probe`` masks its
        heads or keeps its probabilities. Cross-attention: ``memory`` [B, S, H] with
        ``memory_mask`` [B, 1, 1, S]; once ``cache`` holds memory's keys/values, ``memory`` may
        be None."""
        if self.cross_attention is None and memory is not None:
            raise ValueError("memory given to a layer without cross-attention; "
                             "build decoder layers with cross_attention=True")
        self_cache = None if cache is None else cache.self_attention
        x = self._residual(x, self.attention_norm,
                           lambda h: self.attention(h, mask, bias, causal, self_cache, unpadding,
                                                    probe),
                           self.attention_adapter)
        if self.cross_attention is not None:
            cross_cache = None if cache is None else cache.cross_attention
            x = self._residual(
                x,
                self.cross_attention_norm,
                lambda h: self.cross_attention(h, memory, memory_mask, cache=cross_cache),
                self.cross_attention_adapter,
            )
        return self._residual(x, self.ffn_norm, self.feed_forward, self.ffn_adapter)

    def _residual(self, x: Tensor, norm: nn.Module, sublayer: Callable[[Tensor], Tensor],
                  adapter: nn.Module) -> Tensor:
        if self.pre_norm:
            return x + adapter(self.dropout(sublayer(norm(x))))
        return norm(x + adapter(self.dropout(sublayer(x))))


class TransformerEncoder(nn.Module):
    """A stack of layers (encoder or decoder); pre-LN stacks end with ``final_norm`` (Xiong et
    al. 2020, §3). The same layer object may appear several times (cross-layer parameter
    sharing, ALBERT)."""

    def __init__(self, layers: Sequence[TransformerLayer], final_norm: nn.Module | None = None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        output_hidden_states: bool = False,
        *,
        bias: Tensor | None = None,
        causal: bool = False,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        caches: Sequence[LayerCache] | None = None,
        unpadding: Unpadding | None = None,
        probes: Sequence[HeadProbe] | None = None,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None]:
        """-> (last hidden state, (input, output of each layer) if ``output_hidden_states``; with
        a ``final_norm``, the last entry is the normalised output, as transformers records it).
        Every layer gets the same ``mask``, ``bias`` (T5 shares its relative position bias
        across layers), ``causal`` and ``memory``; ``caches`` and ``probes`` hold one
        ``LayerCache`` / ``HeadProbe`` per entry of ``layers``. With ``unpadding`` the layers run
        on the real tokens only (the outputs are zero at the padding)."""
        for name, per_layer in (("caches", caches), ("probes", probes)):
            if per_layer is not None and len(per_layer) != len(self.layers):
                raise ValueError(f"{len(per_layer)} {name} for {len(self.layers)} layers; "
                                 "pass one per layer")
        hidden_states = [x] if output_hidden_states else None
        if unpadding is not None:
            x = unpadding.remove(x)
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                mask,
                bias=bias,
                causal=causal,
                memory=memory,
                memory_mask=memory_mask,
                cache=None if caches is None else caches[i],
                unpadding=unpadding,
                probe=None if probes is None else probes[i],
            )
            if hidden_states is not None:
                hidden_states.append(x if unpadding is None else unpadding.restore(x))
        if self.final_norm is not None:
            x = self.final_norm(x)
            if hidden_states is not None:
                hidden_states[-1] = x if unpadding is None else unpadding.restore(x)
        return (x if unpadding is None else unpadding.restore(x),
                None if hidden_states is None else tuple(hidden_states))


def init_normal_(module: nn.Module, std: float) -> None:
    """BERT initialisation as in transformers (the original TF code draws a truncated normal):
    weights N(0, std), biases 0, norm weight 1 / bias 0, padding embedding row 0.
    Use as ``model.apply(partial(init_normal_, std=config.initializer_range))``."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()
    if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
        nn.init.ones_(module.weight)
    if isinstance(module, nn.LayerNorm) and module.bias is not None:
        nn.init.zeros_(module.bias)
