"""Which tokens of an example a T5-style objective corrupts (Raffel et al. 2020, §3.3; the released
``t5.data.preprocessors`` noise masks, re-written here): True marks a corrupted ("noise") token.

- i.i.d. (§3.3.1-3.3.3, the study's "corrupt 15% of tokens"): each token independently with
  probability ``noise_density`` (``iid_noise_mask``).
- Random spans (§3.3.4, the final objective): exactly round(density x n) corrupted tokens (at
  least 1, at most n - 1) in exactly round(noise / mean span length) spans (at least 1); the noise
  tokens and the kept tokens are each split into that many non-empty segments, uniformly among
  all such splits, and the segments alternate, kept first, so the example ends in a noise span
  (``random_spans_noise_mask``).
- Prefix (§3.3.1's prefix language modeling): the first k tokens, k uniform in 1 .. n - 1
  (``random_prefix_noise_mask``).
- All (§3.3.1's deshuffling): every token.

The masks draw from a ``random.Random``: an example carrying a ``mask_seed`` gets the same mask
every time (``base.ExampleRandomness``).
"""

import random
from dataclasses import dataclass

from datamodules.errors import PlmbenchError


@dataclass(frozen=True)
class SpanConfig:
    noise_density: float = 0.15  # share of corrupted tokens (§3.3.2)
    mean_noise_span_length: float = 3.0  # (§3.3.4)

    def __post_init__(self) -> None:
        if not 0.0 < self.noise_density < 1.0 or self.mean_noise_span_length < 1:
            raise PlmbenchError(
                f"noise_density={self.noise_density} must be in (0, 1) and mean_noise_span_length="
                f"{self.mean_noise_span_length} >= 1; T5 uses 0.15 and 3"
            )

    def counts(self, length: int) -> tuple[int, int]:
        """(noise tokens, noise spans) of an input of ``length`` tokens (Python's round halves
        to even, as tf.round)."""
        length = max(length, 2)
        noise = min(max(round(length * self.noise_density), 1), length - 1)
        return noise, max(round(noise / self.mean_noise_span_length), 1)

    def raw_length(self, max_length: int) -> int:
        """The longest block whose corrupted input (kept tokens, one sentinel per span, </s>)
        fits ``max_length`` tokens (``random_spans_helper``)."""
        length = 1
        while self.corrupted_length(length + 1) <= max_length:
            length += 1
        return length

    def corrupted_length(self, length: int) -> int:
        noise, spans = self.counts(length)
        return length - noise + spans + 1


def random_segmentation(items: int, segments: int, rng: random.Random) -> list[int]:
    """``items`` split into ``segments`` non-empty consecutive parts, each split equally likely:
    ``segments - 1`` distinct cut points among the ``items - 1`` gaps."""
    cuts = sorted(rng.sample(range(1, items), segments - 1))
    bounds = [0, *cuts, items]
    return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


def random_spans_noise_mask(length: int, cfg: SpanConfig, rng: random.Random) -> list[bool]:
    """Kept and noise segments alternating, kept first (module docstring)."""
    noise, spans = cfg.counts(length)
    noise_lengths = random_segmentation(noise, spans, rng)
    kept_lengths = random_segmentation(max(length, 2) - noise, spans, rng)
    mask: list[bool] = []
    for kept, dropped in zip(kept_lengths, noise_lengths, strict=True):
        mask += [False] * kept + [True] * dropped
    return mask[:length]


def iid_noise_mask(length: int, noise_density: float, rng: random.Random) -> list[bool]:
    """Each token corrupted independently with probability ``noise_density``."""
    return [rng.random() < noise_density for _ in range(length)]


def random_prefix_noise_mask(length: int, rng: random.Random) -> list[bool]:
    """The first k of ``length`` >= 2 tokens, k uniform in 1 .. length - 1."""
    prefix = rng.randint(1, length - 1)
    return [i < prefix for i in range(length)]


def full_noise_mask(length: int) -> list[bool]:
    """Every token."""
    return [True] * length
