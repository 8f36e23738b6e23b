"""DeBERTa: disentangled attention and an enhanced mask decoder.

He et al. 2021, "DeBERTa: Decoding-enhanced BERT with Disentangled Attention".
§3.1, Eq. 2-4: a token is represented by its content H and, apart, by relative positions P; the
attention score of tokens i, j sums content-to-content, content-to-position and
position-to-content terms, A_ij = Q^c_i K^c_j + Q^c_i K^r_δ(i,j) + K^c_j Q^r_δ(j,i), scaled by
1/sqrt(3d), with δ(i, j) the distance i - j clipped to [-k, k) and P (2k x H relative position
embeddings) shared across layers (K^r = P W_k,r, Q^r = P W_q,r). Everything else is BERT's
post-LN layer. §3.2, the enhanced mask decoder (EMD): absolute positions enter only after the
Transformer layers, before the MLM softmax: the last layer is run twice more (shared weights,
n = 2) with queries H_{L-1} + P_abs and keys/values H_{L-1}. As in the released code, a model
with ``position_biased_input`` (absolute positions added to the input, as transformers' default
config) has no EMD.

Field names of ``DebertaConfig`` equal transformers' ``DebertaConfig`` keys; the fused ``in_proj``
keeps transformers' layout (per head: query, key, value rows), so weights map 1:1.
"""

from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from lit_models.nets.attention import HeadProbe, attend, attentions_of, head_probes
from lit_models.nets.bert import BertConfig
from lit_models.nets.blocks import FeedForward, init_normal_, padding_mask
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
class DebertaConfig(BertConfig):
    """Defaults are DeBERTa-base (§4.1, Table 8: L=12, H=768, A=12, k=512, GPT-2's BPE)."""

    vocab_size: int = 50265
    type_vocab_size: int = 0  # no segment embeddings
    layer_norm_eps: float = 1e-7
    relative_attention: bool = True
    max_relative_positions: int = -1  # k; < 1: max_position_embeddings
    position_biased_input: bool = False  # absolute positions in the input (then no EMD)
    pos_att_type: list[str] = field(default_factory=lambda: ["c2p", "p2c"])

    def __post_init__(self) -> None:
        if isinstance(self.pos_att_type, str):  # older config.json files: "c2p|p2c"
            self.pos_att_type = [t.strip() for t in self.pos_att_type.lower().split("|")]
        self.pos_att_type = list(self.pos_att_type or [])
        unknown = set(self.pos_att_type) - {"c2p", "p2c"}
        if unknown:
            raise ValueError(f"pos_att_type {sorted(unknown)}: use a subset of ['c2p', 'p2c']")

    @property
    def relative_positions(self) -> int:
        """k: relative distances are clipped to [-k, k)."""
        return self.max_relative_positions if self.max_relative_positions >= 1 \
            else self.max_position_embeddings


class DebertaEmbeddings(nn.Module):
    """Dropout(LayerNorm(tokens [+ absolute positions] [+ segments]) * not-pad) (§3). The
    absolute position table is there with ``position_biased_input`` or for the enhanced mask
    decoder (``absolute``: v1's; DeBERTa-v2's nets have none)."""

    def __init__(self, config: DebertaConfig, absolute: bool = True):
        super().__init__()
        H = config.hidden_size
        self.max_positions = config.max_position_embeddings
        self.position_biased_input = config.position_biased_input
        self.word_embeddings = nn.Embedding(config.vocab_size, H, padding_idx=config.pad_token_id)
        self.position_embeddings = (nn.Embedding(config.max_position_embeddings, H)
                                    if absolute or config.position_biased_input else None)
        self.token_type_embeddings = (nn.Embedding(config.type_vocab_size, H)
                                      if config.type_vocab_size > 0 else None)
        self.norm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None,
                attention_mask: Tensor | None, position_ids: Tensor | None = None) -> Tensor:
        T = input_ids.shape[1]
        if T > self.max_positions:
            raise ValueError(f"sequence length {T} exceeds max_position_embeddings "
                             f"{self.max_positions}; truncate inputs")
        x = self.word_embeddings(input_ids)
        if self.position_biased_input:
            x = x + self.absolute_positions(T, position_ids)
        if self.token_type_embeddings is not None:
            x = x + (self.token_type_embeddings.weight[0] if token_type_ids is None
                     else self.token_type_embeddings(token_type_ids))
        x = self.norm(x)
        if attention_mask is not None and attention_mask.ndim == 2:  # padding -> 0
            x = x * attention_mask[..., None].to(x.dtype)
        return self.dropout(x)

    def absolute_positions(self, T: int, position_ids: Tensor | None) -> Tensor:
        """The absolute position embeddings of 0 .. T - 1, or of ``position_ids`` [B, T]."""
        if position_ids is None:
            return self.position_embeddings.weight[:T]
        return self.position_embeddings(position_ids)


