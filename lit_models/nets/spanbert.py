"""SpanBERT: BERT's encoder pretrained on masked spans with a span boundary objective.

Joshi et al. 2020, "SpanBERT: Improving Pre-training by Representing and Predicting Spans".
§3: the encoder is BERT's (Devlin et al. 2019), pretrained without next sentence prediction on
single segments (§3.3). §3.2, the span boundary objective (SBO): a masked token x_i of a span
(x_s, ..., x_e) is predicted from the encoder outputs of the span's two boundary tokens x_{s-1}
and x_{e+1} and the embedding p_{i-s+1} of its position in the span:
y_i = f(x_{s-1}, x_{e+1}, p_{i-s+1}), f a two-layer feed-forward network with GeLU activations and
layer normalisation (Eq. 1-2): h_0 = [x_{s-1}; x_{e+1}; p], h_1 = LayerNorm(GeLU(W_1 h_0)),
y_i = LayerNorm(GeLU(W_2 h_1)), then the output embeddings (tied to the token embeddings, as in
the MLM head) give the token scores. The masking lives in ``lit_models/objectives/span.py``.

The released checkpoints are transformers ``bert`` checkpoints: ``SpanBertModel`` is BERT's
encoder under its own name, so that runs record which architecture they trained.
"""

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from lit_models.nets.bert import BertConfig, BertModel
from lit_models.nets.blocks import activation, init_normal_
from lit_models.nets.masked_lm import EncoderForMaskedLM


@dataclass
class SpanBertConfig(BertConfig):
    """Defaults are SpanBERT-base (BERT-base sizes, §4.1). ``type_vocab_size`` stays 2, so the
    checkpoints fine-tune on sentence pairs as BERT's do."""

    #: positions in a span the SBO embeds (tokens; a longer span shares the last one)
    span_positions: int = 20


class SpanBertModel(BertModel):
    """BERT's encoder (§3)."""


class SpanBoundaryHead(nn.Module):
    """y_i = LayerNorm(GeLU(W_2 LayerNorm(GeLU(W_1 [x_{s-1}; x_{e+1}; p_{i-s+1}])))) (§3.2,
    Eq. 1-2), then token scores y_i E^T + b with E the token embeddings."""

    def __init__(self, config: SpanBertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        H = config.hidden_size
        self.position_embeddings = nn.Embedding(config.span_positions, H)
        self.dense1 = nn.Linear(3 * H, H)
        self.norm1 = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.dense2 = nn.Linear(H, H)
        self.norm2 = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.act = activation("gelu")
        self.word_embeddings = word_embeddings
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, left: Tensor, right: Tensor, offset: Tensor) -> Tensor:
        """``left``/``right`` [N, H] boundary states, ``offset`` [N] position in the span
        (0 = first token) -> vocabulary logits [N, V]."""
        offset = offset.clamp(max=self.position_embeddings.num_embeddings - 1)
        h = torch.cat([left, right, self.position_embeddings(offset)], dim=-1)
        h = self.norm1(self.act(self.dense1(h)))
        y = self.norm2(self.act(self.dense2(h)))
        return nn.functional.linear(y, self.word_embeddings.weight, self.bias)


class SpanBertForPreTraining(EncoderForMaskedLM):
    """The encoder (no pooler: no NSP, §3.3) with ``mlm_head`` and ``sbo_head``; ``forward`` runs
    the encoder, the objective applies the heads at the masked positions."""

    def __init__(self, config: SpanBertConfig):
        super().__init__(config, SpanBertModel(config, add_pooling_layer=False), "bert")
        self.sbo_head = SpanBoundaryHead(config, self.bert.embeddings.word_embeddings)
        for module in (self.sbo_head.position_embeddings, self.sbo_head.dense1,
                       self.sbo_head.norm1, self.sbo_head.dense2, self.sbo_head.norm2):
            init_normal_(module, config.initializer_range)
