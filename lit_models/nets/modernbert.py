"""ModernBERT: a pre-normalised encoder with rotary positions, GeGLU and alternating global and
local attention.

Warner et al. 2024, "Smarter, Better, Faster, Longer: A Modern Bidirectional Encoder for Fast,
Memory Efficient, and Long Context Finetuning and Inference", §2.1.1 "Architectural Improvements":
no bias terms in the linear layers or norms (``attention_bias``, ``mlp_bias``, ``norm_bias``
false), rotary position embeddings (Su et al. 2021; ``rotary.py``) instead of learned ones,
pre-normalisation (Xiong et al. 2020) with a LayerNorm after the embeddings and one after the last
layer (the first layer's attention takes the normalised embeddings as they are), GeGLU feed-forward
layers (Shazeer 2020: GELU(x W_0) * x W_1, ``blocks.FeedForward``). §2.1.2 "Efficiency
Improvements": attention that alternates, every ``global_attn_every_n_layers``-th layer (the first
included) attending globally with RoPE base ``global_rope_theta`` (160,000), the others to the
tokens within ``local_attention`` / 2 positions either side (a 128-token window) with base
``local_rope_theta`` (10,000); unpadding, a padded batch run packed (``attention.Unpadding`` and
``varlen_attention``). The classification head (transformers' ``ModernBertPredictionHead`` and
classifier) pools the [CLS] state or the mean of the tokens' states (``classifier_pooling``), then
dense, activation and LayerNorm before the output layer.

Field names of ``ModernBertConfig`` equal transformers' ``ModernBertConfig`` keys (those of the
released config.json files), so config.json maps 1:1.
"""

import math
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from lit_models.nets.attention import (
    HeadProbe,
    MultiHeadSelfAttention,
    Unpadding,
    attentions_of,
    head_probes,
    split_heads,
)
from lit_models.nets.blocks import FeedForward, activation, make_norm, padding_mask
from lit_models.nets.outputs import EncoderOutput
from lit_models.nets.pruning import PrunableHeads
from lit_models.nets.rotary import apply_rotary, rotary_angles
from lit_models.nets.varlen_attention import varlen_attention

POOLINGS = ("cls", "mean")


