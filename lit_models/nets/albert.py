"""ALBERT: BERT's encoder with fewer parameters.

Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language Representations",
§3.1 (model architecture choices):

- Factorized embedding parameterization: the token, segment and position embeddings have a
  width E smaller than the hidden size H and are projected to H by one linear map, so the
  vocabulary costs O(V x E + E x H) parameters instead of O(V x H).
- Cross-layer parameter sharing: one set of layer parameters applied at all L depths
  (``sharing="all"``, ALBERT's default), or only the attention sub-layers shared
  (``"attention"``), or only the feed-forward networks (``"ffn"``), or nothing (``"none"``):
  the four settings of Table 4. A shared sub-layer takes its residual LayerNorm along.
- Inter-sentence coherence: sentence-order prediction (SOP) with a 2-way classifier on the
  pooled [CLS] state (``sop_head``; the pairs are built in ``objectives/nsp.py``).

The masked-LM head maps H back to E before the decoder tied to the E-wide token embeddings
(google-research/albert ``get_masked_lm_output``; transformers' ``AlbertMLMHead``).
Field names of ``AlbertConfig`` are transformers' ``AlbertConfig`` keys; ``num_hidden_groups``
is transformers' way to say the sharing: 1 group (all shared) or one per layer (none).
"""

from dataclasses import dataclass, replace

from torch import Tensor, nn

from lit_models.nets.bert import BertConfig, BertEmbeddings, BertModel, bert_layer
from lit_models.nets.blocks import TransformerLayer, init_normal_
from lit_models.nets.masked_lm import EncoderForMaskedLM

#: cross-layer parameter sharing (Table 4): which sub-layers all L layers share
SHARING = ("all", "attention", "ffn", "none")
#: the modules of a TransformerLayer that each partial sharing mode shares
SHARED_MODULES = {"attention": ("attention", "attention_norm"), "ffn": ("feed_forward", "ffn_norm")}


@dataclass
class AlbertConfig(BertConfig):
    """Defaults are ALBERT-base (Table 1: L=12, H=768, E=128, shared layers, 12M parameters)."""

    vocab_size: int = 30000  # SentencePiece vocabulary (§4.1)
    embedding_size: int = 128  # E (§3.1, Table 3)
    hidden_act: str = "gelu_new"  # the tanh GELU of the released code
    hidden_dropout_prob: float = 0.0  # §4.9: ALBERT v2 removes dropout
    attention_probs_dropout_prob: float = 0.0
    num_hidden_groups: int = 1  # transformers: layers in one group share; 1 = all, L = none
    sharing: str = "all"  # Table 4: all | attention | ffn | none

    def __post_init__(self) -> None:
        L, groups = self.num_hidden_layers, self.num_hidden_groups
        if self.sharing not in SHARING:
            raise ValueError(f"sharing={self.sharing!r} is unknown; use one of {SHARING}")
        if groups not in (1, L):
            raise ValueError(
                f"num_hidden_groups={groups}: layers share everything (1 group) or nothing "
                f"({L} groups); set sharing to one of {SHARING} instead"
            )
        if L > 1 and groups == L:  # transformers' spelling of no sharing
            if self.sharing not in ("all", "none"):
                raise ValueError(f"sharing={self.sharing!r} contradicts num_hidden_groups={L} "
                                 "(no sharing); drop num_hidden_groups")
            self.sharing = "none"
        if self.sharing == "none":
            self.num_hidden_groups = L


class AlbertEmbeddings(BertEmbeddings):
    """BERT's embeddings at width E, then projected to H (§3.1, factorized embeddings)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(replace(config, hidden_size=config.embedding_size))
        self.projection = nn.Linear(config.embedding_size, config.hidden_size)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                position_ids: Tensor | None = None) -> Tensor:
        return self.projection(super().forward(input_ids, token_type_ids, position_ids))


def shared_layers(config: AlbertConfig) -> list[TransformerLayer]:
    """L layers whose parameters are shared as ``config.sharing`` says (§3.1, Table 4)."""
    first = bert_layer(config)
    if config.sharing == "all":
        return [first] * config.num_hidden_layers
    layers = [first]
    for _ in range(config.num_hidden_layers - 1):
        layer = bert_layer(config)
        for name in SHARED_MODULES.get(config.sharing, ()):
            setattr(layer, name, getattr(first, name))
        layers.append(layer)
    return layers


class AlbertModel(BertModel):
    """Factorized embeddings + shared Transformer layers + optional [CLS] pooler."""

    embeddings_class = AlbertEmbeddings

    def build_layers(self, config: AlbertConfig) -> list[TransformerLayer]:
        return shared_layers(config)


class AlbertForPreTraining(EncoderForMaskedLM):
    """ALBERT with its pretraining heads (§3.1, §4.1): ``mlm_head`` (H -> E, then the tied
    decoder) and the sentence-order classifier ``sop_head`` on the pooled [CLS] state, which
    also serves NSP in the paper's comparison of inter-sentence losses (Table 5)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config, AlbertModel(config), "albert")
        self.sop_head = nn.Linear(config.hidden_size, 2)
        init_normal_(self.sop_head, config.initializer_range)

    @property
    def nsp_head(self) -> nn.Linear:
        """The same classifier, trained on next-sentence pairs (objective=mlm_nsp)."""
        return self.sop_head
