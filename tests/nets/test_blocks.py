"""Shared attention and layer blocks: every attention variant against a hand-written per-head
softmax(Q K^T * scale + bias + mask) V (float32, odd head counts and lengths), KV-cache decoding
against one full causal pass, norm/bias options, decoder layers, and a T5 block of transformers."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import vector_to_parameters

from lit_models.nets import attention as attention_module
from lit_models.nets.attention import (
    KVCache,
    LayerCache,
    MultiHeadCrossAttention,
    MultiHeadSelfAttention,
)
from lit_models.nets.blocks import (
    FeedForward,
    TransformerEncoder,
    TransformerLayer,
    init_normal_,
    make_norm,
    padding_mask,
)
from tests.conftest import require

TOLERANCE = 1e-6
B, H, HEADS = 2, 15, 3  # head size 5
LENGTHS = (9, 6)  # the second row is padded


def lengths_mask(lengths: tuple[int, ...], T: int) -> Tensor:
    """[B, T] 1 = token, 0 = pad."""
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()


def reference(q, k, v, num_heads, out, scale=None, bias=None, mask=None) -> Tensor:
    """Per head: softmax(q k^T * scale + bias, -inf where ``mask`` is False) v (Vaswani et al.
    Eq. 1), heads concatenated, then ``out``. q [B, Tq, inner], k/v [B, Tk, inner], bias
    [1 or B, heads, Tq, Tk], mask boolean [1 or B, Tq, Tk]."""
    d = q.shape[-1] // num_heads
    scale = 1 / math.sqrt(d) if scale is None else scale
    heads = []
    for h in range(num_heads):
        qh, kh, vh = (t[..., h * d : (h + 1) * d] for t in (q, k, v))
        scores = qh @ kh.transpose(1, 2) * scale
        if bias is not None:
            scores = scores + bias[:, h]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        heads.append(scores.softmax(-1) @ vh)
    return out(torch.cat(heads, dim=-1))


def self_reference(attention: MultiHeadSelfAttention, x: Tensor, **kwargs) -> Tensor:
    q, k, v = attention.qkv(x).split(attention.inner_size, dim=-1)
    return reference(q, k, v, attention.num_heads, attention.out, attention.scale, **kwargs)


def max_diff(a: Tensor, b: Tensor) -> float:
    return (a - b).abs().max().item()


@pytest.mark.parametrize("bias_batch", [1, B])  # one bias for the batch (T5) or one per row
def test_bias_and_padding_equal_reference(bias_batch: int):
    torch.manual_seed(0)
    T = max(LENGTHS)
    attention = MultiHeadSelfAttention(H, HEADS).eval()
    x, bias = torch.randn(B, T, H), torch.randn(bias_batch, HEADS, T, T)
    keys = lengths_mask(LENGTHS, T).bool()[:, None, :]  # [B, 1, Tk]
    with torch.no_grad():
        ours = attention(x, padding_mask(lengths_mask(LENGTHS, T)), bias)
        expected = self_reference(attention, x, bias=bias, mask=keys)
        assert max_diff(ours, expected) <= TOLERANCE
        # the bias matters: without it the output differs
        assert max_diff(attention(x, padding_mask(lengths_mask(LENGTHS, T))), expected) > 1e-3


@pytest.mark.parametrize("padded", [False, True])
def test_causal_equals_reference_with_lower_triangular_mask(padded: bool):
    torch.manual_seed(0)
    T = max(LENGTHS)
    attention = MultiHeadSelfAttention(H, HEADS).eval()
    x = torch.randn(B, T, H)
    triangle = torch.ones(T, T, dtype=torch.bool).tril()[None]
    lengths = LENGTHS if padded else (T, T)
    keys = lengths_mask(lengths, T).bool()[:, None, :]
    with torch.no_grad():
        ours = attention(x, padding_mask(lengths_mask(lengths, T)), causal=True)
        expected = self_reference(attention, x, mask=keys & triangle)
    assert max_diff(ours, expected) <= TOLERANCE


def test_causal_with_bias_equals_reference():
    torch.manual_seed(0)
    T = 7
    attention = MultiHeadSelfAttention(H, HEADS, scale=1.0).eval()
    x, bias = torch.randn(B, T, H), torch.randn(1, HEADS, T, T)
    triangle = torch.ones(T, T, dtype=torch.bool).tril()[None]
    with torch.no_grad():
        ours = attention(x, bias=bias, causal=True)
        expected = self_reference(attention, x, bias=bias, mask=triangle)
    assert max_diff(ours, expected) <= TOLERANCE


def test_sdpa_gets_no_mask_when_there_is_nothing_to_mask(monkeypatch):
    """Flash kernels need attn_mask=None: causal alone goes as is_causal=True, and a batch
    without padding (BERT), which the collate gives no attention_mask, passes no mask at all."""
    calls, sdpa = [], F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", spy)
    attention = MultiHeadSelfAttention(H, HEADS).eval()
    x = torch.randn(B, 5, H)
    attention(x, padding_mask(None), causal=True)
    attention(x, padding_mask(None))
    assert [(c["attn_mask"], c["is_causal"]) for c in calls] == [(None, True), (None, False)]


def test_cross_attention_equals_reference():
    torch.manual_seed(0)
    Tq, S = 5, max(LENGTHS)
    attention = MultiHeadCrossAttention(H, HEADS).eval()
    x, memory = torch.randn(B, Tq, H), torch.randn(B, S, H)
    keys = lengths_mask(LENGTHS, S).bool()[:, None, :]
    q = attention.q(x)
    k, v = attention.kv(memory).split(attention.inner_size, dim=-1)
    with torch.no_grad():
        ours = attention(x, memory, padding_mask(lengths_mask(LENGTHS, S)))
        expected = reference(q, k, v, HEADS, attention.out, mask=keys)
    assert ours.shape == (B, Tq, H)
    assert max_diff(ours, expected) <= TOLERANCE


def test_scale_one_and_separate_head_dim_equal_reference():
    """T5: no 1/sqrt(d) scaling, and heads * head_dim (3 * 4) differs from the hidden size."""
    torch.manual_seed(0)
    T, hidden = 7, 10
    attention = MultiHeadSelfAttention(hidden, HEADS, head_dim=4, scale=1.0, bias=False).eval()
    assert attention.qkv.weight.shape == (3 * 12, hidden)
    assert attention.out.weight.shape == (hidden, 12)
    x, bias = torch.randn(B, T, hidden), torch.randn(1, HEADS, T, T)
    with torch.no_grad():
        ours = attention(x, bias=bias)
        assert max_diff(ours, self_reference(attention, x, bias=bias)) <= TOLERANCE
        q, k, v = attention.qkv(x).split(12, dim=-1)
        scaled = reference(q, k, v, HEADS, attention.out, scale=0.5, bias=bias)
        assert max_diff(ours, scaled) > 1e-3  # the scale is not ignored


def decoder(num_layers: int = 2, **kwargs) -> TransformerEncoder:
    layers = [
        TransformerLayer(H, HEADS, 22, pre_norm=True, cross_attention=True, **kwargs)
        for _ in range(num_layers)
    ]
    return TransformerEncoder(layers, nn.LayerNorm(H)).eval()


@pytest.mark.parametrize("chunks", [(1,) * 9, (3, 1, 5), (4, 4, 1)])
def test_kv_cache_decoding_equals_one_causal_pass(chunks: tuple[int, ...]):
    """Decoding in chunks with a cache (self-attention appending, cross-attention computed
    from memory once, then memory=None) equals one full causal pass, with a relative-position
    bias sliced per step (T5) and a padded encoder memory."""
    torch.manual_seed(0)
    net, T, S = decoder(), sum(chunks), max(LENGTHS)
    x, memory, bias = torch.randn(B, T, H), torch.randn(B, S, H), torch.randn(1, HEADS, T, T)
    memory_mask = padding_mask(lengths_mask(LENGTHS, S))
    kv_calls = []
    for layer in net.layers:
        layer.cross_attention.kv.register_forward_hook(lambda *_: kv_calls.append(1))
    with torch.no_grad():
        full, _ = net(x, bias=bias, causal=True, memory=memory, memory_mask=memory_mask)
        kv_calls.clear()
        caches = [LayerCache() for _ in net.layers]
        steps, past = [], 0
        for t in chunks:
            step, _ = net(
                x[:, past : past + t],
                bias=bias[:, :, past : past + t, : past + t],
                causal=True,
                memory=memory if past == 0 else None,
                memory_mask=memory_mask,
                caches=caches,
            )
            steps.append(step)
            past += t
    assert max_diff(torch.cat(steps, dim=1), full) <= TOLERANCE
    assert len(kv_calls) == len(net.layers)  # encoder keys/values computed once per layer
    assert all(c.self_attention.length == T and c.cross_attention.length == S for c in caches)


def test_cross_attention_cache_equals_recomputing():
    torch.manual_seed(0)
    attention = MultiHeadCrossAttention(H, HEADS).eval()
    memory, cache = torch.randn(B, 6, H), KVCache()
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(B, 2, H)
            cached = attention(x, memory if cache.k is None else None, cache=cache)
            assert max_diff(cached, attention(x, memory)) <= TOLERANCE
    assert cache.length == 6


def test_rmsnorm_and_bias_free_layer_parameters():
    """T5 layer: no bias anywhere, scale-only norms, inner size heads * head_dim = 18 != 16."""
    hidden, inner, ffn = 16, 3 * 6, 24
    layer = TransformerLayer(
        hidden, 3, ffn, pre_norm=True, cross_attention=True, head_dim=6, norm="rmsnorm",
        bias=False, gated=True,
    )
    names = [name for name, _ in layer.named_parameters()]
    assert not [name for name in names if name.endswith("bias")]
    norms = [m for m in layer.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm))]
    assert len(norms) == 3 and all(isinstance(m, nn.RMSNorm) for m in norms)
    attention = hidden * 3 * inner + inner * hidden
    cross = hidden * inner + hidden * 2 * inner + inner * hidden
    gated_ffn = hidden * 2 * ffn + ffn * hidden
    assert sum(p.numel() for p in layer.parameters()) == attention + cross + gated_ffn + 3 * hidden

    bert = TransformerLayer(hidden, 4, ffn)  # biases and LayerNorm, no cross-attention
    bert_count = (4 * hidden * hidden + 4 * hidden) + (2 * hidden * ffn + ffn + hidden) + 4 * hidden
    assert sum(p.numel() for p in bert.parameters()) == bert_count
    assert bert.cross_attention is None and bert.cross_attention_norm is None
    assert make_norm("layernorm", hidden, 1e-6, bias=False).bias is None


def test_init_sets_rmsnorm_to_one():
    norm = make_norm("rmsnorm", 8, 1e-6)
    nn.init.normal_(norm.weight)
    init_normal_(norm, 0.02)
    assert torch.equal(norm.weight, torch.ones(8))


def test_gated_feed_forward_equals_formula():
    """(act(x W_0) * x W_1) W_2 with [W_0; W_1] fused in linear1."""
    torch.manual_seed(0)
    ffn = FeedForward(H, 11, "gelu_new", gated=True, bias=False)
    x = torch.randn(B, 4, H)
    w0, w1 = ffn.linear1.weight.split(11)
    expected = (F.gelu(x @ w0.T, approximate="tanh") * (x @ w1.T)) @ ffn.linear2.weight.T
    with torch.no_grad():
        assert max_diff(ffn(x), expected) <= TOLERANCE


def test_decoder_layer_trains_and_reads_memory():
    torch.manual_seed(0)
    layer = TransformerLayer(H, HEADS, 22, pre_norm=True, cross_attention=True)
    x, memory = torch.randn(B, 5, H), torch.randn(B, 8, H, requires_grad=True)
    memory_mask = padding_mask(lengths_mask((8, 3), 8))
    out = layer(x, causal=True, memory=memory, memory_mask=memory_mask)
    out.square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())
    assert memory.grad[0].abs().sum() > 0
    assert memory.grad[1, 3:].abs().sum() == 0  # padded memory positions are not read
    layer.eval()
    with torch.no_grad():
        same = layer(x, causal=True, memory=memory, memory_mask=memory_mask)
        other = layer(x, causal=True, memory=torch.randn(B, 8, H), memory_mask=memory_mask)
    assert max_diff(same, other) > 1e-3


def test_misuse_raises_value_error():
    layer = TransformerLayer(H, HEADS, 22, cross_attention=True)
    with pytest.raises(ValueError, match="memory or a filled KVCache"):
        layer(torch.randn(1, 3, H))
    with pytest.raises(ValueError, match="without cross-attention"):
        TransformerLayer(H, HEADS, 22)(torch.randn(1, 3, H), memory=torch.randn(1, 2, H))
    with pytest.raises(ValueError, match="unknown norm 'batchnorm'"):
        TransformerLayer(H, HEADS, 22, norm="batchnorm")
    with pytest.raises(ValueError, match="1 caches for 2 layers"):
        decoder()(torch.randn(1, 3, H), memory=torch.randn(1, 2, H), caches=[LayerCache()])


# ---- one T5 block of transformers, as a T5 layer of ours --------------------------------------


def t5_state(block: nn.Module) -> dict[str, Tensor]:
    """transformers' T5Block weights under our TransformerLayer names."""
    w = block.state_dict()
    attn, ffn = "layer.0.SelfAttention.", f"layer.{len(block.layer) - 1}."
    state = {
        "attention.qkv.weight": torch.cat([w[attn + n + ".weight"] for n in "qkv"]),
        "attention.out.weight": w[attn + "o.weight"],
        "attention_norm.weight": w["layer.0.layer_norm.weight"],
        "ffn_norm.weight": w[ffn + "layer_norm.weight"],
        "feed_forward.linear2.weight": w[ffn + "DenseReluDense.wo.weight"],
    }
    wi = [k for k in ("wi", "wi_0", "wi_1") if f"{ffn}DenseReluDense.{k}.weight" in w]
    state["feed_forward.linear1.weight"] = torch.cat(
        [w[f"{ffn}DenseReluDense.{k}.weight"] for k in wi]
    )
    if len(block.layer) == 3:
        cross = "layer.1.EncDecAttention."
        state |= {
            "cross_attention.q.weight": w[cross + "q.weight"],
            "cross_attention.kv.weight": torch.cat([w[cross + "k.weight"], w[cross + "v.weight"]]),
            "cross_attention.out.weight": w[cross + "o.weight"],
            "cross_attention_norm.weight": w["layer.1.layer_norm.weight"],
        }
    return state