class DisentangledSelfAttention(nn.Module):
    """Multi-head attention with the disentangled score (§3.1, Eq. 4): A = (Q^c K^c^T + c2p +
    p2c) / sqrt(3d) (sqrt((1 + #position terms) d)), through ``attend`` with the position terms
    as its additive bias. ``in_proj`` (no bias) holds per head the query, key and value rows;
    the query and value biases are apart, as in the released model."""

    def __init__(self, config: DebertaConfig):
        super().__init__()
        H, A = config.hidden_size, config.num_attention_heads
        if H % A:
            raise ValueError(f"hidden_size {H} is not divisible by num_attention_heads {A}; pick "
                             "a head count that divides the hidden size")
        self.num_heads, self.head_dim = A, H // A
        self.in_proj = nn.Linear(H, 3 * H, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(H))
        self.v_bias = nn.Parameter(torch.zeros(H))
        self.terms = tuple(config.pos_att_type) if config.relative_attention else ()
        self.scale = position_scale(self.head_dim, len(self.terms))
        self.pos_proj = nn.Linear(H, H, bias=False) if "c2p" in self.terms else None  # W_k,r
        self.pos_q_proj = nn.Linear(H, H) if "p2c" in self.terms else None  # W_q,r
        self.pos_dropout = nn.Dropout(config.hidden_dropout_prob)
        self.dropout = config.attention_probs_dropout_prob
        self.out = nn.Linear(H, H)

    def heads(self, x: Tensor) -> Tensor:
        """[..., T, heads d] -> [..., heads, T, d]."""
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).movedim(-2, -3)

    def forward(self, x: Tensor, mask: Tensor | None, relative: Relative | None,
                query: Tensor | None = None, probe: HeadProbe | None = None) -> Tensor:
        """Keys and values from ``x`` [B, T, H], queries from ``query`` (EMD) or ``x``;
        ``relative`` the shared P and the sequence's distances; ``probe`` masks heads or keeps
        the probabilities."""
        B, T, H = x.shape
        if self.num_heads == 0:  # every head pruned: the output bias alone
            if probe is not None and probe.keep:
                probe.weights = x.new_zeros(B, 0, T, T)
            return self.out(x.new_zeros(B, T, 0))
        projected = self.in_proj(x).view(B, T, self.num_heads, 3, self.head_dim)
        k = projected[..., 1, :].transpose(1, 2)
        v = projected[..., 2, :].transpose(1, 2) + self.v_bias.view(-1, 1, self.head_dim)
        if query is not None:  # the EMD's queries: only their query rows are needed
            projected = self.in_proj(query).view(B, T, self.num_heads, 3, self.head_dim)
        q = projected[..., 0, :].transpose(1, 2) + self.q_bias.view(-1, 1, self.head_dim)
        bias = None
        if self.terms and relative is not None:
            bias = self.relative_scores(q, k, relative)
        dropout = self.dropout if self.training else 0.0
        y = attend(q, k, v, mask, bias, scale=self.scale, dropout=dropout, probe=probe)
        return self.out(y.transpose(1, 2).reshape(B, T, -1))

    def prune_heads(self, heads) -> None:
        """Remove ``heads`` (positions among the current ones) from the content and position
        projections, the query and value biases and W^O."""
        keep = kept_heads(self.num_heads, heads)
        d = self.head_dim
        index = head_index(keep, d)
        self.in_proj = prune_linear(self.in_proj, head_index(keep, 3 * d), 0)
        self.q_bias = nn.Parameter(self.q_bias.detach()[index])
        self.v_bias = nn.Parameter(self.v_bias.detach()[index])
        if self.pos_proj is not None:
            self.pos_proj = prune_linear(self.pos_proj, index, 0)
        if self.pos_q_proj is not None:
            self.pos_q_proj = prune_linear(self.pos_q_proj, index, 0)
        self.out = prune_linear(self.out, index, 1)
        self.num_heads = len(keep)

    def relative_scores(self, q: Tensor, k: Tensor, relative: Relative) -> Tensor | None:
        """c2p + p2c (Eq. 4, ``disentangled.disentangled_bias``) over the rows of P the
        sequence reaches, projected by W_k,r and W_q,r."""
        rel = self.pos_dropout(relative.embeddings[relative.index.rows])
        keys = None if self.pos_proj is None else self.heads(self.pos_proj(rel))
        queries = None if self.pos_q_proj is None else self.heads(self.pos_q_proj(rel))
        return disentangled_bias(q, k, keys, queries, relative.index, self.scale)


class DebertaLayer(nn.Module):
    """BERT's post-LN layer around disentangled attention; with ``query`` (EMD) the residual
    stream is the query's."""

    def __init__(self, config: DebertaConfig, attention: nn.Module | None = None):
        super().__init__()
        H, eps = config.hidden_size, config.layer_norm_eps
        self.attention = attention or DisentangledSelfAttention(config)  # v2 brings its own
        self.attention_norm = nn.LayerNorm(H, eps=eps)
        self.feed_forward = FeedForward(H, config.intermediate_size, config.hidden_act)
        self.ffn_norm = nn.LayerNorm(H, eps=eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: Tensor, mask: Tensor | None, relative: Relative | None,
                query: Tensor | None = None, probe: HeadProbe | None = None) -> Tensor:
        residual = x if query is None else query
        h = self.attention_norm(residual + self.dropout(
            self.attention(x, mask, relative, query, probe)))
        return self.ffn_norm(h + self.dropout(self.feed_forward(h)))


