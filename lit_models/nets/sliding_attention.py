"""Sliding-window attention with global tokens, in memory linear in the sequence length.

Beltagy et al. 2020, "Longformer: The Long-Document Transformer", §3.1: each token attends to
the w/2 tokens on either side of it (a window of w + 1), and a few chosen tokens attend to, and
are attended by, every token ("global attention"); §3.1 also gives the global attention its own
projections (in ``lit_models/nets/longformer.py``). The banded product is computed block by
block: the sequence is cut into blocks of w/2 queries and each block attends to its own and the
two neighbouring blocks' keys (3 w/2 keys, masked to |i - j| <= w/2) plus the global tokens'
keys, so time and memory grow as T (w + g) rather than T^2. Every block goes through
``scaled_dot_product_attention`` (a batch of small dense attentions).
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def _blocks(x: Tensor, size: int) -> Tensor:
    """[B, H, T, d] (T a multiple of size) -> [B, H, T / size, size, d]."""
    B, H, T, d = x.shape
    return x.view(B, H, T // size, size, d)


def sliding_window_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    one_sided: int,
    key_padding: Tensor,
    global_index: Tensor | None = None,
    global_valid: Tensor | None = None,
    dropout: float = 0.0,
) -> Tensor:
    """``q``, ``k``, ``v`` [B, H, T, d] -> [B, H, T, d]: query i attends to the keys j with
    |i - j| <= ``one_sided`` that are neither padding nor global, and to every global key.

    ``key_padding`` [B, T] True at padding; ``global_index`` [B, G] the positions of the global
    tokens (``global_valid`` [B, G] False on the slots of rows with fewer of them). Padding
    queries keep themselves in view, so no softmax row is empty.
    """
    B, H, T, d = q.shape
    w = one_sided
    pad = -T % w
    if pad:  # whole blocks: pad with masked keys and dropped queries
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        key_padding = F.pad(key_padding, (0, pad), value=True)
    n = (T + pad) // w
    is_global = torch.zeros_like(key_padding)
    if global_index is not None:
        is_global.scatter_(1, global_index, global_valid)
    key_ok = ~key_padding & ~is_global  # global keys are attended through their own columns

    def neighbours(x: Tensor, fill) -> Tensor:
        """[B, *, n, w, ...] blocks -> [B, *, n, 3w, ...]: previous, own and next block."""
        axis = 2 if x.dim() == 5 else 1
        padded = torch.cat([x.narrow(axis, 0, 1).clone().fill_(fill), x,
                            x.narrow(axis, 0, 1).clone().fill_(fill)], axis)
        return torch.cat([padded.narrow(axis, i, n) for i in range(3)], axis + 1)

    k_band = neighbours(_blocks(k, w), 0.0)  # [B, H, n, 3w, d]
    v_band = neighbours(_blocks(v, w), 0.0)
    ok_band = neighbours(key_ok.view(B, n, w), False)  # [B, n, 3w]
    offset = torch.arange(3 * w, device=q.device)[None, :] - w - torch.arange(w, device=q.device)[
        :, None]  # key j - query i, [w, 3w]
    mask = (offset.abs() <= w) & ok_band[:, :, None, :]  # [B, n, w, 3w]
    empty = ~mask.any(-1, keepdim=True)
    mask = mask | (empty & (offset == 0))  # rows with nothing in view see themselves
    if global_index is not None:
        G = global_index.shape[1]
        gather = global_index[:, None, :, None].expand(B, H, G, d)
        k_glob = k.gather(2, gather)[:, :, None].expand(B, H, n, G, d)
        v_glob = v.gather(2, gather)[:, :, None].expand(B, H, n, G, d)
        k_band, v_band = torch.cat([k_band, k_glob], 3), torch.cat([v_band, v_glob], 3)
        mask = torch.cat([mask, global_valid[:, None, None, :].expand(B, n, w, G)], -1)

    def flat(x: Tensor) -> Tensor:
        """[B, H, n, *, d] -> [B n, H, *, d]: a batch of small dense attentions."""
        return x.transpose(1, 2).reshape(B * n, H, x.shape[-2], d)

    out = F.scaled_dot_product_attention(flat(_blocks(q, w)), flat(k_band), flat(v_band),
                                         attn_mask=mask.reshape(B * n, 1, w, -1),
                                         dropout_p=dropout)
    return out.view(B, n, H, w, d).transpose(1, 2).reshape(B, H, n * w, d)[:, :, :T]
