"""Longformer: RoBERTa with sliding-window and global attention, for long documents.

Beltagy et al. 2020, "Longformer: The Long-Document Transformer". §3.1: every layer's
self-attention is a sliding window of w tokens (``attention_window``, per layer; w/2 on either
side) plus global attention on chosen tokens (the [CLS]/<s> token for classification, the
question for QA, §6), and the global attention has its own query/key/value projections
(Q_g, K_g, V_g) initialised from the local ones. The model pads inputs to a multiple of the
largest window (as the released ``LongformerModel`` does) and cuts the padding off its output.
§5: the released checkpoints start from RoBERTa (same embeddings with positions past the padding
index, same layers), with positions copied to 4,096. The attention itself is the shared
``sliding_window_attention``; this file holds the global projections and the wiring. Asked for
its probabilities or given a head mask (a ``HeadProbe``), a layer computes the same attention
densely instead: [T, T] probabilities, zero outside each query's window and global keys.
"""

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from lit_models.nets.attention import (
    HeadProbe,
    attentions_of,
    eager_attention,
    head_probes,
    split_heads,
)
from lit_models.nets.blocks import TransformerLayer
from lit_models.nets.masked_lm import EncoderForMaskedLM
from lit_models.nets.outputs import EncoderOutput
from lit_models.nets.pruning import head_index, kept_heads, prune_linear
from lit_models.nets.roberta import RobertaConfig, RobertaModel
from lit_models.nets.sliding_attention import sliding_window_attention


@dataclass
class LongformerConfig(RobertaConfig):
    """Defaults are longformer-base-4096 (§5: RoBERTa-base sizes, w = 512 in every layer)."""

    max_position_embeddings: int = 4098  # 4,096 positions past pad_token_id + 1
    attention_window: list[int] | int = field(default_factory=lambda: [512] * 12)

    def __post_init__(self) -> None:
        if not isinstance(self.attention_window, int):  # a plain list (not a config's ListConfig)
            self.attention_window = [int(w) for w in self.attention_window]

    def windows(self) -> list[int]:
        """The window of each layer (a single int is every layer's)."""
        windows = self.attention_window
        if isinstance(windows, int):
            windows = [windows] * self.num_hidden_layers
        if len(windows) != self.num_hidden_layers or any(w <= 0 or w % 2 for w in windows):
            raise ValueError(
                f"attention_window {self.attention_window} must be one positive even window, or "
                f"one per layer ({self.num_hidden_layers}); fix the model config"
            )
        return list(windows)


@dataclass
class AttentionPattern:
    """Which keys a layer may attend: padding [B, T] and the global tokens' positions [B, G]
    (``valid`` False on the slots of rows with fewer global tokens)."""

    padding: Tensor
    global_index: Tensor | None
    global_valid: Tensor | None

    @classmethod
    def of(cls, attention_mask: Tensor, global_attention_mask: Tensor | None) -> "AttentionPattern":
        padding = attention_mask == 0
        if global_attention_mask is None:
            return cls(padding, None, None)
        is_global = global_attention_mask.bool() & ~padding
        count = int(is_global.sum(1).max())
        if count == 0:
            return cls(padding, None, None)
        # the global positions first, in order (a stable sort of "not global")
        index = (~is_global).to(torch.int8).argsort(dim=1, stable=True)[:, :count]
        return cls(padding, index, is_global.gather(1, index))


