"""GPT-2: a decoder-only Transformer language model (Radford et al. 2019, "Language Models are
Unsupervised Multitask Learners", §2.3, on the GPT decoder of Radford et al. 2018, "Improving
Language Understanding by Generative Pre-Training", §3.1).

GPT (2018, §3.1): a multi-layer Transformer decoder, masked self-attention over the context
tokens (position i attends to positions <= i, Vaswani et al. 2017 §3.2.3), position-wise
feed-forward layers, learned position embeddings, and the output distribution
softmax(h W_e^T) through the token embedding matrix W_e (tied LM head). GPT-2 (§2.3): LayerNorm
moved to the input of each sub-block (pre-LN, ``blocks.py``), one more LayerNorm after the last
block, and the residual projections initialised with weights scaled by 1/sqrt(N), N the number of
residual layers (2 per block).

As in OpenAI's release (and transformers' ``GPT2Model``): the token embeddings have no padding
row, position ids are 0 .. T - 1 after the positions already in a cache unless given (generation
counts them over the non-pad tokens of a left-padded prompt, ``lit_models/core/generation.py``), and
``token_type_ids``, when given, are looked up in the token embeddings and added. Padding: a key
that is a pad is never attended; a pad query (left padding puts them before every real token, so
the causal mask would leave them nothing) attends to its causal window, pads included, so that
its output, which nothing reads, stays finite. The output's ``pooler_output`` is the state of the
last non-pad token, what GPT-2's sequence classifier reads (GPT, 2018 §3.3: the final
transformer activation of the last token).
"""

import math
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.nets.attention import LayerCache, attentions_of, head_probes
from lit_models.nets.blocks import TransformerEncoder, TransformerLayer, init_normal_, padding_mask
from lit_models.nets.outputs import EncoderOutput
from lit_models.nets.pruning import PrunableHeads


@dataclass
class GPTConfig:
    """Defaults are GPT-2 small (§2.3, Table 2: 12 layers, d_model 768, 117M parameters as the
    paper counts, 124M with the 50,257-token vocabulary's embeddings); special-token ids are those
    of plmbench's scratch vocabulary (<s>=0 <pad>=1 </s>=2)."""

    vocab_size: int = 50257
    n_positions: int = 1024  # context size (§2.3: 1024 tokens)
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None  # feed-forward size; None = 4 * n_embd
    activation_function: str = "gelu_new"  # GELU, tanh approximation (OpenAI's code)
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    bos_token_id: int = 0
    eos_token_id: int = 2
    pad_token_id: int = 1
    #: heads removed from each layer's weights, by original index (``nets/pruning.py``)
    pruned_heads: dict[int, list[int]] = field(default_factory=dict)

    # the sizes under the names optimizers, FLOP counters and generation read (transformers'
    # GPT2Config attribute_map)
    @property
    def hidden_size(self) -> int:
        return self.n_embd

    @property
    def num_hidden_layers(self) -> int:
        return self.n_layer

    @property
    def num_attention_heads(self) -> int:
        return self.n_head

    @property
    def intermediate_size(self) -> int:
        return self.n_inner or 4 * self.n_embd

    @property
    def max_length(self) -> int:
        return self.n_positions


def _layer(config: GPTConfig) -> TransformerLayer:
    return TransformerLayer(
        config.n_embd, config.n_head, config.intermediate_size, config.activation_function,
        config.resid_pdrop, config.attn_pdrop, config.layer_norm_epsilon, pre_norm=True,
    )


def causal_padding_mask(attention_mask: Tensor | None, queries: int) -> Tensor | None:
    """``attention_mask`` [B, Tk] (1 = token, 0 = pad; the last ``queries`` positions are the
    queries) -> boolean [B, 1, Tq, Tk]: pad keys hidden from real queries, pad queries free to
    see their whole causal window (module docstring); None without padding."""
    keys = padding_mask(attention_mask)
    if keys is None:
        return None
    pad_queries = attention_mask[:, -queries:] == 0
    return keys | pad_queries[:, None, :, None]


class GPTModel(PrunableHeads, nn.Module):
    """Token + position embeddings, a pre-LN causal Transformer stack and a final LayerNorm."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        H = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, H)
        self.wpe = nn.Embedding(config.n_positions, H)
        self.dropout = nn.Dropout(config.embd_pdrop)
        self.decoder = TransformerEncoder(
            [_layer(config) for _ in range(config.n_layer)],
            final_norm=nn.LayerNorm(H, eps=config.layer_norm_epsilon),
        )
        self.apply(partial(init_normal_, std=config.initializer_range))
        residual_std = config.initializer_range / math.sqrt(2 * config.n_layer)
        for layer in self.decoder.layers:
            for projection in (layer.attention.out, layer.feed_forward.linear2):
                nn.init.normal_(projection.weight, std=residual_std)
        self.prune_configured_heads()

    def head_layers(self) -> list[nn.Module]:
        return [layer.attention for layer in self.decoder.layers]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        caches: list[LayerCache] | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        head_mask: Tensor | None = None,
    ) -> EncoderOutput:
        """``input_ids`` [B, T] -> states [B, T, H]. With ``caches`` (one per layer) the ids are
        the T positions after those cached and ``attention_mask`` covers all of them.
        ``output_attentions`` and ``head_mask`` as BERT's (``attention.head_probes``)."""
        B, T = input_ids.shape
        past = 0 if caches is None else caches[0].self_attention.length
        if position_ids is None:
            if past + T > self.config.n_positions:
                raise ValueError(
                    f"sequence length {past + T} exceeds n_positions {self.config.n_positions}; "
                    "truncate inputs (task max lengths)"
                )
            position_ids = torch.arange(past, past + T, device=input_ids.device)[None]
        x = self.wte(input_ids) + self.wpe(position_ids)
        if token_type_ids is not None:
            x = x + self.wte(token_type_ids)
        probes = head_probes(head_mask, output_attentions, len(self.decoder.layers))
        x, hidden_states = self.decoder(
            self.dropout(x), causal_padding_mask(attention_mask, T), output_hidden_states,
            causal=True, caches=caches, probes=probes,
        )
        if attention_mask is None:
            last = x[:, -1]
        else:  # the rightmost non-pad position (left or right padding)
            positions = torch.arange(attention_mask.shape[1], device=x.device)
            index = (positions * attention_mask).argmax(-1) - (attention_mask.shape[1] - T)
            last = x[torch.arange(B, device=x.device), index.clamp(min=0)]
        return EncoderOutput(x, last, hidden_states, attentions_of(probes))


class GPTLMHeadModel(nn.Module):
    """GPT-2 with its language-modelling head: logits = h W_e^T (tied, no bias). ``forward``
    returns hidden states; ``logits`` applies the head where a loss or the next-token choice
    needs it."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = GPTModel(config)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                position_ids: Tensor | None = None, token_type_ids: Tensor | None = None,
                caches: list[LayerCache] | None = None) -> EncoderOutput:
        return self.transformer(input_ids, attention_mask, position_ids, token_type_ids, caches)

    def logits(self, hidden: Tensor) -> Tensor:
        """[..., H] -> vocabulary logits [..., V]."""
        return F.linear(hidden, self.transformer.wte.weight)

    def new_caches(self) -> list[LayerCache]:
        """Empty key/value caches, one per layer, for incremental decoding."""
        return [LayerCache() for _ in range(self.config.n_layer)]
