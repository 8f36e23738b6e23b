"""DeBERTa-v2 and DeBERTa-v3: disentangled attention as released in 2021-2023.

He et al. 2021, "DeBERTa: Decoding-enhanced BERT with Disentangled Attention" (the ICLR version,
whose 1.5B model is v2-xxlarge), and He et al. 2023, "DeBERTaV3: Improving DeBERTa using
ELECTRA-Style Pre-Training with Gradient-Disentangled Embedding Sharing" (v3: v2's architecture
with a 128K SentencePiece vocabulary, pretrained by replaced-token detection, ``deberta_rtd.py``).

The attention score is DeBERTa's (§3.1, Eq. 4: content-to-content + c2p + p2c, scaled by
1/sqrt(3d); ``disentangled.py``), with what v2 changed in the released code, each a config key of
transformers' ``DebertaV2Config``:

- ``position_buckets`` > 0: relative distances are log-bucketed beyond half the bucket count,
  up to ``max_relative_positions`` (``disentangled.log_bucket``), and P has 2 x buckets rows;
- ``share_att_key``: the position keys and queries K^r = P W_k, Q^r = P W_q reuse the content
  projections (W_k,r = W_k, W_q,r = W_q, Eq. 4) instead of projections of their own;
- ``norm_rel_ebd`` = "layer_norm": P goes through a LayerNorm before every use;
- ``position_biased_input`` false: no absolute position embeddings at all (relative positions
  only; the released v3 models);
- ``conv_kernel_size`` > 0 (v2-xlarge/xxlarge): a convolution over the embeddings, act(conv(E)),
  is added to the first layer's output and normalised: LayerNorm(h_1 + act(conv(E))) ("nGiE",
  the released README);
- separate query/key/value projections with biases (fused here into one ``qkv`` Linear).

The rest is DeBERTa's post-LN layer (``deberta.DebertaLayer``). The masked-LM net is
transformers' ``DebertaV2ForMaskedLM``: BERT's head on the encoder (``legacy``: transformers'
``cls.predictions`` names, else ``lm_predictions.lm_head``), without v1's enhanced mask decoder,
which has no absolute positions to add here.
"""

from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from lit_models.nets.attention import HeadProbe, attend, attentions_of, head_probes
from lit_models.nets.blocks import activation, init_normal_, padding_mask
from lit_models.nets.deberta import DebertaConfig, DebertaEmbeddings, DebertaLayer
from lit_models.nets.disentangled import (
    Relative,
    disentangled_bias,
    position_scale,
    relative_index,
)
from lit_models.nets.masked_lm import EncoderForMaskedLM
from lit_models.nets.outputs import EncoderOutput
from lit_models.nets.pruning import PrunableHeads, head_index, kept_heads, prune_linear


@dataclass
class DebertaV2Config(DebertaConfig):
    """Defaults are transformers' ``DebertaV2Config``'s (v2-xxlarge's sizes; relative attention
    off, absolute positions in the input), so a config.json that leaves a key out means what it
    means to transformers; the presets (``conf/model/deberta-v3-*.yaml``) set every key."""

    vocab_size: int = 128100
    hidden_size: int = 1536
    num_hidden_layers: int = 24
    num_attention_heads: int = 24
    intermediate_size: int = 6144
    relative_attention: bool = False
    position_biased_input: bool = True
    pos_att_type: list[str] = field(default_factory=list)
    position_buckets: int = -1  # > 0: log-bucketed distances, P of 2 x buckets rows
    share_att_key: bool = False  # position keys/queries through the content projections
    norm_rel_ebd: str = "none"  # "layer_norm": P normalised before use
    conv_kernel_size: int = 0  # > 0: the convolution layer beside the first layer
    conv_act: str = "tanh"
    conv_groups: int = 1
    legacy: bool = True  # the MLM head's names: cls.predictions (True) or lm_predictions

    def __post_init__(self) -> None:
        super().__post_init__()
        norms = {n.strip() for n in str(self.norm_rel_ebd).lower().split("|")} - {"none", ""}
        if norms - {"layer_norm"}:
            raise ValueError(f"norm_rel_ebd={self.norm_rel_ebd!r}: use 'none' or 'layer_norm'")

    @property
    def relative_span(self) -> int:
        """k: P has 2k rows (the buckets where distances are bucketed)."""
        return self.position_buckets if self.position_buckets > 0 else self.relative_positions


