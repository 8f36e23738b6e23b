"""Model FLOPs of a Transformer encoder training step (Kaplan et al. 2020, §2.1, Table 1).

Forward FLOPs per token of one layer: 2 x (4 H^2 for the Q, K, V, O projections + 2 H I for the
feed-forward) matrix-multiply FLOPs, plus 2 x 2 T H for the attention scores QK^T and the weighted
sum over T positions. A training step costs about 3x the forward (the backward is 2x). The MLM
head (transform H x H, decoder H x V) is counted only at the positions it is applied to. An
encoder-decoder's decoder layer adds cross-attention: its query and output projections per target
token, its keys and values per source token, its scores over the S source positions.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from torch import Tensor

from datamodules.collate import IGNORE_INDEX


@dataclass(frozen=True)
class EncoderShape:
    hidden: int
    intermediate: int
    layers: int
    vocab: int

    @classmethod
    def of(cls, config) -> "EncoderShape":
        return cls(config.hidden_size, config.intermediate_size, config.num_hidden_layers,
                   config.vocab_size)


def encoder_forward_flops(shape: EncoderShape, batch: int, seq_len: int) -> float:
    """Forward FLOPs of the encoder stack over a [batch, seq_len] block (padding computed too)."""
    h, i = shape.hidden, shape.intermediate
    per_token_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq_len * h
    return batch * seq_len * shape.layers * per_token_layer


def mlm_head_forward_flops(shape: EncoderShape, positions: int) -> float:
    """Forward FLOPs of the MLM head (transform + vocabulary decoder) at ``positions`` tokens."""
    return positions * 2 * (shape.hidden * shape.hidden + shape.hidden * shape.vocab)


def mlm_training_flops(shape: EncoderShape, batch: int, seq_len: int, predicted: int) -> float:
    """FLOPs of one MLM training step predicting ``predicted`` tokens (forward + backward = 3x)."""
    encoder = encoder_forward_flops(shape, batch, seq_len)
    return 3 * (encoder + mlm_head_forward_flops(shape, predicted))


def encoder_decoder_training_flops(shape: EncoderShape, decoder_layers: int,
                                   batch: Mapping[str, Tensor]) -> Tensor:
    """FLOPs of one training step of an encoder-decoder (T5, BART) on ``batch``: the encoder over
    its [B, S] inputs, ``decoder_layers`` layers over the [B, T] decoder inputs, the output layer
    (H x V) at every labelled target token; forward + backward = 3x. A device tensor (the labelled
    tokens are counted on the device: no host synchronisation)."""
    batch_size, source = batch["input_ids"].shape
    target = batch["decoder_input_ids"].shape[1]
    h, i = shape.hidden, shape.intermediate
    per_target_token = 2 * (6 * h * h + 2 * h * i) + 2 * 2 * (target + source) * h
    cross_keys_values = batch_size * source * 2 * 2 * h * h
    decoder = decoder_layers * (batch_size * target * per_target_token + cross_keys_values)
    head = (batch["labels"] != IGNORE_INDEX).sum() * 2 * h * shape.vocab
    return 3 * (encoder_forward_flops(shape, batch_size, source) + decoder + head)
