"""XLNet: two-stream self-attention over Transformer-XL's relative positions and segment memory.

Yang et al. 2019, "XLNet: Generalized Autoregressive Pretraining for Language Understanding".

- §2.3, Eq. 4-5: two streams share every layer's weights. The content stream h_i sees the
  token x_i itself and what the attention mask lets it see; the query stream g_i sees only its
  position i and the context before it in the factorisation order, never x_i. g starts from one
  learned vector (``mask_emb``), h from the token embeddings. Which key each query may see is
  the caller's permutation mask ``perm_mask`` [B, T, T] (1 = i may not attend to j; the content
  stream always sees its own token); the query stream runs only at the predicted positions,
  given by the one-hot ``target_mapping`` [B, num_predict, T] (§2.3 partial prediction).
- §2.4 (Transformer-XL, Dai et al. 2019, §3.3): the score of query i and key j is
  (q_i + u)^T k_j + (q_i + v)^T W_R R_{i-j}, u = ``r_w_bias`` and v = ``r_r_bias`` learned per
  layer (``untie_r``), R sinusoidal encodings of the distance i - j (clamped to ``clamp_len``);
  the previous segment's hidden states (``mems``, at most ``mem_len``, the first ``reuse_len`` of
  each segment cached) are extra keys and values every query may attend to.
- §2.5, relative segment encodings: s_ij = s_+ if i and j are in the same segment else s_-
  (``seg_embed``), adding (q_i + b)^T s_ij (b = ``r_s_bias``) to the score; only whether two
  tokens share a segment matters, so the <cls> segment 2 works as any other.
- Post-LN layers (attention, then a GELU feed-forward) as in the released code; the dot product
  is scaled by 1/sqrt(d_head). The LM head is tied to the token embeddings plus a bias.

Scores go through the shared ``attend`` (SDPA): the content term as q + u against the keys, the
position and segment terms as its additive bias. A query row that may attend to nothing (a
padding row of ``target_mapping``) attends to every key instead of producing NaN. Field names of
``XLNetConfig`` equal transformers' ``XLNetConfig`` keys. Not implemented: ``bi_data`` (the
batch's second half read backwards in pretraining) and tied biases (``untie_r=False``).
"""

import math
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.nets.attention import HeadProbe, attend, attentions_of, head_probes
from lit_models.nets.blocks import FeedForward, init_normal_
from lit_models.nets.pruning import PrunableHeads, kept_heads

#: transformers' model_max_length of a tokenizer without a limit: relative positions have none
NO_LENGTH_LIMIT = int(1e30)


@dataclass
class XLNetConfig:
    """Defaults are XLNet-Base (§3.1 / Appendix A.3: L=12, H=768, A=12, 3072 inner units,
    Unigram vocabulary of 32000 SentencePiece pieces)."""

    vocab_size: int = 32000
    d_model: int = 768
    n_layer: int = 12
    n_head: int = 12
    d_inner: int = 3072
    ff_activation: str = "gelu"
    untie_r: bool = True  # a separate u, v per layer (the released models)
    attn_type: str = "bi"  # "bi": bidirectional; "uni": each query sees only earlier keys
    bi_data: bool = False  # not implemented (module docstring)
    clamp_len: int = -1  # > 0: relative distances clamped to [-clamp_len, clamp_len]
    same_length: bool = False  # "uni": every query sees the same number of keys
    mem_len: int | None = 512  # hidden states kept as the next segment's memory (0/None: all)
    reuse_len: int | None = None  # the first reuse_len positions of a segment are cached
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    pad_token_id: int = 5
    #: heads removed from each layer's weights, by original index (``nets/pruning.py``)
    pruned_heads: dict[int, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}; "
                             "pick a head count that divides d_model")
        if self.attn_type not in ("bi", "uni"):
            raise ValueError(f"attn_type {self.attn_type!r}: use 'bi' or 'uni'")
        if self.bi_data or not self.untie_r:
            raise ValueError("bi_data=true and untie_r=false are not implemented; use "
                             "bi_data=false, untie_r=true (the released XLNet models)")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head

    @property
    def max_length(self) -> int:
        return NO_LENGTH_LIMIT

    # the sizes under the names optimizers, heads and FLOP counters read
    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def num_hidden_layers(self) -> int:
        return self.n_layer

    @property
    def intermediate_size(self) -> int:
        return self.d_inner

    @property
    def num_attention_heads(self) -> int:
        return self.n_head


