"""BART: a denoising sequence-to-sequence Transformer (Lewis et al. 2020, "BART: Denoising
Sequence-to-Sequence Pre-training for Natural Language Generation, Translation, and
Comprehension").

§2.1: the standard encoder-decoder Transformer (Vaswani et al. 2017, post-LN layers from
``blocks.py``) with GeLU activations and learned position embeddings; each decoder layer also
attends over the encoder's final hidden layer, and there is no feed-forward layer before word
prediction. As in fairseq's release (and transformers' ``BartModel``): one embedding matrix
``shared`` for encoder, decoder and output layer, position ids offset by 2 (fairseq reserved the
first two rows), a LayerNorm on the embeddings of each stack (``layernorm_embedding``), and a
per-token ``final_logits_bias`` added to the LM logits. §2.2 (the corruptions) lives in
``lit_models/objectives/denoising.py``.

The parity API: ``BartModel(input_ids=, attention_mask=, decoder_input_ids=)`` returns the
decoder's ``last_hidden_state``; ``encode()`` and ``decode()`` run one side each, ``decode`` with
a ``LayerCache`` per decoder layer for incremental generation (``lit_models/core/generation.py``).
Decoder inputs are right-padded and causal, so they need no padding mask: a position never sees
the pads after it. ``activation_dropout`` is the dropout inside the feed-forward (0 in the base
configuration).
"""

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.nets.attention import HeadProbe, LayerCache, attentions_of, head_probes
from lit_models.nets.blocks import TransformerEncoder, TransformerLayer, init_normal_, padding_mask
from lit_models.nets.outputs import Seq2SeqOutput, shift_right

#: fairseq keeps position rows 0 and 1 unused: position p reads row p + 2
POSITION_OFFSET = 2


@dataclass
class BartConfig:
    """Defaults are BART-base (§3: 6 encoder and 6 decoder layers, hidden size 768)."""

    vocab_size: int = 50265
    max_position_embeddings: int = 1024
    d_model: int = 768
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 12
    decoder_attention_heads: int = 12
    encoder_ffn_dim: int = 3072
    decoder_ffn_dim: int = 3072
    activation_function: str = "gelu"  # §2.1: GeLUs instead of ReLUs
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0  # dropout inside the feed-forward (0 in the base configuration)
    init_std: float = 0.02
    scale_embedding: bool = False  # multiply token embeddings by sqrt(d_model)
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2  # fairseq starts the decoder with </s>

    @property
    def max_length(self) -> int:
        return self.max_position_embeddings

    # the encoder's sizes under the names optimizers and FLOP counters read (transformers'
    # BartConfig attribute_map)
    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def num_hidden_layers(self) -> int:
        return self.encoder_layers

    @property
    def intermediate_size(self) -> int:
        return self.encoder_ffn_dim


def _layer(config: BartConfig, heads: int, ffn: int, cross_attention: bool) -> TransformerLayer:
    return TransformerLayer(
        config.d_model, heads, ffn, config.activation_function, config.dropout,
        config.attention_dropout, layer_norm_eps=1e-5, pre_norm=False,
        cross_attention=cross_attention, activation_dropout=config.activation_dropout,
    )


