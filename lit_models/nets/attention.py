"""Multi-head attention shared by every architecture in ``lit_models/nets``: self-attention
(encoders, decoders) and cross-attention (encoder-decoder), with an optional key/value cache.

Vaswani et al. 2017, "Attention Is All You Need": scaled dot-product attention (§3.2.1, Eq. 1)
softmax(Q K^T / sqrt(d_k)) V, multi-head attention (§3.2.2), decoder self-attention masked so
that position i sees positions <= i (§3.2.3), and encoder-decoder attention whose queries come
from the decoder and keys/values from the encoder output (§3.2.3). Generalised here to
softmax(Q K^T * scale + bias + mask) V, where

- ``scale`` defaults to 1/sqrt(d_k); T5 uses 1 (Raffel et al. 2020, "Exploring the Limits of
  Transfer Learning with a Unified Text-to-Text Transformer", §2.1: the scaling is folded into
  the initialisation), DeBERTa 1/sqrt(3 d_k) (He et al. 2021, "DeBERTa", §3.1);
- ``bias`` is an additive float term broadcastable to [B, heads, Tq, Tk]: T5's learned bucketed
  relative position bias (Raffel et al. 2020, §2.1), or another relative-position score;
- ``mask`` is boolean (True = may attend): padding, and the causal triangle of decoders.

Everything runs through ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) so GPUs get
the flash / memory-efficient kernels: with no mask and no bias it gets ``attn_mask=None``, and a
causal pass without padding, bias or cache takes SDPA's own ``is_causal`` fast path.

On request, attention runs eagerly instead (``eager_attention``): the probabilities are
materialised so a ``HeadProbe`` can keep them (what the layers look at: Clark et al. 2019, "What
Does BERT Look At?", §2) and scale each head's by a mask ξ_h (Michel et al. 2019, "Are Sixteen
Heads Really Better than One?", §3, Eq. 1-2: 0 removes the head, and the gradient with respect to
ξ_h is its importance). Without a probe nothing changes: SDPA, as above.

A padded batch may run unpadded (``Unpadding``): every position-wise computation (projections,
feed-forward, norms, dropout) over its N real tokens only, [N, H] instead of [B, T, H], and the
tokens put back in their rows for the attention itself, as NVIDIA's BERT ("unpad") and
FasterTransformer ("remove padding") do. The outputs at real tokens are unchanged.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.nets.pruning import head_index, kept_heads, prune_linear


@dataclass
class HeadProbe:
    """What is asked of one layer's attention besides its output; a layer given one attends
    eagerly (``eager_attention``).

    ``mask`` [heads], or [B, heads] (one per example), multiplies each head's attention
    probabilities: ξ_h of Michel et al. 2019 (§3, Eq. 1: MHAtt(x) = Σ_h ξ_h Att_h(x) W^O_h), as
    transformers' ``head_mask`` did (after the attention dropout). With ``keep``, the
    probabilities [B, heads, Tq, Tk] (after dropout and the mask, as transformers returns them)
    are left in ``weights``.
    """

    mask: Tensor | None = None
    keep: bool = False
    weights: Tensor | None = None

    def apply(self, probabilities: Tensor) -> Tensor:
        """Scale ``probabilities`` [B, heads, Tq, Tk] by the mask; keep them if asked."""
        if self.mask is not None:
            heads = probabilities.shape[1]
            if self.mask.shape[-1] != heads:
                raise ValueError(f"head_mask has {self.mask.shape[-1]} heads for a layer of "
                                 f"{heads}; give one value per head of each layer")
            probabilities = probabilities * self.mask.to(probabilities)[..., None, None]
        if self.keep:
            self.weights = probabilities
        return probabilities


def head_probes(head_mask: Tensor | Sequence[Tensor] | None, output_attentions: bool,
                num_layers: int) -> list[HeadProbe] | None:
    """One ``HeadProbe`` per layer for a net's ``forward(output_attentions=, head_mask=)``; None
    when neither is asked, so every layer keeps SDPA. ``head_mask``: [layers, heads], [heads]
    (the same for every layer), [B, layers, heads] (each example its own: its gradient is then
    each example's, as Michel et al.'s expectation of |dL/dξ_h| needs), or one tensor per layer
    (a pruned net, whose layers have different head counts)."""
    if head_mask is None and not output_attentions:
        return None
    if head_mask is None:
        masks = [None] * num_layers
    elif isinstance(head_mask, Tensor):
        if head_mask.ndim == 1:
            head_mask = head_mask.expand(num_layers, -1)
        if head_mask.ndim not in (2, 3) or head_mask.shape[-2] != num_layers:
            raise ValueError(f"head_mask of shape {tuple(head_mask.shape)} for {num_layers} "
                             "layers; give [layers, heads], [heads] or [batch, layers, heads]")
        masks = list(head_mask.unbind(-2))
    else:
        masks = list(head_mask)
        if len(masks) != num_layers:
            raise ValueError(f"{len(masks)} head masks for {num_layers} layers; give one per layer")
    return [HeadProbe(mask, output_attentions) for mask in masks]


def attentions_of(probes: Sequence[HeadProbe] | None) -> tuple[Tensor, ...] | None:
    """Each layer's kept attention probabilities, None where none were asked for."""
    if probes is None or not probes[0].keep:
        return None
    return tuple(probe.weights for probe in probes)


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    dropout: float = 0.0,
    probe: HeadProbe | None = None,
) -> Tensor:
    """softmax(q k^T * scale + bias + mask) v for ``q`` [B, heads, Tq, d], ``k``/``v``
    [B, heads, Tk, d] -> [B, heads, Tq, d]; ``scale`` None = 1/sqrt(d).

    ``mask`` (boolean, True = may attend) and ``bias`` (float) broadcast to [B, heads, Tq, Tk].
    ``causal``: the queries are the last Tq of Tk positions (Tk - Tq earlier ones are cached), so
    query i, at absolute position Tk - Tq + i, sees keys 0 .. Tk - Tq + i. With a ``probe``, the
    eager path (``eager_attention``) instead of SDPA.
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    if causal and Tq == 1:  # the newest position sees every key
        causal = False
    if causal and (mask is not None or bias is not None or Tq != Tk or probe is not None):
        # SDPA refuses attn_mask with is_causal, and its triangle is aligned top-left (no cache)
        triangle = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        mask = triangle if mask is None else mask & triangle
        causal = False
    if probe is not None:
        return eager_attention(q, k, v, mask, bias, scale, dropout, probe)
    if bias is not None:
        bias = bias.to(q.dtype)
        mask = bias if mask is None else torch.where(mask, bias, float("-inf"))
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal, scale=scale
    )


def eager_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None,
                    scale: float | None, dropout: float, probe: HeadProbe) -> Tensor:
    """``attend`` written out (Vaswani et al. 2017, Eq. 1), the probabilities materialised for
    the ``probe`` to scale and keep; masked scores are the dtype's lowest value, as transformers'
    eager attention, so a row with nothing in view attends uniformly instead of giving NaN."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probabilities = F.dropout(scores.softmax(-1), dropout) if dropout else scores.softmax(-1)
    return probe.apply(probabilities) @ v


