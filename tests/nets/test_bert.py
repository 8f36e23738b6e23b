"""BERT net: the behaviour of the shared blocks (padding, attention, LayerNorm placement, hidden
states, tied decoder, dropout, initialisation, errors, unpadding); parity with transformers
(encoder, pooler, hidden states under eager and SDPA attention, masked-LM and next-sentence
heads): ``tests/nets/test_parity.py``."""

import math

import pytest
import torch

from datamodules.collate import pad_collate
from lit_models.nets.attention import Unpadding
from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel
from lit_models.nets.blocks import MultiHeadSelfAttention, padding_mask
from tests.nets.parity import randomize_

TOLERANCE = 1e-5
#: two shapes that differ in everything a mapping or reshape bug would show up in
CONFIGS = {
    "gelu-4heads": dict(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        hidden_act="gelu",
    ),
    "gelu_new-3heads": dict(
        vocab_size=120,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=128,
        hidden_act="gelu_new",
        type_vocab_size=3,
        max_position_embeddings=24,
        layer_norm_eps=1e-7,
        pad_token_id=1,
    ),
}
LENGTHS = (11, 4, 7, 1)  # mixed lengths: every row but the first is padded


def padded_batch(config: BertConfig) -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    T = max(LENGTHS)
    mask = (torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]).long()
    ids = torch.randint(2, config.vocab_size, (len(LENGTHS), T)).masked_fill(
        mask == 0, config.pad_token_id
    )
    segments = torch.randint(0, config.type_vocab_size, (len(LENGTHS), T)) * mask
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": segments}


def max_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    if mask is not None:
        a, b = a[mask.bool()], b[mask.bool()]
    return (a - b).abs().max().item()


def test_padding_does_not_change_token_states():
    """Each sequence alone (no padding, no mask) gives the same states as inside the batch."""
    torch.manual_seed(0)
    net = BertModel(BertConfig(**CONFIGS["gelu-4heads"])).eval()
    batch = padded_batch(net.config)
    with torch.no_grad():
        padded = net(**batch).last_hidden_state
        for row, n in enumerate(LENGTHS):
            alone = net(
                batch["input_ids"][row : row + 1, :n],
                token_type_ids=batch["token_type_ids"][row : row + 1, :n],
            )
            assert max_diff(alone.last_hidden_state[0], padded[row, :n]) <= TOLERANCE


def test_attention_equals_explicit_scaled_dot_product():
    """softmax(Q K^T / sqrt(d_k) + mask) V per head (Vaswani et al. Eq. 1), computed by hand."""
    torch.manual_seed(0)
    B, T, H, heads = 2, 5, 12, 3
    attention = MultiHeadSelfAttention(H, heads).eval()
    x = torch.randn(B, T, H)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    q, k, v = attention.qkv(x).split(H, dim=-1)
    d = H // heads
    heads_out = []
    for h in range(heads):
        qh, kh, vh = (t[..., h * d : (h + 1) * d] for t in (q, k, v))
        scores = qh @ kh.transpose(1, 2) / math.sqrt(d)
        scores = scores.masked_fill(mask[:, None, :] == 0, float("-inf"))
        heads_out.append(scores.softmax(-1) @ vh)
    expected = attention.out(torch.cat(heads_out, dim=-1))
    with torch.no_grad():
        assert max_diff(attention(x, padding_mask(mask)), expected) <= 1e-6


def test_pre_norm_runs_and_differs():
    torch.manual_seed(0)
    # with BERT's small init each sublayer barely moves the residual stream and the two orders
    # nearly coincide; large random weights make the placement of LayerNorm matter
    post = randomize_(BertModel(BertConfig(**CONFIGS["gelu-4heads"])).eval())
    pre = BertModel(BertConfig(**CONFIGS["gelu-4heads"], pre_norm=True)).eval()
    missing, unexpected = pre.load_state_dict(post.state_dict(), strict=False)
    assert missing == ["encoder.final_norm.weight", "encoder.final_norm.bias"] and not unexpected
    batch = padded_batch(post.config)
    out_pre = pre(**batch, output_hidden_states=True)
    (out_pre.last_hidden_state.sum() + out_pre.pooler_output.sum()).backward()
    assert len(out_pre.hidden_states) == post.config.num_hidden_layers + 1
    assert torch.isfinite(out_pre.last_hidden_state).all()
    assert all(p.grad is not None for p in pre.parameters())
    with torch.no_grad():
        assert max_diff(post(**batch).last_hidden_state, out_pre.last_hidden_state) > 0.1


def test_hidden_states_are_embeddings_then_each_layer():
    torch.manual_seed(0)
    net = BertModel(BertConfig(**{**CONFIGS["gelu_new-3heads"], "num_hidden_layers": 3})).eval()
    batch = padded_batch(net.config)
    with torch.no_grad():
        out = net(**batch, output_hidden_states=True)
        embedded = net.embeddings(batch["input_ids"], batch["token_type_ids"])
    assert len(out.hidden_states) == 4
    assert torch.equal(out.hidden_states[0], embedded)
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    assert net(batch["input_ids"]).hidden_states is None


