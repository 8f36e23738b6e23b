"""Causal language modelling: maximise sum_i log P(u_i | u_<i) over a corpus (Radford et al. 2018,
"Improving Language Understanding by Generative Pre-Training", §3.1, Eq. 1; GPT-2, Radford et al.
2019, §2: p(x) = prod_i p(s_i | s_1 .. s_{i-1})).

Inputs are contiguous text up to the context size: full sentences of one or more documents
packed together, a separator at document boundaries (the FULL-SENTENCES packing of
``nsp.make_segment_pairs``; GPT-2 separates documents with its end-of-text token). Nothing is
corrupted: the collate pads and shifts, the label of position i is token i + 1 (the last
position and pads predict nothing), and the loss is the mean negative log-likelihood of every
next token, vocabulary logits computed only where a label is (Design contract 2).
"""

from collections.abc import Mapping
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.collate import (
    IGNORE_INDEX,
    add_label_positions,
    at_positions,
    label_positions,
    pad_collate,
    token_mask,
)
from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer
from lit_models.objectives.base import PretrainingObjective, perplexity
from lit_models.objectives.flops import EncoderShape, encoder_forward_flops
from lit_models.objectives.nsp import make_segment_pairs


def next_token_labels(input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """labels[:, i] = input_ids[:, i + 1] where that token is no pad, else IGNORE_INDEX."""
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, :-1] = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, IGNORE_INDEX)
    return labels


class CausalLMCollator:
    """Pads packed blocks and adds their next-token labels (no token types: GPT-2 would embed
    them)."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, examples: list[dict]) -> dict[str, Tensor]:
        batch = pad_collate([{"input_ids": e["input_ids"]} for e in examples], self.pad_id)
        batch["labels"] = next_token_labels(batch["input_ids"], token_mask(batch))
        return add_label_positions(batch)


def causal_lm_loss(net: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """Mean negative log-likelihood of every labelled next token."""
    hidden = net(input_ids=batch["input_ids"],
                 attention_mask=batch.get("attention_mask")).last_hidden_state
    positions = label_positions(batch)
    return F.cross_entropy(net.logits(at_positions(hidden, positions)),
                           at_positions(batch["labels"], positions))


class CausalLM(PretrainingObjective):
    """GPT's pretraining (``objective=causal_lm``): next-token prediction on packed text."""

    eval_metrics = ("lm_loss",)

    def __init__(self, name: str = "causal_lm") -> None:
        self.name = name

    def check(self, net: nn.Module, tokenizer: TextTokenizer) -> None:
        if not hasattr(net, "logits") or hasattr(net, "encode"):
            raise PlmbenchError(f"{type(net).__name__} is no decoder-only language model; "
                                "causal_lm pretrains GPT-style models (model=gpt2-*)")
        if tokenizer.special.cls is None or tokenizer.special.sep is None:
            raise PlmbenchError("causal_lm packs text between the tokenizer's bos and eos "
                                "tokens; name them in its tokenizer_config.json")

    def make_examples(self, max_length: int, tokenizer: TextTokenizer):
        special = tokenizer.special
        return partial(make_segment_pairs, max_tokens=max_length, nsp=False,
                       cls_id=special.cls, sep_id=special.sep)

    def collator(self, tokenizer: TextTokenizer, seed: int) -> CausalLMCollator:
        return CausalLMCollator(tokenizer.special.pad)

    def losses(self, net: nn.Module, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        return {"lm_loss": causal_lm_loss(net, batch)}

    def evaluate(self, net: nn.Module, batch: Mapping[str, Tensor]
                 ) -> dict[str, tuple[Tensor, Tensor]]:
        predicted = (batch["labels"] != IGNORE_INDEX).sum()
        return {"lm_loss": (causal_lm_loss(net, batch), predicted)}

    def summarize(self, means: Mapping[str, float]) -> dict[str, float]:
        return {**means, "perplexity": perplexity(means["lm_loss"])}

    def flops(self, shape: EncoderShape, batch: Mapping[str, Tensor]) -> Tensor:
        """3 x (the decoder stack + the tied output layer at every labelled position); a device
        tensor, so counting does not synchronise."""
        batch_size, seq_len = batch["input_ids"].shape
        predicted = (batch["labels"] != IGNORE_INDEX).sum().float()
        head = predicted * 2 * shape.hidden * shape.vocab
        return 3 * (encoder_forward_flops(shape, batch_size, seq_len) + head)