@dataclass
class XLNetOutput:
    #: content stream [B, T, H]; with ``target_mapping`` the query stream [B, num_predict, H]
    last_hidden_state: Tensor
    #: the content stream at each row's last token (XLNet appends <cls> there), None with
    #: ``target_mapping``: what the sequence summary reads (transformers' summary_type "last")
    pooler_output: Tensor | None
    mems: list[Tensor] | None  # per layer, [B, M, H]: the next segment's memory (``use_mems``)
    hidden_states: tuple[Tensor, ...] | None  # the content stream: input + each layer
    #: the content stream's attention probabilities [B, heads, T, mlen + T] per layer, if asked
    attentions: tuple[Tensor, ...] | None = None


class RelativeAttention(nn.Module):
    """One layer's two-stream relative attention (§2.3-2.5, module docstring). Projections keep
    the released layout [d_model, heads, d_head] and have no biases."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        H, n, d = config.d_model, config.n_head, config.d_head
        for name in ("q", "k", "v", "o", "r"):  # r = W_R, the position-key projection
            setattr(self, name, nn.Parameter(torch.empty(H, n, d)))
        self.r_w_bias = nn.Parameter(torch.empty(n, d))  # u
        self.r_r_bias = nn.Parameter(torch.empty(n, d))  # v
        self.r_s_bias = nn.Parameter(torch.empty(n, d))  # b
        self.seg_embed = nn.Parameter(torch.empty(2, n, d))  # s_+ (same segment), s_-
        self.scale = 1 / math.sqrt(d)
        self.dropout = config.dropout
        self.num_heads = n

    @staticmethod
    def heads(x: Tensor, weight: Tensor) -> Tensor:
        """[B, T, H] x [H, heads, d] -> [B, heads, T, d]."""
        return torch.einsum("bth,hnd->bntd", x, weight)

    def prune_heads(self, heads) -> None:
        """Remove ``heads`` (positions among the current ones) from every per-head tensor."""
        keep = torch.tensor(kept_heads(self.num_heads, heads), dtype=torch.long)
        for name, param in list(self.named_parameters(recurse=False)):
            dim = {"r_w_bias": 0, "r_r_bias": 0, "r_s_bias": 0}.get(name, 1)
            setattr(self, name, nn.Parameter(param.detach().index_select(dim, keep)))
        self.num_heads = len(keep)

    def forward(self, x: Tensor, positions: Tensor, k: Tensor, v: Tensor, k_r: Tensor,
                mask: Tensor | None, other_segment: Tensor | None, qlen: int,
                probe: HeadProbe | None = None) -> Tensor:
        """Attention output [B, Tq, H] (before W^O's residual) of queries ``x`` [B, Tq, H] at
        ``positions`` [B or 1, Tq] of the current segment (length ``qlen``) over keys/values
        ``k``/``v`` [B, heads, K, d] (memory first); ``k_r`` [heads, P, d] the projected
        encodings of distances K .. -qlen + 1; ``mask`` [B, Tq, K] (True = may attend) and
        ``other_segment`` [B, Tq, K] (True = j is in another segment than the query); ``probe``
        masks heads or keeps the probabilities."""
        q = self.heads(x, self.q)
        B, n, Tq, _ = q.shape
        K = k.shape[-2]
        # position term (q + v)^T W_R R_{i-j}: row p of k_r is distance K - p, so key j of the
        # query at position i reads row qlen - i + j (out-of-range rows are masked: "uni")
        position = (q + self.r_r_bias[:, None]) @ k_r.transpose(-1, -2)  # [B, n, Tq, P]
        rows = qlen - positions[..., None] + torch.arange(K, device=q.device)
        rows = rows.clamp(max=k_r.shape[-2] - 1)[:, None].expand(B, n, Tq, K)
        bias = position.gather(-1, rows)
        if other_segment is not None:  # (q + b)^T s_ij, s_ij = seg_embed[same, other]
            segment = torch.einsum("bnqd,snd->bnqs", q + self.r_s_bias[:, None], self.seg_embed)
            bias = bias + torch.where(other_segment[:, None], segment[..., 1:], segment[..., :1])
        if mask is not None:
            mask = (mask | ~mask.any(-1, keepdim=True))[:, None]
        dropout = self.dropout if self.training else 0.0
        y = attend(q + self.r_w_bias[:, None], k, v, mask, bias * self.scale, scale=self.scale,
                   dropout=dropout, probe=probe)
        return torch.einsum("bnqd,hnd->bqh", y, self.o)


class XLNetLayer(nn.Module):
    """Both streams through one relative attention (shared weights) and one feed-forward, each
    followed by dropout, the residual and LayerNorm (post-LN)."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        H, eps = config.d_model, config.layer_norm_eps
        self.attention = RelativeAttention(config)
        self.attention_norm = nn.LayerNorm(H, eps=eps)
        self.feed_forward = FeedForward(H, config.d_inner, config.ff_activation,
                                        dropout=config.dropout)
        self.ffn_norm = nn.LayerNorm(H, eps=eps)
        self.dropout = nn.Dropout(config.dropout)

    def _post(self, x: Tensor, attended: Tensor) -> Tensor:
        h = self.attention_norm(x + self.dropout(attended))
        return self.ffn_norm(h + self.dropout(self.feed_forward(h)))

    def forward(self, h: Tensor, g: Tensor | None, memory: Tensor | None, k_r: Tensor,
                mask_h: Tensor | None, mask_g: Tensor | None, other_segment: Tensor | None,
                targets: Tensor | None, probe: HeadProbe | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """``h`` [B, T, H], ``g`` [B, M, H] at ``targets`` [B, M] (positions), ``memory``
        [B, mlen, H]; masks and ``other_segment`` [B, T, K] by query position. ``probe``: its
        head mask scales both streams' heads, its kept probabilities are the content
        stream's."""
        attention, T = self.attention, h.shape[1]
        context = h if memory is None else torch.cat([memory, h], 1)
        k, v = attention.heads(context, attention.k), attention.heads(context, attention.v)
        k_r = torch.einsum("ph,hnd->npd", k_r, attention.r)
        positions = torch.arange(T, device=h.device)[None]
        h_out = self._post(h, attention(h, positions, k, v, k_r, mask_h, other_segment, T, probe))
        if g is None:
            return h_out, None

        def rows(x: Tensor | None) -> Tensor | None:  # each target's row of a [B, T, K] table
            return None if x is None else x.gather(1, targets[..., None].expand(-1, -1,
                                                                                x.shape[-1]))

        query_probe = None if probe is None or probe.mask is None else HeadProbe(probe.mask)
        g_out = self._post(g, attention(g, targets, k, v, k_r, rows(mask_g), rows(other_segment),
                                        T, query_probe))
        return h_out, g_out


def _init(module: nn.Module, std: float) -> None:
    init_normal_(module, std)
    if isinstance(module, RelativeAttention):
        for param in module.parameters(recurse=False):
            nn.init.normal_(param, std=std)
    elif isinstance(module, XLNetModel):
        nn.init.normal_(module.mask_emb, std=std)


class XLNetModel(PrunableHeads, nn.Module):
    """Token embeddings, ``mask_emb`` (the query stream's start) and the two-stream layers."""

    def __init__(self, config: XLNetConfig, add_pooling_layer: bool = False):
        super().__init__()  # no pooler: the sequence summary is a classification head
        self.config = config
        H = config.d_model
        self.word_embedding = nn.Embedding(config.vocab_size, H)
        self.mask_emb = nn.Parameter(torch.empty(1, 1, H))
        self.layers = nn.ModuleList(XLNetLayer(config) for _ in range(config.n_layer))
        self.dropout = nn.Dropout(config.dropout)
        self.apply(partial(_init, std=config.initializer_range))
        self.prune_configured_heads()

    def head_layers(self) -> list[nn.Module]:
        return [layer.attention for layer in self.layers]

    def relative_encodings(self, qlen: int, klen: int, device: torch.device) -> Tensor:
        """Sinusoidal R for the distances klen, klen - 1, .. down to -qlen + 1 ("bi") or 0
        ("uni"): [P, H] (Vaswani et al. 2017, §3.5, over distances)."""
        H = self.config.d_model
        inv_freq = 1 / torch.pow(10000, torch.arange(0, H, 2.0, device=device) / H)
        end = -qlen if self.config.attn_type == "bi" else -1
        distances = torch.arange(klen, end, -1.0, device=device)
        if self.config.clamp_len > 0:
            distances = distances.clamp(-self.config.clamp_len, self.config.clamp_len)
        angles = distances[:, None] * inv_freq
        return torch.cat([angles.sin(), angles.cos()], -1)

    def visibility(self, attention_mask: Tensor | None, perm_mask: Tensor | None, qlen: int,
                   mlen: int, device: torch.device) -> Tensor | None:
        """[B or 1, T, mlen + T] True where the query stream at i may see key j: the memory
        always, the segment's tokens unless padding or ``perm_mask`` hide them; with "uni" only
        keys j <= mlen + i (and j >= i with ``same_length``). None: everything is visible."""
        visible = torch.ones(1, qlen, qlen, dtype=torch.bool, device=device)
        if attention_mask is not None:
            visible = visible & attention_mask.bool()[:, None, :]
        if perm_mask is not None:
            visible = visible & ~perm_mask.bool()
        visible = F.pad(visible, (mlen, 0), value=True)
        if self.config.attn_type == "uni":
            i = torch.arange(qlen, device=device)[:, None]
            j = torch.arange(qlen + mlen, device=device)[None]
            visible = visible & (j <= mlen + i) & ((j >= i) | (not self.config.same_length))
        elif attention_mask is None and perm_mask is None:
            return None
        return visible

    def cache(self, h: Tensor, memory: Tensor | None) -> Tensor:
        """The next segment's memory from this layer's input ``h`` (the first ``reuse_len``
        positions) after the previous ``memory``: the last ``mem_len`` of them (0/None: all)."""
        reuse_len, mem_len = self.config.reuse_len, self.config.mem_len
        if reuse_len:
            h = h[:, :reuse_len]
        if memory is not None:
            h = torch.cat([memory, h], 1)
        return (h[:, -mem_len:] if mem_len else h).detach()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        mems: list[Tensor] | None = None,
        perm_mask: Tensor | None = None,
        target_mapping: Tensor | None = None,
        use_mems: bool = False,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        head_mask: Tensor | None = None,
    ) -> XLNetOutput:
        """``input_ids`` [B, T] (``attention_mask`` 1 = token, 0 = pad; pads on either side);
        ``mems`` one [B, mlen, H] per layer; ``perm_mask`` [B, T, T] (1 = may not attend);
        ``target_mapping`` [B, M, T] one-hot rows (an all-zero row: a padding target);
        ``output_attentions`` and ``head_mask`` as BERT's (``attention.head_probes``)."""
        B, T = input_ids.shape
        device = input_ids.device
        mlen = 0 if mems is None else mems[0].shape[1]
        visible_g = self.visibility(attention_mask, perm_mask, T, mlen, device)
        visible_h = None
        if visible_g is not None:  # the content stream also sees its own token
            own = torch.eye(T, dtype=torch.bool, device=device)
            own = F.pad(own, (mlen, 0))
            visible_h = visible_g | own
        other_segment = None
        if token_type_ids is not None:
            keys = F.pad(token_type_ids, (mlen, 0))  # the memory is segment 0
            other_segment = token_type_ids[:, :, None] != keys[:, None, :]
        k_r = self.dropout(self.relative_encodings(T, T + mlen, device))
        h = self.dropout(self.word_embedding(input_ids))
        g = targets = None
        if target_mapping is not None:
            g = self.dropout(self.mask_emb.expand(B, target_mapping.shape[1], -1))
            targets = target_mapping.argmax(-1)
        new_mems = [] if use_mems else None
        hidden_states = [h] if output_hidden_states else None
        probes = head_probes(head_mask, output_attentions, len(self.layers))
        for i, layer in enumerate(self.layers):
            memory = None if mems is None else mems[i]
            if new_mems is not None:
                new_mems.append(self.cache(h, memory))
            h, g = layer(h, g, memory, k_r, visible_h, visible_g, other_segment, targets,
                         None if probes is None else probes[i])
            if hidden_states is not None:
                hidden_states.append(h)
        out = self.dropout(h if g is None else g)
        pooled = None
        if g is None:  # each row's last token, wherever the padding is
            last = T - 1 if attention_mask is None else (
                attention_mask * torch.arange(1, T + 1, device=device)).argmax(1)
            pooled = out[torch.arange(B, device=device), last]
        return XLNetOutput(out, pooled, new_mems,
                           None if hidden_states is None else tuple(hidden_states),
                           attentions_of(probes))


class XLNetLMHeadModel(nn.Module):
    """XLNet with its language-modelling head: logits = h E^T + b, E the token embeddings (tied).
    ``forward`` returns hidden states (the query stream with ``target_mapping``); ``logits``
    applies the head where a loss needs it."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.config = config
        self.transformer = XLNetModel(config)
        self.lm_bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, mems: list[Tensor] | None = None,
                perm_mask: Tensor | None = None, target_mapping: Tensor | None = None,
                use_mems: bool = False, output_hidden_states: bool = False,
                output_attentions: bool = False, head_mask: Tensor | None = None
                ) -> XLNetOutput:
        return self.transformer(input_ids, attention_mask, token_type_ids, mems, perm_mask,
                                target_mapping, use_mems, output_hidden_states,
                                output_attentions, head_mask)

    def logits(self, hidden: Tensor) -> Tensor:
        """[..., H] -> vocabulary logits [..., V]."""
        return F.linear(hidden, self.transformer.word_embedding.weight, self.lm_bias)
