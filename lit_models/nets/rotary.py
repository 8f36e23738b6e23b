"""Rotary position embeddings, shared by every architecture that encodes positions by rotating
queries and keys.

Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding", §3.2-3.4
(Eq. 13, 34): the pair of features (x_i, x_{i + d/2}) of a query or key at position m is rotated
by the angle m θ_i, θ_i = base^(-2i/d), so q_m · k_n depends on m - n alone. The halves are
paired as GPT-NeoX and transformers pair them (``rotate_half``), not as interleaved neighbours.
ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer", §2.1.1) uses one base for its
global-attention layers (160,000) and another for its local ones (10,000).
"""

import torch
from torch import Tensor


def rotary_angles(positions: Tensor, dim: int, base: float) -> tuple[Tensor, Tensor]:
    """(cos, sin) of m θ_i for the positions ``positions`` [...] -> [..., dim], each angle twice
    (once per half), in float32 whatever the net's dtype (the angles of long positions need its
    precision)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float,
                                            device=positions.device) / dim))
    freqs = positions[..., None].float() * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x: Tensor) -> Tensor:
    """(x_1, x_2) -> (-x_2, x_1) over the two halves of the last dimension."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate the queries or keys ``x`` [..., d] by the angles (``cos``, ``sin``), which
    broadcast against it (RoFormer Eq. 34: x cos + rotate_half(x) sin), computed in float32."""
    rotated = x.float() * cos + rotate_half(x.float()) * sin
    return rotated.to(x.dtype)
