"""What nets return, shared by every architecture: an encoder's output (BERT's layout: the last
hidden states, the pooled first token, optionally every layer's states and attention
probabilities), an encoder-decoder's
output, and the teacher-forcing shift of a decoder's inputs (Vaswani et al. 2017, §3)."""

from dataclasses import dataclass

from torch import Tensor


@dataclass
class EncoderOutput:
    last_hidden_state: Tensor  # [B, T, H]
    pooler_output: Tensor | None  # [B, H] tanh(W h_CLS + b), None without a pooler
    hidden_states: tuple[Tensor, ...] | None  # embeddings output + each layer, if asked
    #: each layer's attention probabilities [B, heads, T, T], if asked (``output_attentions``)
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class Seq2SeqOutput:
    last_hidden_state: Tensor  # the decoder's, [B, T, H]
    encoder_last_hidden_state: Tensor  # [B, S, H]
    #: each encoder layer's attention probabilities [B, heads, S, S], if asked
    encoder_attentions: tuple[Tensor, ...] | None = None


def shift_right(labels: Tensor, start_token_id: int, pad_token_id: int) -> Tensor:
    """Teacher-forcing decoder inputs: [start, y_1 .. y_{T-1}], ignored labels (-100) as pads."""
    shifted = labels.new_full(labels.shape, start_token_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == -100, pad_token_id)
