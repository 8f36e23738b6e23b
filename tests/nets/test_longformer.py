"""Longformer's blocked sliding window equals dense attention under the band mask (parity with
transformers, with and without global attention, windows of different sizes per layer:
``tests/nets/test_parity.py``; exports and the other contracts: ``tests/contracts``)."""

import torch
import torch.nn.functional as F

from lit_models.nets.sliding_attention import sliding_window_attention


def test_blocked_sliding_window_equals_dense_banded_attention():
    torch.manual_seed(0)
    B, H, T, d, w = 2, 3, 23, 8, 3
    q, k, v = torch.randn(3, B, H, T, d).unbind(0)
    padding = torch.zeros(B, T, dtype=torch.bool)
    padding[1, 17:] = True
    glob = torch.tensor([[4, 20], [2, 0]])
    valid = torch.tensor([[True, True], [True, False]])
    out = sliding_window_attention(q, k, v, w, padding, glob, valid)
    i = torch.arange(T)
    is_global = torch.zeros(B, T, dtype=torch.bool)
    is_global[0, [4, 20]] = True
    is_global[1, 2] = True
    mask = ((i[:, None] - i[None, :]).abs() <= w) & ~padding[:, None, :]
    mask = (mask | is_global[:, None, :])[:, None]
    dense = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    real = ~padding
    assert (out.transpose(1, 2)[real] - dense.transpose(1, 2)[real]).abs().max() < 1e-6
