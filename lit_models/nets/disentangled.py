"""Disentangled attention's relative-position terms, shared by DeBERTa (``deberta.py``) and
DeBERTa-v2/v3 (``deberta_v2.py``).

He et al. 2021, "DeBERTa: Decoding-enhanced BERT with Disentangled Attention", §3.1. Eq. 3 defines
the relative distance δ(i, j) = i - j clipped to [0, 2k) around k (2k relative position embeddings
P); Eq. 4 the two position terms of the attention score between query i and key j,

    c2p_ij = Q^c_i (K^r_δ(i,j))^T        (content-to-position, K^r = P W_k,r)
    p2c_ij = K^c_j (Q^r_δ(j,i))^T        (position-to-content, Q^r = P W_q,r)

added to the content term and scaled by 1/sqrt(3d) (Eq. 4), here 1/sqrt((1 + #terms) d). The
released DeBERTa-v2 code and checkpoints (the authors' repository, "DeBERTa-v2": what
transformers' ``DebertaV2Model`` implements) bucket the distances logarithmically beyond half of
``position_buckets``, as T5 does (Raffel et al. 2020, §2.1): ``log_bucket``. Both terms are
additive biases of softmax(Q K^T * scale + bias), so attention itself still runs through SDPA
(``attention.attend``).

Only the rows of P that a sequence of length T can reach are projected: distances |δ| < T give
buckets in [-b(T-1), b(T-1)], so the rows k - b(T-1) .. k + b(T-1) (``RelativeIndex.rows``), not
all 2k (with k = 256 buckets and GLUE's T = 128, half of them).
"""

import math
from functools import lru_cache
from typing import NamedTuple

import torch
from torch import Tensor


def log_bucket(delta: Tensor, buckets: int, max_position: int) -> Tensor:
    """The released DeBERTa-v2 bucketing of relative distances ``delta`` (long): |δ| <= b/2 keeps
    δ, a longer one becomes sign(δ) (b/2 + ceil(log(|δ| / (b/2)) / log((m - 1) / (b/2)) (b/2 - 1)))
    for b = ``buckets`` and m = ``max_position`` (float32, as released, so buckets agree)."""
    mid = buckets // 2
    beyond = delta.abs() > mid
    far = torch.where(beyond, delta.abs(), torch.full_like(delta, mid))  # no log(0) below
    scale = torch.tensor((max_position - 1) / mid).log()
    log_pos = torch.ceil(torch.log(far / mid) / scale * (mid - 1)) + mid
    return torch.where(beyond, log_pos.to(delta.dtype) * delta.sign(), delta)


class RelativeIndex(NamedTuple):
    """Which projected row of P each (query i, key j) pair reads: ``index`` [T, T] (long) into
    P's rows ``rows`` (a slice of its 2k), clamp(bucket(i - j) + k, 0, 2k - 1) - rows.start."""

    index: Tensor
    rows: slice


@lru_cache(maxsize=64)
def relative_index(length: int, span: int, buckets: int = 0, max_position: int = 0,
                   device: torch.device | None = None) -> RelativeIndex:
    """The ``RelativeIndex`` of a sequence of ``length`` over P of 2 ``span`` rows; ``buckets`` >
    0 buckets the distances (``log_bucket``, up to ``max_position``). Built on the CPU (where the
    reachable rows are read without a device synchronisation), then moved to ``device``; kept
    per length and device (read, never written), so a forward builds none."""
    positions = torch.arange(length)
    delta = positions[:, None] - positions[None, :]
    if buckets > 0 and max_position > 0:
        delta = log_bucket(delta, buckets, max_position)
    index = (delta + span).clamp(0, 2 * span - 1)
    start, stop = int(index.min()), int(index.max()) + 1
    return RelativeIndex((index - start).to(device), slice(start, stop))


def position_scale(head_dim: int, terms: int) -> float:
    """1/sqrt((1 + terms) d): Eq. 4's 1/sqrt(3d) with both position terms."""
    return 1 / math.sqrt(head_dim * (1 + terms))


def disentangled_bias(q: Tensor, k: Tensor, position_keys: Tensor | None,
                      position_queries: Tensor | None, relative: RelativeIndex,
                      scale: float) -> Tensor | None:
    """c2p + p2c (Eq. 4), scaled: [B, heads, T, T] for content queries ``q`` and keys ``k``
    [B, heads, T, d] and the projected rows of P, ``position_keys`` (K^r, for c2p) and
    ``position_queries`` (Q^r, for p2c), [heads, rows, d] or None where the term is off."""
    B, heads, T, _ = q.shape
    index = relative.index.expand(B, heads, T, T)
    score = None
    if position_keys is not None:  # c2p_ij = Q^c_i . K^r_δ(i,j)
        score = (q @ position_keys.transpose(-1, -2)).gather(-1, index)
    if position_queries is not None:  # p2c_ij = K^c_j . Q^r_δ(j,i): at [j, i], read δ(i, j)
        p2c = (k @ position_queries.transpose(-1, -2)).gather(-1, index.transpose(-1, -2))
        score = p2c.transpose(-1, -2) if score is None else score + p2c.transpose(-1, -2)
    return None if score is None else score * scale


class Relative(NamedTuple):
    """What every layer of a forward reads for its position terms: P (2k x H, shared by the
    layers, §3.1) and the ``RelativeIndex`` of the sequence's length."""

    embeddings: Tensor
    index: RelativeIndex