class _TakeRows(torch.autograd.Function):
    """``x.index_select(0, positions)`` for distinct ``positions``: the gradient goes back by a
    copy into zeros, where index_select's own backward accumulates (index_add), several times
    slower on CPU."""

    @staticmethod
    def forward(ctx, x: Tensor, positions: Tensor) -> Tensor:
        ctx.save_for_backward(positions)
        ctx.rows = x.shape[0]
        return x.index_select(0, positions)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (positions,) = ctx.saved_tensors
        return grad.new_zeros(ctx.rows, *grad.shape[1:]).index_copy_(0, positions, grad), None


#: whether ``Unpadding.of`` unpads (``kept_padded`` turns it off for a measurement)
_UNPADDING = [True]


@contextmanager
def kept_padded() -> Iterator[None]:
    """Padded batches run padded inside this block (``plmbench perf``'s "plmbench padded"
    rows: what unpadding gains, on the same net and batch)."""
    _UNPADDING.append(False)
    try:
        yield
    finally:
        _UNPADDING.pop()


@dataclass
class Unpadding:
    """Where a padded [B, T] batch's real tokens are: ``positions``, flat indices into B x T."""

    positions: Tensor
    batch: int
    length: int
    #: each row's token count, in row order: the packed sequences' lengths
    #: (``varlen_attention``), known on the host
    lengths: tuple[int, ...] = ()

    @classmethod
    def of(cls, attention_mask: Tensor | None) -> "Unpadding | None":
        """From a [B, T] padding mask (1 = token) on the CPU, where finding the tokens waits for
        no device; None without padding, for pairwise masks, and on accelerators (there the
        count would be a host-device synchronisation)."""
        if (attention_mask is None or attention_mask.ndim != 2 or attention_mask.is_cuda
                or not _UNPADDING[-1]):
            return None
        return cls(attention_mask.flatten().nonzero().squeeze(1), *attention_mask.shape,
                   tuple(attention_mask.bool().sum(1).tolist()))

    @property
    def columns(self) -> Tensor:
        """[N]: each real token's column in its padded row (its position id)."""
        return self.positions % self.length

    def remove(self, x: Tensor) -> Tensor:
        """[B, T, F] -> [N, F], the real tokens."""
        return _TakeRows.apply(x.flatten(0, 1), self.positions)

    def restore(self, x: Tensor) -> Tensor:
        """[N, F] -> [B, T, F], zeros at the padding."""
        flat = x.new_zeros(self.batch * self.length, x.shape[-1])
        return flat.index_copy(0, self.positions, x).view(self.batch, self.length, -1)


