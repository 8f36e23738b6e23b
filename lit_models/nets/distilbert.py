"""DistilBERT: a BERT student with half the layers, distilled from a BERT teacher.

Sanh et al. 2019, "DistilBERT, a distilled version of BERT: smaller, faster, cheaper and
lighter", §3: the student has BERT's architecture with the token-type embeddings and the pooler
removed and the number of layers halved; it is initialised from the teacher "by taking one layer
out of two" (``student_of_bert``). The distillation loss itself is an objective
(``objectives/distillation.py``). The masked-LM head is BERT's (dense, activation, LayerNorm,
decoder tied to the token embeddings; transformers' ``vocab_transform``/``vocab_projector``).

``DistilBertConfig`` keeps transformers' keys (``dim``, ``n_layers``, ``hidden_dim`` ...) so
config.json maps 1:1, and answers BERT's names too (``hidden_size`` ...), so BERT's layers, MLM
head and classification heads build it. Its LayerNorms use eps 1e-12, as transformers fixes them.
In training, transformers' DistilBERT drops out the feed-forward output but not the attention
output; these layers drop out both, as BERT's do.
"""

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from lit_models.nets.bert import BertForPreTraining, BertModel
from lit_models.nets.masked_lm import EncoderForMaskedLM


@dataclass
class DistilBertConfig:
    """Defaults are DistilBERT (§3: BERT-base's sizes with 6 layers, 66M parameters)."""

    vocab_size: int = 30522
    max_position_embeddings: int = 512
    n_layers: int = 6
    n_heads: int = 12
    dim: int = 768
    hidden_dim: int = 3072
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation: str = "gelu"
    initializer_range: float = 0.02
    pad_token_id: int = 0
    #: heads removed from each layer's weights, by original index (``nets/pruning.py``)
    pruned_heads: dict[int, list[int]] = field(default_factory=dict)

    # BERT's names for the same sizes, read by the shared modules
    hidden_size = property(lambda self: self.dim)
    num_hidden_layers = property(lambda self: self.n_layers)
    num_attention_heads = property(lambda self: self.n_heads)
    intermediate_size = property(lambda self: self.hidden_dim)
    hidden_act = property(lambda self: self.activation)
    hidden_dropout_prob = property(lambda self: self.dropout)
    attention_probs_dropout_prob = property(lambda self: self.attention_dropout)
    layer_norm_eps = 1e-12
    pre_norm = False

    @property
    def max_length(self) -> int:
        return self.max_position_embeddings


class DistilBertEmbeddings(nn.Module):
    """Dropout(LayerNorm(token + position embeddings)): BERT's without segments (§3)."""

    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.dim,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.dim)
        self.norm = nn.LayerNorm(config.dim, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                position_ids: Tensor | None = None) -> Tensor:
        """``token_type_ids`` are accepted and ignored: DistilBERT has no segment embeddings."""
        T = input_ids.shape[1]
        if T > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence length {T} exceeds max_position_embeddings "
                f"{self.position_embeddings.num_embeddings}; truncate inputs (task max_length)"
            )
        positions = (self.position_embeddings.weight[:T] if position_ids is None
                     else self.position_embeddings(position_ids))
        x = self.word_embeddings(input_ids) + positions
        return self.dropout(self.norm(x))


class DistilBertModel(BertModel):
    """Embeddings without segments + BERT's post-LN layers; no pooler (§3)."""

    embeddings_class = DistilBertEmbeddings

    def __init__(self, config: DistilBertConfig, add_pooling_layer: bool = False):
        if add_pooling_layer:
            raise ValueError("DistilBERT has no pooler (Sanh et al. 2019, §3)")
        super().__init__(config, add_pooling_layer=False)


class DistilBertForMaskedLM(EncoderForMaskedLM):
    """DistilBERT with BERT's masked-LM head (the vocabulary transform and tied decoder)."""

    def __init__(self, config: DistilBertConfig):
        super().__init__(config, DistilBertModel(config), "distilbert")


def student_of_bert(teacher: BertForPreTraining, with_heads: bool = True
                    ) -> DistilBertForMaskedLM | DistilBertModel:
    """A student initialised from ``teacher`` (§3, "Student initialization"): its sizes, every
    other layer (0, 2, 4, ...), its token and position embeddings and its masked-LM head. The
    teacher's segment-A embedding is added to every position embedding, so on one-segment inputs
    the student's embeddings equal the teacher's (the segment embeddings themselves go)."""
    t = teacher.config
    if t.pre_norm or t.layer_norm_eps != DistilBertConfig.layer_norm_eps:
        raise ValueError("DistilBERT students are post-LN with LayerNorm eps 1e-12; the teacher "
                         f"has pre_norm={t.pre_norm}, layer_norm_eps={t.layer_norm_eps}")
    config = DistilBertConfig(
        vocab_size=t.vocab_size, max_position_embeddings=t.max_position_embeddings,
        n_layers=math.ceil(t.num_hidden_layers / 2), n_heads=t.num_attention_heads,
        dim=t.hidden_size, hidden_dim=t.intermediate_size, dropout=t.hidden_dropout_prob,
        attention_dropout=t.attention_probs_dropout_prob, activation=t.hidden_act,
        initializer_range=t.initializer_range, pad_token_id=t.pad_token_id,
    )
    student = DistilBertForMaskedLM(config)
    ours, theirs = student.distilbert, teacher.bert
    with torch.no_grad():
        ours.embeddings.word_embeddings.weight.copy_(theirs.embeddings.word_embeddings.weight)
        segment_a = theirs.embeddings.token_type_embeddings.weight[0]
        ours.embeddings.position_embeddings.weight.copy_(
            theirs.embeddings.position_embeddings.weight + segment_a)
        ours.embeddings.norm.load_state_dict(theirs.embeddings.norm.state_dict())
        for layer, source in zip(ours.encoder.layers, theirs.encoder.layers[::2], strict=True):
            layer.load_state_dict(source.state_dict())
        for name in ("dense", "norm"):
            getattr(student.mlm_head, name).load_state_dict(
                getattr(teacher.mlm_head, name).state_dict())
        student.mlm_head.bias.copy_(teacher.mlm_head.bias)
    return student if with_heads else student.distilbert
