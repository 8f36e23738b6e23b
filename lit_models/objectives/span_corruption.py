"""T5's span corruption (Raffel et al. 2020, §3.1.4 and Figure 2; §3.3.4: noise density 0.15,
mean span length 3 in the final objective).

Of an input of n tokens, exactly round(0.15 n) are corrupted (at least 1, at most n - 1), in
exactly round(noise / 3) spans (at least 1), as the released ``random_spans_noise_mask`` draws
them: the noise tokens and the kept tokens are each split into that many non-empty segments,
uniformly among all such splits, and the segments alternate, kept first, so the input ends in a
noise span. Each noise span is replaced in the input by one sentinel (<extra_id_0>, <extra_id_1>,
... in order); the target is each sentinel followed by the span it dropped; both end with </s>.
The decoder reads the target shifted right after its start token (teacher forcing).

Examples are blocks of the token stream of consecutive documents (T5 concatenates documents
and splits the stream, ``split_tokens``), each of the raw length whose corrupted input just fits
the length limit, as ``random_spans_helper`` computes it. Corruption runs in the collate: a new
noise every time (dynamic), or fixed by an example's ``mask_seed`` (eval examples).
"""

import random
from collections.abc import Mapping
from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import IGNORE_INDEX, at_positions, label_positions, pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer
from lit_models.nets.outputs import shift_right
from lit_models.objectives.base import (
    Documents,
    ExampleRandomness,
    PretrainingObjective,
    perplexity,
)


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
    """True where a token is corrupted: kept and noise segments alternating, kept first."""
    noise, spans = cfg.counts(length)
    noise_lengths = random_segmentation(noise, spans, rng)
    kept_lengths = random_segmentation(max(length, 2) - noise, spans, rng)
    mask: list[bool] = []
    for kept, dropped in zip(kept_lengths, noise_lengths, strict=True):
        mask += [False] * kept + [True] * dropped
    return mask[:length]


def corrupt(tokens: list[int], noise: list[bool], sentinels: list[int], eos: int
            ) -> tuple[list[int], list[int]]:
    """(input, target): noise spans -> sentinels in the input; each sentinel then its span in
    the target; </s> after both."""
    inputs, targets, span = [], [], -1
    for i, (token, dropped) in enumerate(zip(tokens, noise, strict=True)):
        if dropped and (i == 0 or not noise[i - 1]):
            span += 1
            inputs.append(sentinels[span])
            targets.append(sentinels[span])
        (targets if dropped else inputs).append(token)
    return [*inputs, eos], [*targets, eos]


def sentinels(tokenizer: TextTokenizer) -> list[int]:
    """The ids of <extra_id_0>, <extra_id_1>, ... as far as the vocabulary has them."""
    ids = []
    while (i := tokenizer.backend.token_to_id(f"<extra_id_{len(ids)}>")) is not None:
        ids.append(i)
    return ids


def token_blocks(documents: Documents, rng: random.Random, length: int) -> list[dict]:
    """The documents' token stream cut into blocks of ``length`` (the last one shorter)."""
    stream = [t for document in documents for sentence in document for t in sentence]
    return [{"tokens": stream[i:i + length]} for i in range(0, len(stream), length)]


class SpanCorruptionCollator:
    """Corrupts and pads blocks: input_ids (noised input), labels (the target)."""

    def __init__(self, tokenizer: TextTokenizer, cfg: SpanConfig, sentinels: list[int],
                 seed: int = 0) -> None:
        self.cfg, self.sentinels = cfg, sentinels
        self.eos, self.pad = tokenizer.special.sep, tokenizer.special.pad
        self.randomness = ExampleRandomness(seed)

    def __call__(self, examples: list[dict]) -> dict[str, Tensor]:
        rows = []
        for example in examples:
            rng = self.randomness.rng(example)
            tokens = example["tokens"]
            noise = random_spans_noise_mask(len(tokens), self.cfg, rng)
            inputs, targets = corrupt(tokens, noise, self.sentinels, self.eos)
            rows.append({"input_ids": inputs, "labels": targets})
        return pad_collate(rows, self.pad)


def span_corruption_loss(net: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """Mean negative log-likelihood of the targets, decoded after the net's start token."""
    config = net.config
    decoder_input_ids = shift_right(batch["labels"], config.decoder_start_token_id,
                                    config.pad_token_id)
    hidden = net(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                 decoder_input_ids=decoder_input_ids).last_hidden_state
    positions = label_positions(batch)
    return F.cross_entropy(net.logits(at_positions(hidden, positions)),
                           at_positions(batch["labels"], positions))


class SpanCorruption(PretrainingObjective):
    """T5's pretraining (``objective=span_corruption``)."""

    eval_metrics = ("span_corruption_loss",)

    def __init__(self, name: str = "span_corruption", **spans) -> None:
        self.name = name
        self.spans = SpanConfig(**spans)

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        if not (hasattr(net, "encode") and hasattr(net, "logits")):
            raise PlmbenchError(f"{type(net).__name__} is no encoder-decoder with a language-"
                                "modelling head; span_corruption pretrains T5-style models")
        if tokenizer.special.sep is None:
            raise PlmbenchError("span corruption ends inputs and targets with the tokenizer's "
                                "eos token; name it in its tokenizer_config.json")

    def make_examples(self, max_length: int, tokenizer: TextTokenizer):
        length = self.spans.raw_length(max_length)
        spans = self.spans.counts(length)[1]
        if len(sentinels(tokenizer)) < spans:
            raise PlmbenchError(
                f"span corruption of {max_length}-token inputs needs the sentinels <extra_id_0> "
                f".. <extra_id_{spans - 1}>, and the tokenizer has {len(sentinels(tokenizer))}; "
                "use a T5 vocabulary or a shorter task.max_length"
            )
        return lambda documents, rng: token_blocks(documents, rng, length)

    def collator(self, tokenizer: TextTokenizer, seed: int) -> SpanCorruptionCollator:
        return SpanCorruptionCollator(tokenizer, self.spans, sentinels(tokenizer), seed)

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {"span_corruption_loss": span_corruption_loss(net, batch)}

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        return {"span_corruption_loss": (span_corruption_loss(net, batch), predicted)}

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        return {**means, "perplexity": perplexity(means["span_corruption_loss"])}