def split_heads(x: Tensor, n: int, num_heads: int) -> tuple[Tensor, ...]:
    """[B, T, n * heads * d] whose features are n blocks of all heads -> n [B, heads, T, d]
    views (no copies)."""
    B, T, _ = x.shape
    return x.view(B, T, n, num_heads, -1).transpose(1, 3).unbind(2)


@dataclass
class KVCache:
    """Keys and values [B, heads, T, d] of the positions attended so far (incremental decoding).

    Self-attention appends each step's keys/values; cross-attention fills it once with the
    encoder output's and reuses them at every later step.
    """

    k: Tensor | None = None
    v: Tensor | None = None

    @property
    def length(self) -> int:
        """Positions held: the absolute position of the next query."""
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add [B, heads, t, d] keys/values -> all keys/values held, [B, heads, T + t, d]."""
        if self.k is not None:
            k, v = torch.cat([self.k, k], dim=-2), torch.cat([self.v, v], dim=-2)
        self.k, self.v = k, v
        return k, v


@dataclass
class LayerCache:
    """The caches of one decoder layer: its self-attention and its cross-attention."""

    self_attention: KVCache = field(default_factory=KVCache)
    cross_attention: KVCache = field(default_factory=KVCache)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O (§3.2.2): what self- and cross-attention
    share. Subclasses define the input projections and the output projection ``out``
    ([heads * head_dim] -> hidden).

    ``head_dim`` None = hidden_size / num_heads; T5 sets it apart (``d_kv``), so the inner size
    heads * head_dim may differ from the hidden size. ``bias=False`` drops every Linear bias (T5).
    """

    out: nn.Linear

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        head_dim: int | None = None,
        scale: float | None = None,
    ):
        super().__init__()
        if head_dim is None:
            if hidden_size % num_heads:
                raise ValueError(
                    f"hidden_size {hidden_size} is not divisible by num_attention_heads "
                    f"{num_heads}; pick a head count that divides the hidden size"
                )
            head_dim = hidden_size // num_heads
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.inner_size = num_heads * head_dim
        self.scale = scale
        self.dropout = dropout

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None,
        causal: bool, unpadding: Unpadding | None = None, probe: HeadProbe | None = None,
    ) -> Tensor:
        """Per-head attention, heads concatenated, then W^O: -> [B, Tq, hidden] (the real
        tokens, [N, hidden], with ``unpadding``)."""
        dropout = self.dropout if self.training else 0.0
        y = attend(q, k, v, mask, bias, causal, self.scale, dropout, probe)
        B, _, T, _ = y.shape
        y = y.transpose(1, 2).reshape(B, T, self.inner_size)
        return self.out(y if unpadding is None else unpadding.remove(y))


