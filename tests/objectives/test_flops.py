"""The analytic FLOP counts of ``lit_models/objectives/flops.py`` against what PyTorch's
FlopCounterMode counts when it watches a real forward pass of our nets.

FlopCounterMode counts matrix multiplies (addmm/mm/bmm and the fused attention kernels it knows);
it has no formula for CPU's ``_scaled_dot_product_flash_attention_for_cpu``, so the forward runs
under SDPA's math backend, which it sees as two batched matmuls (Q K^T and the weighted sum over
V). Embedding lookups, LayerNorm, softmax and activations are counted by neither side.
"""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from lit_models.nets.bert import BertConfig, BertForPreTraining, BertModel
from lit_models.objectives.flops import (
    EncoderShape,
    encoder_forward_flops,
    mlm_head_forward_flops,
    mlm_training_flops,
)

CONFIG = BertConfig(
    vocab_size=120,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=80,  # not 4H, so a swapped H / I would show
    max_position_embeddings=64,
)


def counted(fn) -> int:
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize(("batch", "seq_len"), [(2, 16), (3, 48), (1, 7)])
def test_encoder_forward_flops_match_flop_counter(batch, seq_len):
    torch.manual_seed(0)
    net = BertModel(CONFIG, add_pooling_layer=False).eval()
    ids = torch.randint(5, CONFIG.vocab_size, (batch, seq_len))
    measured = counted(lambda: net(ids))
    predicted = encoder_forward_flops(EncoderShape.of(CONFIG), batch, seq_len)
    assert predicted == pytest.approx(measured, rel=0.05)


def test_encoder_forward_flops_include_attention():
    """At a long sequence the T^2 attention matmuls are a large share: leaving them out (or
    counting only one of the two) would miss the 5% tolerance."""
    torch.manual_seed(0)
    net = BertModel(CONFIG, add_pooling_layer=False).eval()
    batch, seq_len = 1, 64
    ids = torch.randint(5, CONFIG.vocab_size, (batch, seq_len))
    measured = counted(lambda: net(ids))
    h, i, n = CONFIG.hidden_size, CONFIG.intermediate_size, CONFIG.num_hidden_layers
    projections_only = batch * seq_len * n * 2 * (4 * h * h + 2 * h * i)
    assert measured > 1.2 * projections_only  # the attention matmuls really matter here
    predicted = encoder_forward_flops(EncoderShape.of(CONFIG), batch, seq_len)
    assert predicted == pytest.approx(measured, rel=0.05)


def test_encoder_forward_flops_with_pooler_within_five_percent():
    """The pooler (one H x H matmul per sequence) is outside the count, and small."""
    torch.manual_seed(0)
    net = BertModel(CONFIG).eval()
    ids = torch.randint(5, CONFIG.vocab_size, (4, 32))
    measured = counted(lambda: net(ids))
    predicted = encoder_forward_flops(EncoderShape.of(CONFIG), 4, 32)
    assert predicted == pytest.approx(measured, rel=0.05)


@pytest.mark.parametrize("rows", [1, 13, 40])
def test_mlm_head_flops_match_flop_counter(rows):
    torch.manual_seed(0)
    head = BertForPreTraining(CONFIG).eval().mlm_head
    hidden = torch.randn(rows, CONFIG.hidden_size)
    measured = counted(lambda: head(hidden))
    predicted = mlm_head_forward_flops(EncoderShape.of(CONFIG), rows)
    assert predicted == pytest.approx(measured, rel=0.05)


def test_mlm_training_flops_are_three_forwards():
    """Backward costs twice the forward; the head counts only at the predicted positions."""
    shape = EncoderShape.of(CONFIG)
    forward = encoder_forward_flops(shape, 2, 16) + mlm_head_forward_flops(shape, 5)
    assert mlm_training_flops(shape, 2, 16, 5) == pytest.approx(3 * forward)
    assert mlm_training_flops(shape, 2, 16, 6) > mlm_training_flops(shape, 2, 16, 5)


def test_training_step_flops_match_flop_counter():
    """Forward + backward of encoder and head (at the masked rows) against FlopCounterMode.

    Every matmul's backward is two matmuls of its size (input and weight gradients; the first
    layer's input gradient flows on to the trainable embeddings), so the 3x rule holds."""
    torch.manual_seed(0)
    net = BertForPreTraining(CONFIG).train()
    batch, seq_len, masked = 2, 24, 9
    ids = torch.randint(5, CONFIG.vocab_size, (batch, seq_len))
    rows = torch.zeros(batch * seq_len, dtype=torch.bool)
    rows[torch.randperm(batch * seq_len)[:masked]] = True

    def step() -> None:
        hidden = net.bert.encoder(net.bert.embeddings(ids))[0]
        net.mlm_head(hidden.reshape(-1, CONFIG.hidden_size)[rows]).sum().backward()

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        step()
    predicted = mlm_training_flops(EncoderShape.of(CONFIG), batch, seq_len, masked)
    assert predicted == pytest.approx(counter.get_total_flops(), rel=0.05)
