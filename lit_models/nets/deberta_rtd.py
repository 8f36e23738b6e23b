"""DeBERTa-v3's pretraining net: replaced-token detection with gradient-disentangled embedding
sharing (GDES).

He et al. 2023, "DeBERTaV3: Improving DeBERTa using ELECTRA-Style Pre-Training with
Gradient-Disentangled Embedding Sharing". §2: ELECTRA's generator and discriminator (Clark et
al. 2020), trained on L = L_MLM + λ L_RTD (``lit_models/objectives/rtd.py``), with DeBERTa-v2
encoders; the generator as wide as the discriminator and half as deep (§5.1). §3: sharing the
token embeddings E between the two (ES, as ELECTRA) lets the MLM and RTD losses pull E in
opposite directions ("tug-of-war"); not sharing them (NES) slows training. GDES (§3.3, Eq. 4)
shares them with the gradient stopped on the discriminator's side:

    E_D = sg(E_G) + E_Δ,    E_Δ initialised to zero,

so the generator's MLM loss alone updates E_G, and the RTD loss updates only the residual E_Δ
(and the rest of the discriminator). After pretraining the discriminator's embeddings are
E_G + E_Δ (``GradientDisentangledEmbedding.weight``).
"""

from dataclasses import replace
from functools import partial

import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.nets.blocks import activation, init_normal_
from lit_models.nets.deberta_v2 import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Model
from lit_models.nets.outputs import EncoderOutput


class GradientDisentangledEmbedding(nn.Module):
    """The discriminator's token embeddings E_D = sg(E_G) + E_Δ (§3.3): ``shared`` is the
    generator's table E_G (held, not registered: its parameter is the generator's), ``delta``
    the residual E_Δ, zero at the start."""

    def __init__(self, shared: nn.Embedding):
        super().__init__()
        self.__dict__["shared"] = shared  # outside the module tree: E_G belongs to the generator
        self.padding_idx, self.embedding_dim = shared.padding_idx, shared.embedding_dim
        self.delta = nn.Parameter(shared.weight.new_zeros(shared.weight.shape))

    @property
    def weight(self) -> Tensor:
        """E_D, no gradient reaching E_G through it."""
        return self.shared.weight.detach() + self.delta

    def forward(self, input_ids: Tensor) -> Tensor:
        return F.embedding(input_ids, self.weight, self.padding_idx)


class ReplacedTokenDetectionHead(nn.Module):
    """One logit per token, replaced vs original: w^T LayerNorm(act(W h + b)), the released
    discriminator's head (``mask_predictions``: dense, LayerNorm, classifier)."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.classifier = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: Tensor) -> Tensor:
        """[..., H] -> [...] logits of "replaced"."""
        return self.classifier(self.norm(self.act(self.dense(hidden)))).squeeze(-1)


def generator_config(config: DebertaV2Config) -> DebertaV2Config:
    """The generator: the discriminator's width and half its depth (§5.1)."""
    return replace(config, num_hidden_layers=max(1, config.num_hidden_layers // 2),
                   pruned_heads={})


class DebertaV3ForPreTraining(nn.Module):
    """The generator (``generator``: a DeBERTa-v2 masked LM), the discriminator (``deberta``,
    its token embeddings GDES-shared with the generator's) and its head (``rtd_head``), as the
    ``rtd`` objective uses them (``lit_models/objectives/rtd.py``)."""

    def __init__(self, config: DebertaV2Config):
        super().__init__()
        self.config = config
        self.generator = DebertaV2ForMaskedLM(generator_config(config))
        self.deberta = DebertaV2Model(config)
        self.deberta.embeddings.word_embeddings = GradientDisentangledEmbedding(
            self.generator.deberta.embeddings.word_embeddings)
        self.rtd_head = ReplacedTokenDetectionHead(config)
        self.rtd_head.apply(partial(init_normal_, std=config.initializer_range))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_hidden_states: bool = False,
                position_ids: Tensor | None = None, output_attentions: bool = False,
                head_mask: Tensor | None = None) -> EncoderOutput:
        """The discriminator's encoder."""
        return self.deberta(input_ids, attention_mask, token_type_ids, output_hidden_states,
                            position_ids, output_attentions, head_mask)