class MultiHeadSelfAttention(MultiHeadAttention):
    """Q = K = V = x. The per-head projections W^Q_i, W^K_i, W^V_i are one fused ``qkv`` Linear
    whose output features are [all query heads; all key heads; all value heads], so checkpoints
    with separate query/key/value matrices map onto it by concatenation along dim 0."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        head_dim: int | None = None,
        scale: float | None = None,
        bias: bool = True,
    ):
        super().__init__(hidden_size, num_heads, dropout, head_dim, scale)
        self.qkv = nn.Linear(hidden_size, 3 * self.inner_size, bias=bias)
        self.out = nn.Linear(self.inner_size, hidden_size, bias=bias)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        causal: bool = False,
        cache: KVCache | None = None,
        unpadding: Unpadding | None = None,
        probe: HeadProbe | None = None,
    ) -> Tensor:
        """``x`` [B, T, H] -> [B, T, H], or with ``unpadding`` the real tokens [N, H] -> [N, H].
        ``mask``/``bias`` broadcast to [B, heads, T, Tk] where Tk = T plus the positions already
        in ``cache``, which gets this step's keys/values."""
        if self.num_heads == 0:  # every head pruned: the output bias alone
            if probe is not None and probe.keep:
                B, T = x.shape[:2] if unpadding is None else (unpadding.batch, unpadding.length)
                Tk = T + (0 if cache is None else cache.length)
                probe.weights = x.new_zeros(B, 0, T, Tk)
            return self.out(x.new_zeros(*x.shape[:-1], 0))
        qkv = self.qkv(x)
        if unpadding is not None:
            qkv = unpadding.restore(qkv)
        q, k, v = split_heads(qkv, 3, self.num_heads)
        if cache is not None:
            k, v = cache.append(k, v)
        return self.attend(q, k, v, mask, bias, causal, unpadding, probe)

    def prune_heads(self, heads: Sequence[int]) -> None:
        """Remove ``heads`` (positions among the current ones) from W^Q, W^K, W^V and W^O."""
        keep = kept_heads(self.num_heads, heads)
        inner = head_index(keep, self.head_dim)
        self.qkv = prune_linear(self.qkv, head_index(keep, self.head_dim, 3, self.inner_size), 0)
        self.out = prune_linear(self.out, inner, 1)
        self.num_heads, self.inner_size = len(keep), len(keep) * self.head_dim


class MultiHeadCrossAttention(MultiHeadAttention):
    """Queries from ``x`` (decoder), keys and values from ``memory`` (encoder output): a ``q``
    Linear and a fused ``kv`` Linear ([all key heads; all value heads])."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        head_dim: int | None = None,
        scale: float | None = None,
        bias: bool = True,
    ):
        super().__init__(hidden_size, num_heads, dropout, head_dim, scale)
        self.q = nn.Linear(hidden_size, self.inner_size, bias=bias)
        self.kv = nn.Linear(hidden_size, 2 * self.inner_size, bias=bias)
        self.out = nn.Linear(self.inner_size, hidden_size, bias=bias)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """``x`` [B, T, H], ``memory`` [B, S, H] -> [B, T, H]; ``mask``/``bias`` broadcast to
        [B, heads, T, S]. A filled ``cache`` holds memory's keys/values and replaces ``memory``
        (which may then be None); an empty one is filled from it."""
        (q,) = split_heads(self.q(x), 1, self.num_heads)
        if cache is not None and cache.k is not None:
            k, v = cache.k, cache.v
        elif memory is None:
            raise ValueError("cross-attention needs the encoder memory or a filled KVCache")
        else:
            k, v = split_heads(self.kv(memory), 2, self.num_heads)
            if cache is not None:
                cache.append(k, v)
        return self.attend(q, k, v, mask, bias, causal=False)