class BartModel(nn.Module):
    """Shared embeddings, a bidirectional encoder and a causal decoder with cross-attention."""

    def __init__(self, config: BartConfig):
        super().__init__()
        self.config = config
        H, positions = config.d_model, config.max_position_embeddings + POSITION_OFFSET
        self.shared = nn.Embedding(config.vocab_size, H, padding_idx=config.pad_token_id)
        self.embed_scale = math.sqrt(H) if config.scale_embedding else 1.0
        self.encoder_positions = nn.Embedding(positions, H)
        self.decoder_positions = nn.Embedding(positions, H)
        self.encoder_embedding_norm = nn.LayerNorm(H)
        self.decoder_embedding_norm = nn.LayerNorm(H)
        self.encoder = TransformerEncoder([
            _layer(config, config.encoder_attention_heads, config.encoder_ffn_dim, False)
            for _ in range(config.encoder_layers)
        ])
        self.decoder = TransformerEncoder([
            _layer(config, config.decoder_attention_heads, config.decoder_ffn_dim, True)
            for _ in range(config.decoder_layers)
        ])
        self.dropout = nn.Dropout(config.dropout)
        self.apply(partial(init_normal_, std=config.init_std))

    def _embed(self, ids: Tensor, positions: nn.Embedding, norm: nn.LayerNorm,
               start: int) -> Tensor:
        """Dropout(LayerNorm(token * scale + position)) for positions start .. start + T - 1."""
        T = ids.shape[1]
        if start + T > self.config.max_position_embeddings:
            raise ValueError(
                f"sequence length {start + T} exceeds max_position_embeddings "
                f"{self.config.max_position_embeddings}; truncate inputs (task max lengths)"
            )
        rows = torch.arange(start, start + T, device=ids.device) + POSITION_OFFSET
        x = self.shared(ids) * self.embed_scale + positions(rows)
        return self.dropout(norm(x))

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None,
               probes: list[HeadProbe] | None = None) -> Tensor:
        """``input_ids`` [B, S] (``attention_mask`` 1 = token, 0 = pad) -> memory [B, S, H];
        ``probes``: one ``HeadProbe`` per encoder layer (``attention.head_probes``)."""
        x = self._embed(input_ids, self.encoder_positions, self.encoder_embedding_norm, 0)
        return self.encoder(x, padding_mask(attention_mask), probes=probes)[0]

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor | None,
        attention_mask: Tensor | None = None,
        caches: list[LayerCache] | None = None,
    ) -> Tensor:
        """``decoder_input_ids`` [B, T] -> [B, T, H], attending over ``memory`` [B, S, H] whose
        padding ``attention_mask`` [B, S] marks. With ``caches`` (one per decoder layer) the ids
        are the next T positions after those cached; once the cross-attention caches hold the
        memory's keys/values, ``memory`` may be None."""
        start = 0 if caches is None else caches[0].self_attention.length
        x = self._embed(decoder_input_ids, self.decoder_positions, self.decoder_embedding_norm,
                        start)
        x, _ = self.decoder(x, causal=True, memory=memory, memory_mask=padding_mask(attention_mask),
                            caches=caches)
        return x

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        output_attentions: bool = False,
        head_mask: Tensor | None = None,
    ) -> Seq2SeqOutput:
        """Without ``decoder_input_ids``, the inputs shifted right after the decoder start token
        (transformers' default, BART's denoising setting). ``output_attentions`` and
        ``head_mask`` concern the encoder's layers."""
        if decoder_input_ids is None:
            decoder_input_ids = shift_right(input_ids, self.config.decoder_start_token_id,
                                            self.config.pad_token_id)
        probes = head_probes(head_mask, output_attentions, len(self.encoder.layers))
        memory = self.encode(input_ids, attention_mask, probes)
        return Seq2SeqOutput(self.decode(decoder_input_ids, memory, attention_mask), memory,
                             attentions_of(probes))


class BartForConditionalGeneration(nn.Module):
    """BART with its language-modelling head: logits = h E^T + final_logits_bias, E the shared
    embeddings (tied). ``forward`` returns hidden states; ``logits`` applies the head where a
    loss or the next-token choice needs it."""

    def __init__(self, config: BartConfig):
        super().__init__()
        self.config = config
        self.model = BartModel(config)
        # a buffer in transformers (zeros, never trained): a frozen parameter here, so checkpoint
        # import and export carry it like any weight
        self.final_logits_bias = nn.Parameter(torch.zeros(1, config.vocab_size),
                                              requires_grad=False)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                decoder_input_ids: Tensor | None = None, output_attentions: bool = False,
                head_mask: Tensor | None = None) -> Seq2SeqOutput:
        return self.model(input_ids, attention_mask, decoder_input_ids, output_attentions,
                          head_mask)

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None,
               probes: list[HeadProbe] | None = None) -> Tensor:
        return self.model.encode(input_ids, attention_mask, probes)

    def decode(self, decoder_input_ids: Tensor, memory: Tensor | None,
               attention_mask: Tensor | None = None,
               caches: list[LayerCache] | None = None) -> Tensor:
        return self.model.decode(decoder_input_ids, memory, attention_mask, caches)

    def logits(self, hidden: Tensor) -> Tensor:
        """[..., H] -> vocabulary logits [..., V]."""
        return F.linear(hidden, self.model.shared.weight) + self.final_logits_bias[0]

    def new_caches(self) -> list[LayerCache]:
        """Empty key/value caches, one per decoder layer, for ``decode``."""
        return [LayerCache() for _ in range(self.config.decoder_layers)]