class DebertaV2SelfAttention(nn.Module):
    """Multi-head attention with the disentangled score (Eq. 4) through ``attend``; the position
    terms as its additive bias. ``qkv`` holds W_q, W_k, W_v (with biases) as one projection."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        H, A = config.hidden_size, config.num_attention_heads
        if H % A:
            raise ValueError(f"hidden_size {H} is not divisible by num_attention_heads {A}; pick "
                             "a head count that divides the hidden size")
        self.num_heads, self.head_dim = A, H // A
        self.qkv = nn.Linear(H, 3 * H)
        self.terms = tuple(config.pos_att_type) if config.relative_attention else ()
        self.scale = position_scale(self.head_dim, len(self.terms))
        self.share_att_key = config.share_att_key
        own = not config.share_att_key
        self.pos_key_proj = nn.Linear(H, H) if own and "c2p" in self.terms else None
        self.pos_query_proj = nn.Linear(H, H) if own and "p2c" in self.terms else None
        self.pos_dropout = nn.Dropout(config.hidden_dropout_prob)
        self.dropout = config.attention_probs_dropout_prob
        self.out = nn.Linear(H, H)

    def heads(self, x: Tensor) -> Tensor:
        """[..., T, heads d] -> [..., heads, T, d]."""
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).movedim(-2, -3)

    def forward(self, x: Tensor, mask: Tensor | None, relative: Relative | None,
                query: Tensor | None = None, probe: HeadProbe | None = None) -> Tensor:
        """As v1's (``deberta.DisentangledSelfAttention``): keys and values from ``x``, queries
        from ``query`` or ``x``, ``relative`` the shared P and the distances."""
        B, T, H = x.shape
        if self.num_heads == 0:  # every head pruned: the output bias alone
            if probe is not None and probe.keep:
                probe.weights = x.new_zeros(B, 0, T, T)
            return self.out(x.new_zeros(B, T, 0))
        width = self.num_heads * self.head_dim
        if query is None:
            q, k, v = (self.heads(t) for t in self.qkv(x).split(width, -1))
        else:
            weight, bias = self.qkv.weight, self.qkv.bias
            q = self.heads(nn.functional.linear(query, weight[:width], bias[:width]))
            k, v = (self.heads(t) for t in nn.functional.linear(
                x, weight[width:], bias[width:]).split(width, -1))
        bias = None
        if self.terms and relative is not None:
            bias = self.relative_scores(q, k, relative)
        dropout = self.dropout if self.training else 0.0
        y = attend(q, k, v, mask, bias, scale=self.scale, dropout=dropout, probe=probe)
        return self.out(y.transpose(1, 2).reshape(B, T, -1))

    def relative_scores(self, q: Tensor, k: Tensor, relative: Relative) -> Tensor | None:
        """c2p + p2c over the rows of P the sequence reaches: K^r = P W_k,r, Q^r = P W_q,r, or
        through the content projections W_k, W_q with ``share_att_key``."""
        rel = self.pos_dropout(relative.embeddings[relative.index.rows])
        width = self.num_heads * self.head_dim
        if self.share_att_key:
            shared = nn.functional.linear(rel, self.qkv.weight[:2 * width],
                                          self.qkv.bias[:2 * width])
            queries, keys = (self.heads(t) for t in shared.split(width, -1))
            keys = keys if "c2p" in self.terms else None
            queries = queries if "p2c" in self.terms else None
        else:
            keys = None if self.pos_key_proj is None else self.heads(self.pos_key_proj(rel))
            queries = (None if self.pos_query_proj is None
                       else self.heads(self.pos_query_proj(rel)))
        return disentangled_bias(q, k, keys, queries, relative.index, self.scale)

    def prune_heads(self, heads) -> None:
        """Remove ``heads`` (positions among the current ones) from every projection."""
        keep = kept_heads(self.num_heads, heads)
        d, width = self.head_dim, self.num_heads * self.head_dim
        index = head_index(keep, d)
        self.qkv = prune_linear(self.qkv, head_index(keep, d, 3, width), 0)
        for name in ("pos_key_proj", "pos_query_proj"):
            if getattr(self, name) is not None:
                setattr(self, name, prune_linear(getattr(self, name), index, 0))
        self.out = prune_linear(self.out, index, 1)
        self.num_heads = len(keep)


class ConvLayer(nn.Module):
    """v2-xlarge's convolution beside the first layer: LayerNorm(h_1 + act(conv(E))) at the
    real tokens (zero at padding), E the embeddings (module docstring)."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        H, kernel = config.hidden_size, config.conv_kernel_size
        self.conv = nn.Conv1d(H, H, kernel, padding=(kernel - 1) // 2, groups=config.conv_groups)
        self.act = activation(config.conv_act)
        self.norm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, embeddings: Tensor, layer_output: Tensor, tokens: Tensor | None) -> Tensor:
        """``tokens`` [B, T] (1 = token) or None (no padding)."""
        out = self.conv(embeddings.transpose(1, 2)).transpose(1, 2)
        if tokens is not None:
            out = out * tokens[..., None].to(out.dtype)
        out = self.norm(layer_output + self.act(self.dropout(out)))
        return out if tokens is None else out * tokens[..., None].to(out.dtype)


