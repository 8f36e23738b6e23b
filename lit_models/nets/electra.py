"""ELECTRA: a generator and a discriminator trained jointly by replaced-token detection.

Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
Generators". §2 / Figure 1: two Transformer encoders. The generator G is a small masked language
model (BERT's MLM head on its own encoder); the discriminator D predicts, for every token of the
corrupted input, whether it is original or was replaced by a sample of G:
D(x, t) = sigmoid(w^T h_D(x)_t) (the released code puts a dense + activation layer before w).
§3.2: G and D share their token and position embeddings (the released code shares the whole
embedding layer, token-type embeddings and LayerNorm included), and G is smaller than D: a
``generator_size`` fraction of D's hidden size, feed-forward size and head count (Table 6:
1/4 for Small and Large, 1/3 for Base; §3.2 finds 1/4 to 1/2 best). Embeddings are
``embedding_size`` wide and projected to each encoder's hidden size where they differ
(Appendix A, Small: E=128, H=256). After pretraining D is fine-tuned; G is thrown away.

The encoder is BERT's (``bert.py``); field names of ``ElectraConfig`` equal transformers'
``ElectraConfig`` keys, so config.json maps 1:1. The objective is in
``lit_models/objectives/rtd.py``.
"""

from dataclasses import dataclass, replace

from torch import Tensor, nn

from lit_models.nets.bert import BertConfig, BertEmbeddings, BertModel
from lit_models.nets.blocks import activation, init_normal_
from lit_models.nets.masked_lm import EncoderForMaskedLM
from lit_models.nets.outputs import EncoderOutput


@dataclass
class ElectraConfig(BertConfig):
    """Defaults are ELECTRA-Small (Table 6: L=12, H=256, A=4, FFN 1024, E=128)."""

    embedding_size: int = 128
    hidden_size: int = 256
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    #: the generator's share of the discriminator's hidden size, FFN size and heads (Table 6)
    generator_size: float = 0.25


def generator_config(config: ElectraConfig) -> ElectraConfig:
    """The generator's sizes: ``generator_size`` x D's hidden size, FFN size and heads, as the
    released ``get_generator_config``; same depth and embeddings. The head count is at least one
    and lowered, where it must be, to one that divides the hidden size."""
    fraction = config.generator_size
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"generator_size={fraction} must be in (0, 1]; the paper uses 1/4 to 1/2")
    hidden = max(1, round(config.hidden_size * fraction))
    heads = max(1, round(config.num_attention_heads * fraction))
    while hidden % heads:
        heads -= 1
    return replace(config, hidden_size=hidden, num_attention_heads=heads,
                   intermediate_size=max(1, round(config.intermediate_size * fraction)),
                   pruned_heads={})


class ElectraEmbeddings(BertEmbeddings):
    """BERT's embeddings at ``embedding_size`` (the encoder projects them to its hidden size)."""

    def __init__(self, config: ElectraConfig):
        super().__init__(replace(config, hidden_size=config.embedding_size))


class ElectraModel(BertModel):
    """Embeddings (shared with the other encoder when ``embeddings`` is given), a projection to
    the hidden size when it differs from ``embedding_size``, BERT's encoder; no pooler."""

    embeddings_class = ElectraEmbeddings

    def __init__(self, config: ElectraConfig, add_pooling_layer: bool = False,
                 embeddings: ElectraEmbeddings | None = None):
        super().__init__(config, add_pooling_layer)
        if embeddings is not None:
            self.embeddings = embeddings
        self.embeddings_project = None
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size)
            init_normal_(self.embeddings_project, config.initializer_range)

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
        x = self.embeddings(input_ids, token_type_ids, position_ids)
        if self.embeddings_project is not None:
            x = self.embeddings_project(x)
        return self.encode(x, attention_mask, output_hidden_states, output_attentions, head_mask)


class ElectraForMaskedLM(EncoderForMaskedLM):
    """The generator (§2): an encoder and BERT's MLM head (dense to the embedding width, exact
    GELU, LayerNorm, decoder tied to the token embeddings)."""

    def __init__(self, config: ElectraConfig, embeddings: ElectraEmbeddings | None = None):
        super().__init__(config, ElectraModel(config, embeddings=embeddings), "electra", "gelu")


class DiscriminatorHead(nn.Module):
    """One logit per token, replaced vs original: w^T act(W h + b) (§2, as released)."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: Tensor) -> Tensor:
        """[..., H] -> [...] logits of "replaced"."""
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)


class ElectraForPreTraining(nn.Module):
    """The discriminator (``electra`` + ``rtd_head``) and the generator (``generator``), which
    shares the discriminator's embedding layer (§3.2). ``forward`` runs the discriminator's
    encoder; the objective runs the generator and the heads where its losses need them."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.config = config
        self.electra = ElectraModel(config)
        self.rtd_head = DiscriminatorHead(config)
        init_normal_(self.rtd_head.dense, config.initializer_range)
        init_normal_(self.rtd_head.prediction, config.initializer_range)
        self.generator = ElectraForMaskedLM(generator_config(config), self.electra.embeddings)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_hidden_states: bool = False,
                position_ids: Tensor | None = None, output_attentions: bool = False,
                head_mask: Tensor | None = None) -> EncoderOutput:
        return self.electra(input_ids, attention_mask, token_type_ids, output_hidden_states,
                            position_ids, output_attentions, head_mask)
