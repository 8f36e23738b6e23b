"""Span masking and the span boundary objective: SpanBERT's pretraining.

Joshi et al. 2020, "SpanBERT", §3.1: spans are masked until 15% of the tokens are; each span's
length ℓ (in complete words) is drawn from a geometric distribution Geo(p = 0.2) clipped at
ℓ_max = 10 (as the released code does it, the distribution truncated and renormalised over
1..10, mean 3.8), and its start is a random word. As in BERT, 80% of the spans become [MASK]
tokens, 10% random tokens and 10% stay as they are, decided per span, not per token. §3.2: every
masked token is predicted by the MLM head and, from the span's boundary tokens and its position in
the span, by the SBO head (``lit_models/nets/spanbert.py``); the loss is their sum (Eq. 2).
§3.3: single contiguous segments, no next sentence prediction.

Following the released ``masking.py``, a span that would overflow the budget is cut at it, so
every row masks exactly max(1, round(0.15 n)) of its n candidate tokens. Spans never cross a
special token, so both boundaries exist; here they also never overlap nor touch an earlier span
(a start that would is redrawn, keeping the drawn length, so lengths stay unbiased). With
``whole_word=false`` every token is a word (the token-level ablation).
"""

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import (
    IGNORE_INDEX,
    add_label_positions,
    at_positions,
    encoder_inputs,
    label_positions,
)
from datamodules.errors import PlmbenchError
from datamodules.packing import collate_packed
from datamodules.tokenization import TextTokenizer
from lit_models.objectives.flops import EncoderShape
from lit_models.objectives.mlm import MaskedLM, MaskingConfig, MLMCollator, masked_lm_loss


@dataclass
class SpanMaskingConfig(MaskingConfig):
    whole_word: bool = True  # spans of complete words (§3.1)
    geometric_p: float = 0.2  # ℓ ~ Geo(p) (§3.1)
    max_span_length: int = 10  # ℓ_max, in words (§3.1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.geometric_p <= 1.0 or self.max_span_length < 1:
            raise PlmbenchError(
                f"geometric_p={self.geometric_p} must be in (0, 1] and max_span_length="
                f"{self.max_span_length} >= 1; SpanBERT uses 0.2 and 10"
            )

    def length_probabilities(self) -> Tensor:
        """P(ℓ) for ℓ = 1..max_span_length: p (1-p)^(ℓ-1), renormalised."""
        lengths = torch.arange(1, self.max_span_length + 1, dtype=torch.float64)
        weights = self.geometric_p * (1 - self.geometric_p) ** (lengths - 1)
        return weights / weights.sum()


@dataclass
class Spans:
    """One row's masking: the corrupted ids, the labels, and for each masked token its span's
    boundary positions (s - 1, e + 1) and its offset in the span (i - s)."""

    input_ids: Tensor
    labels: Tensor
    left: Tensor
    right: Tensor
    offset: Tensor


def mask_spans(input_ids: Tensor, special: Tensor, word_starts: Tensor, cfg: SpanMaskingConfig,
               mask_id: int, generator: torch.Generator) -> Spans:
    """Span-mask one row ``input_ids`` [T] (§3.1). ``special`` [V] bool marks ids never masked
    nor drawn as random tokens; ``word_starts`` [T] bool marks where words begin."""
    T = len(input_ids)
    candidates = ~special[input_ids]
    n = int(candidates.sum())
    budget = min(n, max(1, round(n * cfg.mlm_probability)))
    # words: [start, end) token ranges; a word begins where word_starts says or after a special
    word_start, word_end = [], []
    previous = False
    for t, (candidate, begins) in enumerate(zip(candidates.tolist(), word_starts.tolist(),
                                                strict=True)):
        if candidate and (begins or not previous):
            word_start.append(t)
            word_end.append(t + 1)
        elif candidate:
            word_end[-1] = t + 1
        previous = candidate
    left, right, offset = (torch.zeros(T, dtype=torch.long) for _ in range(3))
    labels = torch.full((T,), IGNORE_INDEX, dtype=torch.long)
    ids = input_ids.clone()
    taken = torch.zeros(T, dtype=torch.bool)
    lengths = cfg.length_probabilities()
    replacements = (~special).nonzero().squeeze(1)
    masked, attempts, length = 0, 0, None
    while masked < budget and attempts < 100 * budget:
        attempts += 1
        if length is None:  # a start that does not fit is redrawn for the same length
            length = int(torch.multinomial(lengths, 1, generator=generator)) + 1
        w = int(torch.randint(len(word_start), (1,), generator=generator))
        s = word_start[w]
        e = word_end[w]  # extend word by word while the words are contiguous candidates
        for k in range(w + 1, min(w + length, len(word_start))):
            if word_start[k] != e:
                break
            e = word_end[k]
        e = min(e, s + budget - masked)  # cut at the budget, as the released code
        if s == 0 or e == T or taken[s - 1 : e + 1].any():
            continue  # both boundaries exist, and neither is another span's token
        length = None
        span = slice(s, e)
        taken[span] = True
        labels[span] = input_ids[span]
        left[span], right[span] = s - 1, e
        offset[span] = torch.arange(e - s)
        action = float(torch.rand(1, generator=generator))  # 80/10/10 per span (§3.1)
        if action < cfg.mask_token_rate:
            ids[span] = mask_id
        elif action < cfg.mask_token_rate + cfg.random_token_rate:
            draws = torch.randint(len(replacements), (e - s,), generator=generator)
            ids[span] = replacements[draws]
        masked += e - s
    return Spans(ids, labels, left, right, offset)