@pytest.mark.parametrize("decoder_block", [False, True])
def test_t5_block_matches_transformers(decoder_block: bool):
    """Encoder block (ReLU FFN) and decoder block (gated-GELU, causal, cross-attention over a
    padded memory) of T5 with d_kv * heads != d_model, given the same relative position bias."""
    transformers = require("transformers")
    torch.manual_seed(0)
    d_model, heads, d_kv, T, S = 10, 3, 4, 7, max(LENGTHS)
    config = transformers.T5Config(
        d_model=d_model, d_kv=d_kv, num_heads=heads, d_ff=14, dropout_rate=0.0,
        feed_forward_proj="gated-gelu" if decoder_block else "relu", is_decoder=decoder_block,
        attn_implementation="eager",
    )
    theirs = transformers.models.t5.modeling_t5.T5Block(config).eval()
    n = sum(p.numel() for p in theirs.parameters())
    vector_to_parameters(0.3 * torch.randn(n), theirs.parameters())
    ours = TransformerLayer(
        d_model, heads, 14, config.dense_act_fn, 0.0, 0.0, config.layer_norm_epsilon,
        pre_norm=True, cross_attention=decoder_block, head_dim=d_kv, scale=1.0, norm="rmsnorm",
        bias=False, gated=decoder_block,
    ).eval()
    ours.load_state_dict(t5_state(theirs))

    x, memory = torch.randn(B, T, d_model), torch.randn(B, S, d_model)
    bias = torch.randn(1, heads, T, T)
    memory_keys = lengths_mask(LENGTHS, S)
    additive = torch.zeros(B, 1, 1, S).masked_fill(memory_keys[:, None, None, :] == 0, -1e9)
    causal = torch.zeros(1, 1, T, T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -1e9)
    with torch.no_grad():
        if decoder_block:
            expected = theirs(x, attention_mask=causal, position_bias=bias,
                              encoder_hidden_states=memory, encoder_attention_mask=additive)[0]
            out = ours(x, bias=bias, causal=True, memory=memory,
                       memory_mask=padding_mask(memory_keys))
        else:
            keys = lengths_mask(LENGTHS, T)
            additive_self = torch.zeros(B, 1, 1, T).masked_fill(keys[:, None, None, :] == 0, -1e9)
            expected = theirs(x, attention_mask=additive_self, position_bias=bias)[0]
            out = ours(x, padding_mask(keys), bias=bias)
    assert out.std() > 0.1
    assert max_diff(out, expected) <= 1e-5


def test_float32_bias_in_bfloat16_attention():
    """A bias computed in float32 (T5's bias embedding outside autocast) works with bf16 inputs."""
    torch.manual_seed(0)
    attention = MultiHeadSelfAttention(H, HEADS).eval()
    x, bias = torch.randn(B, 6, H), torch.randn(1, HEADS, 6, 6)
    with torch.no_grad():
        expected = attention(x, bias=bias, causal=True)
        low = attention.to(torch.bfloat16)(x.bfloat16(), bias=bias, causal=True)
    assert low.dtype == torch.bfloat16
    assert max_diff(low.float(), expected) < 0.1