class LongformerSelfAttention(nn.Module):
    """Local attention (fused ``qkv``) over a sliding window of ``window`` tokens and to the
    global tokens; global tokens attend to every token through ``global_qkv`` (§3.1)."""

    def __init__(self, hidden_size: int, num_heads: int, window: int, dropout: float) -> None:
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_attention_heads "
                             f"{num_heads}; pick a head count that divides the hidden size")
        self.num_heads, self.window, self.dropout = num_heads, window, dropout
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.global_qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.out = nn.Linear(hidden_size, hidden_size)

    def forward(self, x: Tensor, pattern: AttentionPattern, bias=None, causal=False,
                cache=None, unpadding=None, probe: HeadProbe | None = None) -> Tensor:
        """``x`` [B, T, H] -> [B, T, H] (the signature of the layers' self-attention)."""
        if bias is not None or causal or cache is not None or unpadding is not None:
            raise ValueError("Longformer attention takes no bias, causal mask, cache or "
                             "unpadding")
        B, T, _ = x.shape
        if self.num_heads == 0:  # every head pruned: the output bias alone
            if probe is not None and probe.keep:
                probe.weights = x.new_zeros(B, 0, T, T)
            return self.out(x.new_zeros(B, T, 0))
        dropout = self.dropout if self.training else 0.0
        q, k, v = split_heads(self.qkv(x), 3, self.num_heads)
        if probe is not None:
            y = self.dense(x, q, k, v, pattern, probe, dropout)
        else:
            y = sliding_window_attention(q, k, v, self.window // 2, pattern.padding,
                                         pattern.global_index, pattern.global_valid, dropout)
        if pattern.global_index is not None and probe is None:
            qg, kg, vg = split_heads(self.global_qkv(x), 3, self.num_heads)
            G = pattern.global_index.shape[1]
            at = pattern.global_index[:, None, :, None].expand(B, self.num_heads, G, y.shape[-1])
            keys = ~pattern.padding[:, None, None, :]
            y_global = nn.functional.scaled_dot_product_attention(
                qg.gather(2, at), kg, vg, attn_mask=keys, dropout_p=dropout)
            # rows of missing global slots point at position 0: keep that row's local output
            keep = pattern.global_valid[:, None, :, None]
            y_global = torch.where(keep, y_global, y.gather(2, at))
            y = y.scatter(2, at, y_global)
        y = y.masked_fill(pattern.padding[:, None, :, None], 0.0)  # padding attends to nothing
        return self.out(y.transpose(1, 2).reshape(B, T, -1))

    def dense(self, x: Tensor, q: Tensor, k: Tensor, v: Tensor, pattern: AttentionPattern,
              probe: HeadProbe, dropout: float) -> Tensor:
        """The attention ``forward`` computes, with dense [B, heads, T, T] probabilities for
        ``probe``: a local query sees the non-global keys of its window and every global key
        (themselves if nothing else, as ``sliding_window_attention``), a global query every
        non-pad key through ``global_qkv``; padding queries' rows are zero."""
        T = q.shape[-2]
        is_global = torch.zeros_like(pattern.padding)
        if pattern.global_index is not None:
            is_global.scatter_(1, pattern.global_index, pattern.global_valid)
        position = torch.arange(T, device=q.device)
        band = (position[:, None] - position[None, :]).abs() <= self.window // 2
        local = (band & ~(pattern.padding | is_global)[:, None, :]) | is_global[:, None, :]
        local = local | (~local.any(-1, keepdim=True) & torch.eye(T, dtype=torch.bool,
                                                                  device=q.device))
        y = eager_attention(q, k, v, local[:, None], None, None, dropout, probe)
        if pattern.global_index is not None:
            qg, kg, vg = split_heads(self.global_qkv(x), 3, self.num_heads)
            global_probe = HeadProbe(probe.mask, probe.keep)
            y_global = eager_attention(qg, kg, vg, ~pattern.padding[:, None, None, :], None,
                                       None, dropout, global_probe)
            rows = is_global[:, None, :, None]
            y = torch.where(rows, y_global, y)
            if probe.keep:
                probe.weights = torch.where(rows, global_probe.weights, probe.weights)
        if probe.keep:
            probe.weights = probe.weights.masked_fill(pattern.padding[:, None, :, None], 0.0)
        return y

    def prune_heads(self, heads) -> None:
        """Remove ``heads`` (positions among the current ones) from the local and the global
        projections and from W^O."""
        keep = kept_heads(self.num_heads, heads)
        head_dim = self.out.in_features // self.num_heads
        rows = head_index(keep, head_dim, 3, self.out.in_features)
        self.qkv = prune_linear(self.qkv, rows, 0)
        self.global_qkv = prune_linear(self.global_qkv, rows, 0)
        self.out = prune_linear(self.out, head_index(keep, head_dim), 1)
        self.num_heads = len(keep)


class LongformerModel(RobertaModel):
    """RoBERTa's embeddings and layers with Longformer's attention in every layer."""

    def build_layers(self, config: LongformerConfig) -> list[TransformerLayer]:
        layers = super().build_layers(config)
        for layer, window in zip(layers, config.windows(), strict=True):
            layer.attention = LongformerSelfAttention(
                config.hidden_size, config.num_attention_heads, window,
                config.attention_probs_dropout_prob)
        return layers

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        global_attention_mask: Tensor | None = None,
        output_hidden_states: bool = False,
        position_ids: Tensor | None = None,
        output_attentions: bool = False,
        head_mask: Tensor | None = None,
    ) -> EncoderOutput:
        """``global_attention_mask`` [B, T]: 1 on the tokens with global attention. Packed rows
        (a [B, T, T] mask, ``position_ids``) are refused: the sliding windows cross examples.
        ``output_attentions`` gives dense [B, heads, T, T] probabilities (transformers gives the
        window band and the global rows apart)."""
        if position_ids is not None or (attention_mask is not None and attention_mask.ndim == 3):
            raise ValueError("Longformer's sliding-window attention reads rows whole, not "
                             "packed examples; pretrain it with task.packing.cross_documents=true")
        T = input_ids.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        pad = -T % max(self.config.windows())
        if pad:  # a whole number of windows, padded as the reference does
            def padded(x: Tensor | None, value: int) -> Tensor | None:
                return None if x is None else nn.functional.pad(x, (0, pad), value=value)

            input_ids = padded(input_ids, self.config.pad_token_id)
            attention_mask, token_type_ids = padded(attention_mask, 0), padded(token_type_ids, 0)
            global_attention_mask = padded(global_attention_mask, 0)
        pattern = AttentionPattern.of(attention_mask, global_attention_mask)
        x = self.embeddings(input_ids, token_type_ids)
        probes = head_probes(head_mask, output_attentions, len(self.encoder.layers))
        x, hidden_states = self.encoder(x, pattern, output_hidden_states, probes=probes)
        x = x[:, :T]
        if hidden_states is not None:
            hidden_states = tuple(h[:, :T] for h in hidden_states)
        attentions = attentions_of(probes)
        if attentions is not None:
            attentions = tuple(a[..., :T, :T] for a in attentions)
        pooled = None if self.pooler is None else torch.tanh(self.pooler(x[:, 0]))
        return EncoderOutput(x, pooled, hidden_states, attentions)


class LongformerForMaskedLM(EncoderForMaskedLM):
    """Longformer with RoBERTa's masked-LM head (§5: pretraining continues RoBERTa's MLM);
    ``forward`` also takes the encoder's ``global_attention_mask``."""

    def __init__(self, config: LongformerConfig):
        super().__init__(config, LongformerModel(config, add_pooling_layer=False), "longformer",
                         "gelu")