class SpanMaskingCollator(MLMCollator):
    """Pads a list of examples and span-masks each row (dynamically, or with the generator of
    its ``mask_seed`` for static and eval masks); adds ``span_left``/``_right``/``_offset``."""

    def __init__(self, tokenizer: TextTokenizer, cfg: SpanMaskingConfig, seed: int = 0) -> None:
        super().__init__(tokenizer, cfg, seed)
        if self.word_start_ids is None:  # token-level spans: every token is a word
            self.word_start_ids = torch.ones(tokenizer.vocab_size, dtype=torch.bool)

    def __call__(self, examples: list[dict]) -> dict[str, Tensor]:
        batch = collate_packed(examples, self.pad_id)
        batch.setdefault("token_type_ids", torch.zeros_like(batch["input_ids"]))
        seeds = batch.pop("mask_seed", None)
        if seeds is None and self.cfg.static:
            raise PlmbenchError("static masking needs a mask_seed in every example; build the "
                                "data with PretrainDataModule or add mask_seed ints")
        rows = []
        for row, ids in enumerate(batch["input_ids"]):
            generator = (self._dynamic_generator() if seeds is None
                         else torch.Generator().manual_seed(int(seeds[row])))
            rows.append(mask_spans(ids, self.special, self.word_start_ids[ids], self.cfg,
                                   self.mask_id, generator))
        batch["input_ids"] = torch.stack([r.input_ids for r in rows])
        batch["labels"] = torch.stack([r.labels for r in rows])
        for name in ("left", "right", "offset"):
            batch[f"span_{name}"] = torch.stack([getattr(r, name) for r in rows])
        return add_label_positions(batch)


def span_boundary_loss(hidden: Tensor, batch: Mapping[str, Tensor], head: nn.Module) -> Tensor:
    """Mean cross-entropy of the SBO head's token scores at the masked positions (§3.2)."""
    positions = label_positions(batch)
    seq_len = hidden.shape[1]
    row_start = positions - positions % seq_len  # flat index of each masked token's row start
    left = at_positions(hidden, row_start + at_positions(batch["span_left"], positions))
    right = at_positions(hidden, row_start + at_positions(batch["span_right"], positions))
    logits = head(left, right, at_positions(batch["span_offset"], positions))
    if logits.shape[0] == 0:
        return logits.sum()
    return F.cross_entropy(logits, at_positions(batch["labels"], positions))


class SpanBoundaryObjective(MaskedLM):
    """SpanBERT's pretraining (§3): span masking, L = L_MLM + L_SBO (``sbo=false``: span masking
    with MLM alone, the paper's ablation in Table 6). Eval: both losses per masked token."""

    eval_metrics = ("mlm_loss", "sbo_loss")

    def __init__(self, name: str = "sbo", sbo: bool = True, **masking) -> None:
        super().__init__(name, nsp=False)
        self.masking = SpanMaskingConfig(**masking)
        self.copies = self.masking.dupe_factor if self.masking.static else 1
        self.seeded = self.masking.static
        self.sbo = sbo

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        super().check(net, tokenizer)
        if self.sbo and not hasattr(net, "sbo_head"):
            raise PlmbenchError(f"{type(net).__name__} has no span boundary head; pretrain a "
                                "SpanBERT (model=spanbert-*) or set objective.sbo=false")

    def collator(self, tokenizer: TextTokenizer, seed: int) -> SpanMaskingCollator:
        return SpanMaskingCollator(tokenizer, self.masking, seed)

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        hidden = net(**encoder_inputs(batch)).last_hidden_state
        losses = {"mlm_loss": masked_lm_loss(hidden, batch["labels"], net.mlm_head,
                                             label_positions(batch))}
        if self.sbo:
            losses["sbo_loss"] = span_boundary_loss(hidden, batch, net.sbo_head)
        return losses

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        return {name: (loss, predicted) for name, loss in self.losses(net, batch).items()}

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> float:
        """MLM's, plus the SBO head at the masked positions (3H x H and H x H layers and the
        H x V decoder), forward + backward."""
        h, predicted = shape.hidden, len(label_positions(batch))
        sbo = 3 * predicted * 2 * (4 * h * h + h * shape.vocab) if self.sbo else 0
        return super().flops(shape, batch) + sbo
