"""T5: the text-to-text Transformer (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer").

§2.1: an encoder-decoder Transformer close to Vaswani et al. 2017 with these differences: layer
normalisation only rescales (no additive bias; RMSNorm, ``blocks.py``) and sits at the input of
each sub-block, with a residual connection around it and a final norm after each stack (pre-LN);
no bias in any dense layer; dropout inside the feed-forward, on the skip connections, the
attention weights and the input and output of each stack; attention logits unscaled (the
1/sqrt(d_k) is folded into the initialisation of the queries); relative position embeddings: a
learned scalar per head and per bucket of key - query offset, added to the attention logits,
32 buckets whose ranges grow logarithmically up to an offset of 128, beyond which every offset
shares a bucket, bidirectional in the encoder (offsets before and after get their own buckets)
and causal in the decoder (only offsets to the past), one table per stack shared by all its
layers (computed once for the stack here); the input embedding matrix is shared by encoder,
decoder and the output layer. As released (mesh-tensorflow, transformers' ``T5Model``): the tied
output layer scales the decoder output by d_model**-0.5. T5 v1.1 (Raffel et al.'s released
follow-up) uses the gated-GELU feed-forward (Shazeer 2020, ``blocks.FeedForward(gated=True)``)
and an output layer of its own, unscaled (``tie_word_embeddings=False``).

The parity API is BART's (``lit_models/nets/bart.py``): ``T5Model(input_ids=, attention_mask=,
decoder_input_ids=)`` returns the decoder's ``last_hidden_state``; ``encode()`` / ``decode()`` run
one side each, ``decode`` with a ``LayerCache`` per decoder layer for incremental generation.
Dropout inside the feed-forward network is not applied (the shared ``FeedForward`` has none).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.nets.attention import HeadProbe, LayerCache, attentions_of, head_probes
from lit_models.nets.blocks import TransformerEncoder, TransformerLayer, padding_mask
from lit_models.nets.outputs import Seq2SeqOutput, shift_right


@dataclass
class T5Config:
    """Defaults are T5-small (§3.1.1's baseline at half size: 6 + 6 layers, d_model 512,
    8 heads of 64, d_ff 2048, 32,128 vocabulary entries: about 60M parameters)."""

    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64  # per-head size; heads x d_kv need not equal d_model
    d_ff: int = 2048
    num_layers: int = 6
    num_decoder_layers: int | None = None  # None: as many as the encoder
    num_heads: int = 8
    relative_attention_num_buckets: int = 32  # §2.1
    relative_attention_max_distance: int = 128  # §2.1: offsets beyond share a bucket
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    initializer_factor: float = 1.0
    feed_forward_proj: str = "relu"  # "relu" (T5), "gated-gelu" (T5 v1.1)
    tie_word_embeddings: bool = True  # False: an output layer of its own (v1.1)
    scale_decoder_outputs: bool | None = None  # h d_model**-0.5 in the LM head; None: if tied
    n_positions: int = 512  # input length tasks are checked against (§3.1.1: 512 tokens)
    pad_token_id: int = 0
    eos_token_id: int = 1
    decoder_start_token_id: int = 0  # T5 starts the decoder with <pad>

    @property
    def gated(self) -> bool:
        return self.feed_forward_proj.startswith("gated-")

    @property
    def activation(self) -> str:
        act = self.feed_forward_proj.removeprefix("gated-")
        return "gelu_new" if self.gated and act == "gelu" else act  # v1.1's tanh GELU

    def __post_init__(self) -> None:
        if self.scale_decoder_outputs is None:  # as released: T5 scales, v1.1 does not
            self.scale_decoder_outputs = self.tie_word_embeddings

    @property
    def decoder_layers(self) -> int:
        return self.num_decoder_layers or self.num_layers

    @property
    def max_length(self) -> int:
        return self.n_positions

    # sizes under the names optimizers and FLOP counters read
    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def num_hidden_layers(self) -> int:
        return self.num_layers

    @property
    def intermediate_size(self) -> int:
        return self.d_ff


def relative_position_bucket(offset: Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> Tensor:
    """Bucket of each key - query ``offset`` (§2.1). Bidirectional: half the buckets for keys
    after the query. Of a direction's buckets, the first half holds offsets 0, 1, ... one each,
    the second half logarithmically wider ranges up to ``max_distance``; farther offsets share
    the last bucket. Causal: keys after the query fall in bucket 0 (the mask hides them)."""
    bucket = torch.zeros_like(offset)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (offset > 0).long() * num_buckets
        distance = offset.abs()
    else:
        distance = (-offset).clamp(min=0)
    exact = num_buckets // 2
    log_ratio = torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
    far = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Module):
    """A learned scalar per head and offset bucket: the additive attention bias of one stack."""

    def __init__(self, config: T5Config, bidirectional: bool):
        super().__init__()
        self.bidirectional = bidirectional
        self.num_buckets = config.relative_attention_num_buckets
        self.max_distance = config.relative_attention_max_distance
        self.buckets = nn.Embedding(self.num_buckets, config.num_heads)

    def forward(self, queries: int, keys: int, start: int = 0) -> Tensor:
        """Bias [1, heads, queries, keys] for queries at positions start .. start + queries - 1
        and keys at 0 .. keys - 1."""
        device = self.buckets.weight.device
        query = torch.arange(start, start + queries, device=device)[:, None]
        offset = torch.arange(keys, device=device)[None, :] - query
        bucket = relative_position_bucket(offset, self.bidirectional, self.num_buckets,
                                          self.max_distance)
        return self.buckets(bucket).permute(2, 0, 1)[None]


def _stack(config: T5Config, layers: int, cross_attention: bool) -> TransformerEncoder:
    return TransformerEncoder(
        [TransformerLayer(config.d_model, config.num_heads, config.d_ff, config.activation,
                          config.dropout_rate, config.dropout_rate, config.layer_norm_epsilon,
                          pre_norm=True, cross_attention=cross_attention, head_dim=config.d_kv,
                          scale=1.0, norm="rmsnorm", bias=False, gated=config.gated,
                          activation_dropout=config.dropout_rate)
         for _ in range(layers)],
        final_norm=nn.RMSNorm(config.d_model, eps=config.layer_norm_epsilon),
    )


def init_t5_(model: "T5Model") -> None:
    """Mesh TensorFlow's initialisation, as released: N(0, factor x fan-in^-0.5) for every
    projection, the queries N(0, factor x (d_model d_kv)^-0.5) (the folded-in 1/sqrt(d_k)),
    N(0, factor) for the embeddings, relative position biases N(0, factor x d_model^-0.5), norm
    scales at factor."""
    config, factor = model.config, model.config.initializer_factor
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=factor * module.in_features ** -0.5)
        elif isinstance(module, nn.RMSNorm):
            nn.init.constant_(module.weight, factor)
        elif isinstance(module, RelativePositionBias):
            nn.init.normal_(module.buckets.weight, std=factor * config.d_model ** -0.5)
    nn.init.normal_(model.shared.weight, std=factor)
    query_std = factor * (config.d_model * config.d_kv) ** -0.5
    for layer in (*model.encoder.layers, *model.decoder.layers):
        nn.init.normal_(layer.attention.qkv.weight[:layer.attention.inner_size], std=query_std)
        if layer.cross_attention is not None:
            nn.init.normal_(layer.cross_attention.q.weight, std=query_std)


class T5Model(nn.Module):
    """Shared embeddings, a bidirectional encoder and a causal decoder with cross-attention,
    each stack with its relative position bias."""

    def __init__(self, config: T5Config):
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder_position_bias = RelativePositionBias(config, bidirectional=True)
        self.decoder_position_bias = RelativePositionBias(config, bidirectional=False)
        self.encoder = _stack(config, config.num_layers, cross_attention=False)
        self.decoder = _stack(config, config.decoder_layers, cross_attention=True)
        self.dropout = nn.Dropout(config.dropout_rate)
        init_t5_(self)

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None,
               probes: list[HeadProbe] | None = None) -> Tensor:
        """``input_ids`` [B, S] (``attention_mask`` 1 = token, 0 = pad) -> memory [B, S, H];
        ``probes``: one ``HeadProbe`` per encoder layer (``attention.head_probes``)."""
        S = input_ids.shape[1]
        x = self.dropout(self.shared(input_ids))
        bias = self.encoder_position_bias(S, S)
        x, _ = self.encoder(x, padding_mask(attention_mask), bias=bias, probes=probes)
        return self.dropout(x)

    def decode(self, decoder_input_ids: Tensor, memory: Tensor | None,
               attention_mask: Tensor | None = None,
               caches: list[LayerCache] | None = None) -> Tensor:
        """``decoder_input_ids`` [B, T] -> [B, T, H], attending over ``memory`` [B, S, H] whose
        padding ``attention_mask`` [B, S] marks. With ``caches`` the ids are the next T
        positions after those cached; once they hold the memory's keys/values, ``memory`` may be
        None."""
        start = 0 if caches is None else caches[0].self_attention.length
        T = decoder_input_ids.shape[1]
        bias = self.decoder_position_bias(T, start + T, start)
        x = self.dropout(self.shared(decoder_input_ids))
        x, _ = self.decoder(x, bias=bias, causal=True, memory=memory,
                            memory_mask=padding_mask(attention_mask), caches=caches)
        return self.dropout(x)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                decoder_input_ids: Tensor | None = None, output_attentions: bool = False,
                head_mask: Tensor | None = None) -> Seq2SeqOutput:
        """Without ``decoder_input_ids``, the inputs shifted right after the decoder start
        token. ``output_attentions`` and ``head_mask`` concern the encoder's layers."""
        if decoder_input_ids is None:
            decoder_input_ids = shift_right(input_ids, self.config.decoder_start_token_id,
                                            self.config.pad_token_id)
        probes = head_probes(head_mask, output_attentions, len(self.encoder.layers))
        memory = self.encode(input_ids, attention_mask, probes)
        return Seq2SeqOutput(self.decode(decoder_input_ids, memory, attention_mask), memory,
                             attentions_of(probes))


class T5ForConditionalGeneration(T5Model):
    """T5 with its language-modelling head: logits = (h d_model**-0.5) E^T with the shared
    embeddings E (T5), or h W^T with an output layer W of its own (v1.1,
    ``tie_word_embeddings=False``); ``scale_decoder_outputs`` sets the scaling apart (transformers
    5 ties v1.1's layer unless a checkpoint holds its own, and keeps it unscaled). ``forward``
    returns hidden states; ``logits`` applies the head where a loss or the next-token choice
    needs it."""

    def __init__(self, config: T5Config):
        super().__init__(config)
        self.lm_head = None
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
            nn.init.normal_(self.lm_head.weight, std=config.initializer_factor)

    def logits(self, hidden: Tensor) -> Tensor:
        """[..., H] -> vocabulary logits [..., V]."""
        if self.config.scale_decoder_outputs:
            hidden = hidden * self.config.d_model ** -0.5
        if self.lm_head is None:
            return F.linear(hidden, self.shared.weight)
        return self.lm_head(hidden)

    def new_caches(self) -> list[LayerCache]:
        """Empty key/value caches, one per decoder layer, for ``decode``."""
        return [LayerCache() for _ in range(self.config.decoder_layers)]
