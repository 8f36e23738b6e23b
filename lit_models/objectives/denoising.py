"""BART's denoising objective: text infilling and sentence permutation (Lewis et al. 2020, §2.2,
Figure 2; the combination of both is the pretraining of §5.1).

- Text infilling: span lengths are drawn from a Poisson distribution (lambda = 3) until 30% of
  the tokens are covered (§5.1: "mask 30% of tokens in each document"); each span is replaced by
  ONE mask token, so the model must also predict how many tokens are missing, and a 0-length
  span inserts a mask token. Spans that overlap or touch merge into one mask (fairseq's
  ``add_whole_word_mask`` also keeps one mask per run).
- Sentence permutation: the sentences of a block are shuffled in a random order.

The encoder reads the corrupted block, the decoder reconstructs the original one; the loss is the
negative log-likelihood of the original (§2.2), over every decoder position. Examples are blocks
of consecutive sentences of one document up to the length limit. Corruption runs in the collate:
a new noise every time (dynamic), or fixed by an example's ``mask_seed`` (eval examples).
"""

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import IGNORE_INDEX, at_positions, label_positions, pad_collate
from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer
from lit_models.objectives.base import (
    Documents,
    ExampleRandomness,
    PretrainingObjective,
    perplexity,
)
from lit_models.objectives.flops import EncoderShape, encoder_decoder_training_flops


@dataclass(frozen=True)
class NoiseConfig:
    mask_ratio: float = 0.3  # share of tokens in infilled spans (§5.1)
    poisson_lambda: float = 3.0  # mean span length (§2.2)
    permute_sentences: bool = True  # shuffle the sentences of each block (§2.2)

    def __post_init__(self) -> None:
        if not 0.0 <= self.mask_ratio < 1.0 or self.poisson_lambda <= 0:
            raise PlmbenchError(
                f"mask_ratio={self.mask_ratio} must be in [0, 1) and poisson_lambda="
                f"{self.poisson_lambda} > 0; BART uses 0.3 and 3"
            )


def sentence_blocks(documents: Documents, rng: random.Random, max_tokens: int) -> list[dict]:
    """Consecutive sentences of one document, at most ``max_tokens`` tokens a block (a longer
    sentence is cut into pieces)."""
    examples = []
    for document in documents:
        block: list[list[int]] = []
        for sentence in document:
            for start in range(0, len(sentence), max_tokens):
                piece = sentence[start:start + max_tokens]
                if sum(map(len, block)) + len(piece) > max_tokens:
                    examples.append({"sentences": block})
                    block = []
                block.append(piece)
        if block:
            examples.append({"sentences": block})
    return examples


def poisson(lam: float, rng: random.Random) -> int:
    """A Poisson(lam) draw (Knuth's multiplication method; lam is small)."""
    threshold, k, p = math.exp(-lam), 0, rng.random()
    while p > threshold:
        k += 1
        p *= rng.random()
    return k


def infill(tokens: list[int], cfg: NoiseConfig, mask_id: int, rng: random.Random) -> list[int]:
    """Text infilling (module docstring): ``tokens`` with Poisson-length spans covering
    round(mask_ratio * n) tokens each replaced by one ``mask_id``."""
    n = len(tokens)
    budget = round(n * cfg.mask_ratio)
    lengths: list[int] = []
    while sum(lengths) < budget and len(lengths) < n:
        lengths.append(poisson(cfg.poisson_lambda, rng))
    if lengths:
        lengths[-1] -= sum(lengths) - budget  # the last span ends at the budget
    removed, inserted = [False] * n, set()
    for start, length in zip(rng.sample(range(n), len(lengths)), lengths, strict=True):
        if length == 0:
            inserted.add(start)
        for i in range(start, min(n, start + length)):
            removed[i] = True
    out = []
    for i, token in enumerate(tokens):
        if i in inserted:
            out.append(mask_id)
        if not removed[i]:
            out.append(token)
        elif i == 0 or not removed[i - 1]:
            out.append(mask_id)
    return out


class DenoisingCollator(ExampleRandomness):
    """Pads and corrupts blocks: encoder input <s> noise(block) </s>, labels <s> block </s>, and
    decoder inputs the labels shifted right after </s> (BART's decoder start)."""

    def __init__(self, tokenizer: TextTokenizer, cfg: NoiseConfig, seed: int = 0) -> None:
        super().__init__(seed)
        special = tokenizer.special
        self.bos, self.eos = special.cls, special.sep
        self.mask, self.pad = special.mask, special.pad
        self.cfg = cfg

    def __call__(self, examples: list[dict]) -> dict[str, Tensor]:
        rows = []
        for example in examples:
            rng = self.rng(example)
            sentences = list(example["sentences"])
            original = [self.bos, *(t for s in sentences for t in s), self.eos]
            if self.cfg.permute_sentences:
                rng.shuffle(sentences)
            noised = infill([t for s in sentences for t in s], self.cfg, self.mask, rng)
            rows.append({"input_ids": [self.bos, *noised, self.eos], "labels": original,
                         "decoder_input_ids": [self.eos, *original[:-1]]})
        return pad_collate(rows, self.pad)


def require_encoder_decoder(net: nn.Module, why: str) -> None:
    """Refuse, in one line saying ``why``, a net without an encoder-decoder's language-modelling
    head."""
    if not (hasattr(net, "encode") and hasattr(net, "logits")):
        raise PlmbenchError(f"{type(net).__name__} is no encoder-decoder with a language-"
                            f"modelling head; {why}")


def reconstruction_loss(net: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """Mean negative log-likelihood of the labels under the decoder, logits only where a label
    is (Design contract 2)."""
    hidden = net(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                 decoder_input_ids=batch["decoder_input_ids"]).last_hidden_state
    positions = label_positions(batch)
    return F.cross_entropy(net.logits(at_positions(hidden, positions)),
                           at_positions(batch["labels"], positions))


class Denoising(PretrainingObjective):
    """BART's pretraining (``objective=denoising``): text infilling + sentence permutation."""

    eval_metrics = ("denoising_loss",)

    def __init__(self, name: str = "denoising", **noise) -> None:
        self.name = name
        self.noise = NoiseConfig(**noise)
        self.decoder_layers = 0  # the net's, once ``check`` has seen it

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        require_encoder_decoder(net, "denoising pretrains BART-style models")
        self.decoder_layers = net.config.decoder_layers
        special = tokenizer.special
        if None in (special.cls, special.sep, special.mask):
            raise PlmbenchError("denoising needs the tokenizer's bos, eos and mask tokens; name "
                                "them in its tokenizer_config.json")

    def make_examples(self, max_length: int, tokenizer: TextTokenizer):
        return partial(sentence_blocks, max_tokens=max_length - 2)

    def collator(self, tokenizer: TextTokenizer, seed: int) -> DenoisingCollator:
        return DenoisingCollator(tokenizer, self.noise, seed)

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {"denoising_loss": reconstruction_loss(net, batch)}

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        return {"denoising_loss": (reconstruction_loss(net, batch), predicted)}

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        return {**means, "perplexity": perplexity(means["denoising_loss"])}

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> Tensor:
        """Encoder over the corrupted block, decoder and output layer over the original."""
        return encoder_decoder_training_flops(shape, self.decoder_layers, batch)