class DebertaEncoder(nn.Module):
    """The layers and the relative position embeddings P they share (§3.1)."""

    def __init__(self, config: DebertaConfig):
        super().__init__()
        self.layers = nn.ModuleList(DebertaLayer(config) for _ in range(config.num_hidden_layers))
        self.rel_embeddings = (nn.Embedding(2 * config.relative_positions, config.hidden_size)
                               if config.relative_attention else None)

    def relative(self, length: int, device: torch.device) -> Relative | None:
        """P and the distances of a sequence of ``length`` (δ clipped to [-k, k), Eq. 3)."""
        if self.rel_embeddings is None:
            return None
        span = self.rel_embeddings.num_embeddings // 2
        return Relative(self.rel_embeddings.weight, relative_index(length, span, device=device))

    def forward(self, x: Tensor, mask: Tensor | None, output_hidden_states: bool = False,
                probes: list[HeadProbe] | None = None
                ) -> tuple[Tensor, tuple[Tensor, ...] | None]:
        hidden_states = [x] if output_hidden_states else None
        relative = self.relative(x.shape[1], x.device)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, relative, probe=None if probes is None else probes[i])
            if hidden_states is not None:
                hidden_states.append(x)
        return x, None if hidden_states is None else tuple(hidden_states)


def _init(module: nn.Module, std: float) -> None:
    init_normal_(module, std)
    if isinstance(module, DisentangledSelfAttention):
        nn.init.zeros_(module.q_bias)
        nn.init.zeros_(module.v_bias)


class DebertaModel(PrunableHeads, nn.Module):
    """Embeddings + disentangled-attention encoder; no pooler (fine-tuning heads pool)."""

    def __init__(self, config: DebertaConfig, add_pooling_layer: bool = False):
        super().__init__()
        self.config = config
        self.embeddings = DebertaEmbeddings(config)
        self.encoder = DebertaEncoder(config)
        self.apply(partial(_init, std=config.initializer_range))
        self.prune_configured_heads()

    def head_layers(self) -> list[nn.Module]:
        return [layer.attention for layer in self.encoder.layers]

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_hidden_states: bool = False,
                position_ids: Tensor | None = None, output_attentions: bool = False,
                head_mask: Tensor | None = None) -> EncoderOutput:
        """As BERT's: ``attention_mask`` [B, T], or [B, T, T] for packed rows; relative
        positions need no ids (a packed example's tokens are contiguous), absolute ones
        (``position_biased_input``, the EMD) read ``position_ids``; ``output_attentions`` and
        ``head_mask`` as BERT's."""
        x = self.embeddings(input_ids, token_type_ids, attention_mask, position_ids)
        probes = head_probes(head_mask, output_attentions, len(self.encoder.layers))
        x, hidden_states = self.encoder(x, padding_mask(attention_mask), output_hidden_states,
                                        probes)
        return EncoderOutput(x, None, hidden_states, attentions_of(probes))


class DebertaForMaskedLM(EncoderForMaskedLM):
    """DeBERTa with BERT's MLM head (``mlm_head``). ``forward`` returns what the head reads: the
    enhanced mask decoder's output (§3.2), or the encoder's with ``position_biased_input``."""

    def __init__(self, config: DebertaConfig):
        super().__init__(config, DebertaModel(config), "deberta")

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_hidden_states: bool = False,
                position_ids: Tensor | None = None, output_attentions: bool = False,
                head_mask: Tensor | None = None) -> EncoderOutput:
        """The attentions and the head mask are the encoder's layers' (not the EMD's)."""
        if self.config.position_biased_input:
            return self.deberta(input_ids, attention_mask, token_type_ids, output_hidden_states,
                                position_ids, output_attentions, head_mask)
        out = self.deberta(input_ids, attention_mask, token_type_ids, output_hidden_states=True,
                           position_ids=position_ids, output_attentions=output_attentions,
                           head_mask=head_mask)
        decoded = self.enhanced_mask_decoder(out.hidden_states[-2], attention_mask, position_ids)
        return EncoderOutput(decoded, None, out.hidden_states if output_hidden_states else None,
                             out.attentions)

    def enhanced_mask_decoder(self, hidden: Tensor, attention_mask: Tensor | None,
                              position_ids: Tensor | None = None) -> Tensor:
        """I = H_{L-1} + absolute positions as queries over H_{L-1}, through the last layer
        twice (§3.2, n = 2 layers sharing weights)."""
        encoder = self.deberta.encoder
        query = hidden + self.deberta.embeddings.absolute_positions(hidden.shape[1], position_ids)
        relative = encoder.relative(hidden.shape[1], hidden.device)
        for _ in range(2):
            query = encoder.layers[-1](hidden, padding_mask(attention_mask), relative, query)
        return query