class DebertaV2Encoder(nn.Module):
    """The layers, P (``rel_embeddings``) and its LayerNorm, and the convolution layer."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.layers = nn.ModuleList(DebertaLayer(config, DebertaV2SelfAttention(config))
                                    for _ in range(config.num_hidden_layers))
        self.span, self.buckets = config.relative_span, config.position_buckets
        self.max_relative = config.relative_positions
        self.rel_embeddings = (nn.Embedding(2 * self.span, config.hidden_size)
                               if config.relative_attention else None)
        self.rel_norm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                         if "layer_norm" in config.norm_rel_ebd.lower() else None)
        self.conv = ConvLayer(config) if config.conv_kernel_size > 0 else None

    def relative(self, length: int, device: torch.device) -> Relative | None:
        """P (normalised where ``norm_rel_ebd`` says) and the bucketed distances of a sequence
        of ``length``."""
        if self.rel_embeddings is None:
            return None
        table = self.rel_embeddings.weight
        if self.rel_norm is not None:
            table = self.rel_norm(table)
        return Relative(table, relative_index(length, self.span, self.buckets,
                                              self.max_relative, device))

    def forward(self, x: Tensor, attention_mask: Tensor | None, output_hidden_states: bool = False,
                probes: list[HeadProbe] | None = None
                ) -> tuple[Tensor, tuple[Tensor, ...] | None]:
        hidden_states = [x] if output_hidden_states else None
        relative = self.relative(x.shape[1], x.device)
        mask = padding_mask(attention_mask)
        embeddings = x
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, relative, probe=None if probes is None else probes[i])
            if i == 0 and self.conv is not None:
                tokens = attention_mask if attention_mask is not None and \
                    attention_mask.ndim == 2 else None
                x = self.conv(embeddings, x, tokens)
            if hidden_states is not None:
                hidden_states.append(x)
        return x, None if hidden_states is None else tuple(hidden_states)


class DebertaV2Model(PrunableHeads, nn.Module):
    """Embeddings (no absolute positions unless ``position_biased_input``) + the encoder; no
    pooler (the classification head pools the first token)."""

    def __init__(self, config: DebertaV2Config, add_pooling_layer: bool = False):
        super().__init__()
        self.config = config
        self.embeddings = DebertaEmbeddings(config, absolute=False)
        self.encoder = DebertaV2Encoder(config)
        self.apply(partial(init_normal_, std=config.initializer_range))
        self.prune_configured_heads()

    def head_layers(self) -> list[nn.Module]:
        return [layer.attention for layer in self.encoder.layers]

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_hidden_states: bool = False,
                position_ids: Tensor | None = None, output_attentions: bool = False,
                head_mask: Tensor | None = None) -> EncoderOutput:
        """As v1's (``deberta.DebertaModel.forward``)."""
        x = self.embeddings(input_ids, token_type_ids, attention_mask, position_ids)
        probes = head_probes(head_mask, output_attentions, len(self.encoder.layers))
        x, hidden_states = self.encoder(x, attention_mask, output_hidden_states, probes)
        return EncoderOutput(x, None, hidden_states, attentions_of(probes))


class DebertaV2ForMaskedLM(EncoderForMaskedLM):
    """DeBERTa-v2 with BERT's MLM head (``mlm_head``), as transformers' ``DebertaV2ForMaskedLM``:
    ``forward`` is the encoder's."""

    def __init__(self, config: DebertaV2Config):
        super().__init__(config, DebertaV2Model(config), "deberta")
