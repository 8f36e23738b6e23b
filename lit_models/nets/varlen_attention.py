"""Attention over variable-length sequences packed without padding, a block any encoder may use
on an unpadded batch (``attention.Unpadding``).

A padded batch [B, T] of sequences of lengths L_1 .. L_B attends over B T^2 scores, most of them
masked when the lengths differ; packed ("unpadded", "varlen"), its N = Σ L_b tokens are one
[N, heads, d] tensor cut by the cumulative lengths (cu_seqlens), and each sequence attends to
itself alone, Σ L_b^2 scores, no mask: the packed layout of FlashAttention's variable-length
kernels (Dao et al. 2022, "FlashAttention"), in which NVIDIA's BERT and ModernBERT (Warner et
al. 2024, §2.1.2 "Unpadding") train.
The position-wise layers then run on the N tokens too (``Unpadding``), and nothing is restored
to [B, T] between layers.

Each sequence, or each run of consecutive sequences of one length, is one
``scaled_dot_product_attention`` call on views of the packed tensor, unmasked unless a sliding
window cuts it, which takes SDPA's fused CPU kernel where the padded batch's masked call cannot.
A batch is unpadded on the CPU only (``Unpadding.of``: on an accelerator, counting the tokens
would wait for the device), so this runs there; ``docs/benchmarks.md`` measures it against the
padded batch (``plmbench perf``'s "plmbench padded" rows).
"""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


def window_mask(columns: Tensor, window: int | None) -> Tensor | None:
    """Which keys each query of one sequence sees under a sliding window of ``window`` positions
    either side (|i - j| <= window, by position, ``columns`` [L]); None where the window covers
    the whole sequence."""
    if window is None or int(columns[-1] - columns[0]) <= window:
        return None
    return (columns[:, None] - columns[None, :]).abs() <= window


def varlen_attention(q: Tensor, k: Tensor, v: Tensor, lengths: Sequence[int],
                     columns: Tensor | None = None, window: int | None = None,
                     scale: float | None = None, dropout: float = 0.0) -> Tensor:
    """softmax(q k^T * scale) v within each packed sequence: ``q``, ``k``, ``v`` [N, heads, d]
    hold the sequences of ``lengths`` one after another -> [N, heads, d]. ``window``: each query
    sees the keys within ``window`` positions of it (``columns`` [N]: each token's position;
    consecutive where None); ``scale`` None = 1/sqrt(d); ``dropout`` on the probabilities."""
    if sum(lengths) != q.shape[0]:
        raise ValueError(f"lengths sum to {sum(lengths)} for {q.shape[0]} packed tokens")
    if columns is None:
        columns = torch.cat([torch.arange(n, device=q.device) for n in lengths])
    outputs, start, i = [], 0, 0
    while i < len(lengths):
        length, run = lengths[i], 1  # consecutive sequences of one length: one call
        while i + run < len(lengths) and lengths[i + run] == length:
            run += 1
        end = start + run * length
        if length == 0:  # rows of padding alone: no tokens
            start, i = end, i + run
            continue

        def heads_first(x: Tensor, start=start, end=end, run=run, length=length) -> Tensor:
            return x[start:end].view(run, length, *x.shape[1:]).transpose(1, 2)

        mask = None
        if window is not None:
            masks = [window_mask(columns[s:s + length], window) for s in range(start, end, length)]
            if any(m is not None for m in masks):
                everything = torch.ones(length, length, dtype=torch.bool, device=q.device)
                mask = torch.stack([everything if m is None else m for m in masks])[:, None]
        y = F.scaled_dot_product_attention(heads_first(q), heads_first(k), heads_first(v),
                                           attn_mask=mask, dropout_p=dropout, scale=scale)
        outputs.append(y.transpose(1, 2).reshape(run * length, *q.shape[1:]))
        start, i = end, i + run
    return torch.cat(outputs) if len(outputs) != 1 else outputs[0]