def test_mlm_decoder_is_tied_to_token_embeddings():
    torch.manual_seed(0)
    net = BertForPreTraining(BertConfig(**CONFIGS["gelu-4heads"]))
    embeddings = net.bert.embeddings.word_embeddings.weight
    assert net.mlm_head.word_embeddings.weight is embeddings
    names = [name for name, _ in net.named_parameters()]
    assert "mlm_head.word_embeddings.weight" not in names  # one parameter, listed once
    hidden = torch.randn(3, net.config.hidden_size)
    net.mlm_head(hidden)[:, 7].sum().backward()  # the decoder row of token 7 gets a gradient
    assert embeddings.grad[7].abs().sum() > 0 and embeddings.grad[8].abs().sum() == 0


def test_dropout_only_in_training():
    torch.manual_seed(0)
    net = BertModel(BertConfig(**CONFIGS["gelu-4heads"]))
    batch = padded_batch(net.config)
    net.train()
    assert max_diff(net(**batch).last_hidden_state, net(**batch).last_hidden_state) > 1e-3
    net.eval()
    with torch.no_grad():
        assert torch.equal(net(**batch).last_hidden_state, net(**batch).last_hidden_state)


def test_initialisation_follows_bert():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        pad_token_id=3,
    )
    net = BertForPreTraining(config)
    word = net.bert.embeddings.word_embeddings.weight
    assert torch.equal(word[3], torch.zeros(64))
    for name, param in net.named_parameters():
        if name.endswith("bias"):
            assert torch.equal(param, torch.zeros_like(param)), name
        elif "norm" in name:
            assert torch.equal(param, torch.ones_like(param)), name
        else:
            assert abs(param.std().item() - 0.02) < 0.002, name


def test_bad_configs_and_inputs_raise_one_line_errors():
    with pytest.raises(ValueError, match="hidden_act 'swiglu'"):
        BertModel(BertConfig(**{**CONFIGS["gelu-4heads"], "hidden_act": "swiglu"}))
    with pytest.raises(ValueError, match="not divisible"):
        BertModel(BertConfig(**{**CONFIGS["gelu-4heads"], "num_attention_heads": 5}))
    net = BertModel(BertConfig(**CONFIGS["gelu_new-3heads"]))
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 24"):
        net(torch.ones(1, 25, dtype=torch.long))


def test_a_batch_without_padding_needs_no_mask():
    """The collate decides: a batch of equal lengths carries no mask (so SDPA may use its flash
    kernel and no forward asks the device), one with padding does; outputs without a mask equal
    those under an all-ones mask."""
    torch.manual_seed(0)
    assert "attention_mask" not in pad_collate([{"input_ids": [5, 6, 7]}] * 2, pad_id=0)
    padded = pad_collate([{"input_ids": [5, 6, 7]}, {"input_ids": [5]}], pad_id=0)
    assert padded["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert padding_mask(None) is None
    assert padding_mask(padded["attention_mask"]).shape == (2, 1, 1, 3)
    attention = MultiHeadSelfAttention(16, 4).eval()
    x = torch.randn(2, 7, 16)
    all_ones = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    with torch.no_grad():
        assert max_diff(attention(x, None), attention(x, all_ones)) <= 1e-6


def test_an_unpadded_encoder_equals_the_padded_one_at_every_real_token():
    """A padded batch on the CPU runs its position-wise layers on the real tokens only: same
    hidden states and parameter gradients as running every position, zeros at the padding."""
    torch.manual_seed(0)
    net = BertModel(BertConfig(**CONFIGS["gelu_new-3heads"])).eval()
    lengths = torch.tensor([9, 4, 7])
    mask = (torch.arange(9)[None] < lengths[:, None]).long()
    x = torch.randn(3, 9, net.config.hidden_size)
    unpadding = Unpadding.of(mask)
    assert len(unpadding.positions) == 20 and Unpadding.of(None) is None
    assert Unpadding.of(mask[:, :, None] * mask[:, None, :]) is None  # packed rows' masks
    outputs, grads = [], []
    for unpad in (None, unpadding):
        out, _ = net.encoder(x, padding_mask(mask), unpadding=unpad)
        out[mask.bool()].pow(2).sum().backward()
        outputs.append(out)
        grads.append([p.grad.clone() for p in net.encoder.parameters()])
        net.zero_grad()
    real = mask.bool()
    assert max_diff(outputs[0][real], outputs[1][real]) <= 1e-5
    assert outputs[1][~real].abs().max() == 0
    for padded, unpadded in zip(*grads, strict=True):
        assert (padded - unpadded).abs().max().item() <= 1e-4 * max(1.0, padded.abs().max())