@dataclass
class ModernBertConfig:
    """Defaults are ModernBERT-base (Warner et al. 2024, Table 4: 22 layers, hidden 768, GLU
    expansion 2304 = 2 x 1152, 12 heads, 149M parameters)."""

    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152  # each half of the GeGLU input projection
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0  # weights drawn within ±2 std (truncated normal)
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: int = 50283
    attention_bias: bool = False
    attention_dropout: float = 0.0
    global_attn_every_n_layers: int = 3
    local_attention: int = 128  # the local layers' whole window: local_attention / 2 each side
    global_rope_theta: float = 160000.0
    local_rope_theta: float = 10000.0
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True  # the masked-LM decoder's per-token bias
    classifier_pooling: str = "cls"  # "cls" or "mean" (over the tokens, not the padding)
    classifier_dropout: float = 0.0
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    #: heads removed from each layer's weights (``nets/pruning.py``); transformers' ModernBERT
    #: has no such key, so a pruned net is not exported (``archs/modernbert.py``)
    pruned_heads: dict[int, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.classifier_pooling not in POOLINGS:
            raise ValueError(f"classifier_pooling {self.classifier_pooling!r}: use one of "
                             f"{POOLINGS} in the model config")
        if self.global_attn_every_n_layers < 1:
            raise ValueError(f"global_attn_every_n_layers {self.global_attn_every_n_layers}: "
                             "use 1 (every layer global) or more")

    @property
    def max_length(self) -> int:
        """The longest input, in tokens, the model was trained for."""
        return self.max_position_embeddings

    @property
    def window(self) -> int:
        """Positions a local layer's token sees on either side."""
        return self.local_attention // 2

    def is_global(self, layer: int) -> bool:
        """Whether layer ``layer`` (from 0) attends globally."""
        return layer % self.global_attn_every_n_layers == 0


def init_truncated_(module: nn.Module, std: float, cutoff: float) -> None:
    """transformers' ModernBERT initialisation of one Linear or Embedding: weights from a
    normal of ``std`` truncated at ±``cutoff`` std, biases 0."""
    nn.init.trunc_normal_(module.weight, std=std, a=-cutoff * std, b=cutoff * std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class ModernBertEmbeddings(nn.Module):
    """Dropout(LayerNorm(token embeddings)): no position or segment embeddings."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        H = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, H, padding_idx=config.pad_token_id)
        self.norm = make_norm("layernorm", H, config.norm_eps, config.norm_bias)
        self.dropout = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.dropout(self.norm(self.word_embeddings(input_ids)))


@dataclass
class LayerInputs:
    """What every layer of one kind (global or local) reads besides the hidden states: the
    rotary angles of its base, its window (None: global) and its mask of the padded path."""

    angles: tuple[Tensor, Tensor]
    window: int | None
    mask: Tensor | None
    positions: Tensor | None  # [N]: each packed token's position (the unpadded path's window)


class RotarySelfAttention(MultiHeadSelfAttention):
    """Self-attention whose queries and keys are rotated by their positions (RoFormer) and which,
    in a local layer, sees a sliding window; on an unpadded batch it attends over the packed
    sequences (``varlen_attention``); a probe (``HeadProbe``) takes the padded, eager path."""

    def forward(self, x: Tensor, inputs: LayerInputs, unpadding: Unpadding | None = None,
                probe: HeadProbe | None = None) -> Tensor:
        if self.num_heads == 0:  # every head pruned: the output projection of nothing
            return super().forward(x, unpadding=unpadding, probe=probe)
        qkv = self.qkv(x)
        cos, sin = inputs.angles
        dropout = self.dropout if self.training else 0.0
        if unpadding is not None:  # [N, 3 heads d] -> 3 x [N, heads, d]
            q, k, v = qkv.view(-1, 3, self.num_heads, self.head_dim).unbind(1)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
            y = varlen_attention(q, k, v, unpadding.lengths, inputs.positions, inputs.window,
                                 self.scale, dropout)
            return self.out(y.flatten(1))
        q, k, v = split_heads(qkv, 3, self.num_heads)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        return self.attend(q, k, v, inputs.mask, None, False, None, probe)


class ModernBertLayer(nn.Module):
    """x + Dropout(Attention(Norm(x))), then x + GeGLU(Norm(x)) (pre-normalisation; the first
    layer's attention norm is the identity: its input is the normalised embeddings)."""

    def __init__(self, config: ModernBertConfig, index: int):
        super().__init__()
        H = config.hidden_size
        norm = partial(make_norm, "layernorm", H, config.norm_eps, config.norm_bias)
        self.attention_norm = nn.Identity() if index == 0 else norm()
        self.attention = RotarySelfAttention(H, config.num_attention_heads,
                                             config.attention_dropout,
                                             bias=config.attention_bias)
        self.attention_dropout = nn.Dropout(config.attention_dropout)
        self.ffn_norm = norm()
        self.feed_forward = FeedForward(H, config.intermediate_size, config.hidden_activation,
                                        gated=True, bias=config.mlp_bias,
                                        dropout=config.mlp_dropout)

    def forward(self, x: Tensor, inputs: LayerInputs, unpadding: Unpadding | None = None,
                probe: HeadProbe | None = None) -> Tensor:
        x = x + self.attention_dropout(self.attention(self.attention_norm(x), inputs, unpadding,
                                                      probe))
        return x + self.feed_forward(self.ffn_norm(x))


class ModernBertModel(PrunableHeads, nn.Module):
    """Embeddings, the layers and the final norm; ``pooler_output`` is the state the
    classification head reads (``classifier_pooling``: [CLS]'s, or the mean over the tokens),
    which has no weights of its own."""

    def __init__(self, config: ModernBertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertLayer(config, i)
                                    for i in range(config.num_hidden_layers))
        self.final_norm = make_norm("layernorm", config.hidden_size, config.norm_eps,
                                    config.norm_bias)
        self.init_weights()
        self.prune_configured_heads()

    def init_weights(self) -> None:
        """As transformers initialises ModernBERT: truncated normals of std ``initializer_range``
        for the embeddings and input projections, std / sqrt(2 L) for the output projections
        (the residual branches), norms at 1."""
        c = self.config
        cutoff = c.initializer_cutoff_factor
        out_std = c.initializer_range / math.sqrt(2.0 * c.num_hidden_layers)
        init_truncated_(self.embeddings.word_embeddings, c.initializer_range, cutoff)
        for layer in self.layers:
            init_truncated_(layer.attention.qkv, c.initializer_range, cutoff)
            init_truncated_(layer.feed_forward.linear1, c.initializer_range, cutoff)
            init_truncated_(layer.attention.out, out_std, cutoff)
            init_truncated_(layer.feed_forward.linear2, out_std, cutoff)

    def head_layers(self) -> list[nn.Module]:
        return [layer.attention for layer in self.layers]

    def layer_inputs(self, T: int, attention_mask: Tensor | None, position_ids: Tensor | None,
                     unpadding: Unpadding | None, device: torch.device
                     ) -> tuple[LayerInputs, LayerInputs]:
        """What the global and the local layers read: rotary angles at each token's position
        (``position_ids`` [B, T], else its column; per packed token when unpadded) and, for the
        padded path, the key padding mask, banded to the window in the local layers."""
        c = self.config
        head_dim = c.hidden_size // c.num_attention_heads
        if position_ids is None:
            position_ids = torch.arange(T, device=device)[None]
        packed = None
        if unpadding is not None:  # [N, 1]: broadcast over [N, heads, d]
            packed = position_ids.expand(unpadding.batch, T).flatten()[unpadding.positions]
            positions = packed[:, None]
        else:  # [B or 1, 1, T]: over [B, heads, T, d]
            positions = position_ids[:, None]
        mask = padding_mask(attention_mask)
        band = (positions[..., :, None] - positions[..., None, :]).abs() <= c.window
        local_mask = band if mask is None else mask & band
        return (LayerInputs(rotary_angles(positions, head_dim, c.global_rope_theta), None, mask,
                            packed),
                LayerInputs(rotary_angles(positions, head_dim, c.local_rope_theta), c.window,
                            local_mask, packed))

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        head_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> EncoderOutput:
        """``input_ids`` [B, T]; ``attention_mask`` [B, T] 1 = token, 0 = pad (None = no pad), or
        [B, T, T] which keys each query may attend (packed rows, with their ``position_ids``
        [B, T]); ``token_type_ids`` is not read (ModernBERT has one segment). On the CPU a padded
        batch runs unpadded (its outputs are zero at the padding)."""
        B, T = input_ids.shape
        if T > self.config.max_position_embeddings:
            raise ValueError(f"sequence length {T} exceeds max_position_embeddings "
                             f"{self.config.max_position_embeddings}; truncate inputs")
        probes = head_probes(head_mask, output_attentions, len(self.layers))
        x = self.embeddings(input_ids)
        # the probabilities a probe keeps are [B, heads, T, T]: a padded batch then stays padded
        unpadding = Unpadding.of(attention_mask) if probes is None else None
        global_inputs, local_inputs = self.layer_inputs(T, attention_mask, position_ids,
                                                        unpadding, x.device)
        hidden_states = [x] if output_hidden_states else None
        if unpadding is not None:
            x = unpadding.remove(x)
        for i, layer in enumerate(self.layers):
            inputs = global_inputs if self.config.is_global(i) else local_inputs
            x = layer(x, inputs, unpadding, None if probes is None else probes[i])
            if hidden_states is not None:
                hidden_states.append(x)
        x = self.final_norm(x)
        if hidden_states is not None:
            hidden_states[-1] = x
            hidden_states[1:] = [h if unpadding is None else unpadding.restore(h)
                                 for h in hidden_states[1:]]
        x = x if unpadding is None else unpadding.restore(x)
        return EncoderOutput(x, self.pool(x, attention_mask),
                             None if hidden_states is None else tuple(hidden_states),
                             attentions_of(probes))

    def pool(self, states: Tensor, attention_mask: Tensor | None) -> Tensor:
        """[B, H]: the [CLS] state, or the mean of the tokens' states (``classifier_pooling``)."""
        if self.config.classifier_pooling == "cls":
            return states[:, 0]
        if attention_mask is None:
            return states.mean(1)
        weights = attention_mask.to(states.dtype)[..., None]
        return (states * weights).sum(1) / weights.sum(1)


class ModernBertPredictionHead(nn.Module):
    """Norm(act(W h)): the transform under both the masked-LM decoder and the classifier."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        H = config.hidden_size
        self.dense = nn.Linear(H, H, bias=config.classifier_bias)
        self.act = activation(config.classifier_activation)
        self.norm = make_norm("layernorm", H, config.norm_eps, config.norm_bias)
        init_truncated_(self.dense, config.initializer_range / math.sqrt(
            2.0 * config.num_hidden_layers), config.initializer_cutoff_factor)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.norm(self.act(self.dense(hidden)))


class ModernBertClassifier(ModernBertPredictionHead):
    """scores = W_o Dropout(Norm(act(W_d C))), C the pooled state (``pooler_output``: [CLS] or
    the mean, as the config's ``classifier_pooling`` says); ``dropout`` replaces the config's
    ``classifier_dropout`` (the run's setting)."""

    def __init__(self, config: ModernBertConfig, num_labels: int, dropout: float) -> None:
        super().__init__(config)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(config.hidden_size, num_labels)
        init_truncated_(self.out, config.hidden_size ** -0.5, config.initializer_cutoff_factor)

    def forward(self, encoded: EncoderOutput) -> Tensor:
        return self.out(self.dropout(super().forward(encoded.pooler_output)))


class ModernBertMLMHead(nn.Module):
    """The masked-LM head: Norm(act(W h)) E^T + b, E the token embeddings (tied)."""

    def __init__(self, config: ModernBertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.head = ModernBertPredictionHead(config)
        self.word_embeddings = word_embeddings
        self.bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.decoder_bias else None

    def forward(self, hidden: Tensor) -> Tensor:
        """[..., H] -> vocabulary logits [..., V]."""
        return nn.functional.linear(self.head(hidden), self.word_embeddings.weight, self.bias)


class ModernBertForMaskedLM(nn.Module):
    """ModernBERT with its pretraining head, ``mlm_head`` (masked LM at a 30% rate, §2.2)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.model = ModernBertModel(config)
        self.mlm_head = ModernBertMLMHead(config, self.model.embeddings.word_embeddings)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_hidden_states: bool = False,
                position_ids: Tensor | None = None) -> EncoderOutput:
        """The encoder's output (``ModernBertModel.forward``); the objectives apply the head."""
        return self.model(input_ids, attention_mask, output_hidden_states=output_hidden_states,
                          position_ids=position_ids)
