"""BERT: a bidirectional Transformer encoder with pretraining heads.

Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding". §3 / Figure 2: the input representation is the sum of token (WordPiece),
segment and learned position embeddings; the encoder is a post-LN Transformer (Vaswani et al.
2017, blocks in ``blocks.py``); the final hidden state of [CLS] feeds the pooler (tanh dense
layer, used for NSP and sentence classification). §3.1: the masked-LM head (dense + GELU +
LayerNorm, then output weights tied to the token embeddings plus a per-token bias, as in
Google's ``run_pretraining.py``) and the 2-way next-sentence-prediction classifier.

Field names of ``BertConfig`` equal Hugging Face ``BertConfig`` keys so ``config.json`` maps
1:1 (weight names map through the table in ``lit_models/interop/hf.py``).
"""

from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from lit_models.nets.attention import Unpadding, attentions_of, head_probes
from lit_models.nets.blocks import (
    TransformerEncoder,
    TransformerLayer,
    init_normal_,
    padding_mask,
)
from lit_models.nets.masked_lm import EncoderForMaskedLM
from lit_models.nets.outputs import EncoderOutput
from lit_models.nets.pruning import PrunableHeads


@dataclass
class BertConfig:
    """Defaults are BERT-base (§3: L=12, H=768, A=12, 110M parameters)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072  # 4H (§3)
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2  # segments A and B
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    initializer_range: float = 0.02
    pre_norm: bool = False  # not in the paper: pre-LN layers (Xiong et al. 2020)
    #: heads removed from each layer's weights, by original index (transformers 4's key;
    #: ``nets/pruning.py``)
    pruned_heads: dict[int, list[int]] = field(default_factory=dict)

    @property
    def max_length(self) -> int:
        """The longest input, in tokens, the position embeddings cover."""
        return self.max_position_embeddings


class BertEmbeddings(nn.Module):
    """Dropout(LayerNorm(token + segment + position embeddings)) (§3, Figure 2)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        H = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, H, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, H)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, H)
        self.norm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                position_ids: Tensor | None = None) -> Tensor:
        """``position_ids`` [B, T]: each token's position (packed rows restart them at every
        example); None = 0 .. T - 1."""
        T = input_ids.shape[1]
        if T > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence length {T} exceeds max_position_embeddings "
                f"{self.position_embeddings.num_embeddings}; truncate inputs (task max_length)"
            )
        if token_type_ids is None:  # everything is segment A
            segment = self.token_type_embeddings.weight[0]
        else:
            segment = self.token_type_embeddings(token_type_ids)
        positions = (self.position_embeddings.weight[:T] if position_ids is None
                     else self.position_embeddings(position_ids))
        x = self.word_embeddings(input_ids) + segment + positions
        return self.dropout(self.norm(x))


def bert_layer(config: BertConfig) -> TransformerLayer:
    """One encoder layer of ``config``'s sizes (post-LN unless ``pre_norm``)."""
    return TransformerLayer(
        config.hidden_size,
        config.num_attention_heads,
        config.intermediate_size,
        config.hidden_act,
        config.hidden_dropout_prob,
        config.attention_probs_dropout_prob,
        config.layer_norm_eps,
        config.pre_norm,
    )


class BertModel(PrunableHeads, nn.Module):
    """Embeddings + Transformer encoder + optional [CLS] pooler."""

    embeddings_class = BertEmbeddings  # architectures on BERT's encoder swap their embeddings

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = self.embeddings_class(config)
        final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.encoder = TransformerEncoder(self.build_layers(config),
                                          final_norm if config.pre_norm else None)
        H = config.hidden_size
        self.pooler = nn.Linear(H, H) if add_pooling_layer else None
        self.apply(partial(init_normal_, std=config.initializer_range))
        self.prune_configured_heads()

    def head_layers(self) -> list[nn.Module]:
        return [layer.attention for layer in self.encoder.layers]

    def build_layers(self, config: BertConfig) -> list[TransformerLayer]:
        """The encoder's layers, each with parameters of its own (ALBERT shares them)."""
        return [bert_layer(config) for _ in range(config.num_hidden_layers)]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
        position_ids: Tensor | None = None,
        output_attentions: bool = False,
        head_mask: Tensor | None = None,
    ) -> EncoderOutput:
        """``input_ids`` [B, T]; ``attention_mask`` [B, T] 1 = token, 0 = pad (None = no pad),
        or [B, T, T] which keys each query may attend (packed rows, with their
        ``position_ids``). ``output_attentions``: each layer's attention probabilities in the
        output; ``head_mask`` [layers, heads] scales each head (``attention.head_probes``)."""
        x = self.embeddings(input_ids, token_type_ids, position_ids)
        return self.encode(x, attention_mask, output_hidden_states, output_attentions, head_mask)

    def encode(self, x: Tensor, attention_mask: Tensor | None, output_hidden_states: bool,
               output_attentions: bool, head_mask: Tensor | None) -> EncoderOutput:
        """The layers and the pooler over embedded inputs ``x`` [B, T, H]."""
        probes = head_probes(head_mask, output_attentions, len(self.encoder.layers))
        x, hidden_states = self.encoder(x, padding_mask(attention_mask), output_hidden_states,
                                        unpadding=Unpadding.of(attention_mask), probes=probes)
        pooled = None if self.pooler is None else self.pool(x[:, 0])
        return EncoderOutput(x, pooled, hidden_states, attentions_of(probes))

    def pool(self, first: Tensor) -> Tensor:
        """The pooler, tanh(W h + b), on [CLS] hidden states [..., H] (§3)."""
        return torch.tanh(self.pooler(first))

    def add_pooler(self) -> None:
        """Give an encoder built without a pooler (a checkpoint saved without one) a freshly
        initialised one, as transformers initialises the missing pooler of a task model that
        scores the pooled [CLS] state."""
        if self.pooler is None:
            H = self.config.hidden_size
            self.pooler = nn.Linear(H, H)
            init_normal_(self.pooler, std=self.config.initializer_range)


class BertForPreTraining(EncoderForMaskedLM):
    """BERT with its two pretraining heads (§3.1): ``mlm_head`` and the NSP classifier
    ``nsp_head`` on the pooled [CLS] state."""

    def __init__(self, config: BertConfig):
        super().__init__(config, BertModel(config), "bert")
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        init_normal_(self.nsp_head, config.initializer_range)
