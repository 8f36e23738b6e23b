"""The feed-forward's inner dropout (BART's activation_dropout, T5's and XLNet's feed-forward
dropout): it zeroes inner activations in training and is the identity in evaluation, and each
encoder-decoder and XLNet layer takes its rate from the net's config. Parity in eval mode:
``tests/nets/test_parity.py``."""

import pytest
import torch

from lit_models.archs import get_arch
from lit_models.nets.blocks import FeedForward

#: one-layer sizes of each net
SMALL = {
    "bart": dict(vocab_size=50, max_position_embeddings=32, d_model=16, encoder_layers=1,
                 decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                 encoder_ffn_dim=32, decoder_ffn_dim=32),
    "t5": dict(vocab_size=50, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2),
    "xlnet": dict(vocab_size=50, d_model=16, n_layer=1, n_head=2, d_inner=32),
}


def test_inner_dropout_acts_before_the_output_projection():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    ffn = FeedForward(8, 16, "gelu", dropout=1.0)
    # every inner activation dropped: the output is the output projection's bias alone
    assert torch.equal(ffn.train()(x), ffn.linear2.bias.expand(2, 5, 8))
    eval_out = ffn.eval()(x)
    assert torch.equal(eval_out, ffn.linear2(ffn.act(ffn.linear1(x))))
    assert isinstance(FeedForward(8, 16).dropout, torch.nn.Identity)  # BERT's: none


@pytest.mark.parametrize(("arch", "field", "rate"), [
    ("bart", "activation_dropout", 0.25), ("t5", "dropout_rate", 0.3), ("xlnet", "dropout", 0.2)])
def test_every_layer_takes_its_rate_from_the_config(arch, field, rate):
    spec = get_arch(arch)
    config = spec.config(**{field: rate, **SMALL[arch]})
    net = spec.encoder(config)
    rates = {m.dropout.p for m in net.modules() if isinstance(m, FeedForward)}
    assert rates == {rate}
