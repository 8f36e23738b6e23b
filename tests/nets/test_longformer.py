"""Longformer against transformers: random ``LongformerModel`` / ``LongformerForMaskedLM``
checkpoints imported with ``from_hf`` give the same outputs to 1e-5 in float32 on padded batches
(lengths that are no multiple of the window, with and without global attention); the blocked
sliding window equals dense attention under the band mask (exports and the other contracts:
``tests/contracts``)."""

import pytest
import torch
import torch.nn.functional as F

from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.longformer import LongformerForMaskedLM, LongformerModel
from lit_models.nets.sliding_attention import sliding_window_attention
from tests.conftest import require
from tests.nets.parity import TEXT, batch, randomize_

transformers = require("transformers")

TOLERANCE = 1e-5
#: sizes no other test uses: per-layer windows of different sizes, odd widths, tanh GELU
CONFIGS = [
    dict(hidden_size=36, num_hidden_layers=3, num_attention_heads=3, intermediate_size=50,
         hidden_act="gelu_new", max_position_embeddings=90, attention_window=[4, 8, 4]),
    dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
         hidden_act="gelu", max_position_embeddings=70, attention_window=10),
]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(get_arch("longformer").tokenizer, TEXT, vocab_size=300,
                           lowercase=False)


def checkpoint(cls_name: str, sizes: dict, tokenizer: TextTokenizer, directory) -> torch.nn.Module:
    config = transformers.LongformerConfig(vocab_size=tokenizer.vocab_size,
                                           pad_token_id=tokenizer.special.pad, type_vocab_size=1,
                                           layer_norm_eps=1e-5, **sizes)
    model = randomize_(getattr(transformers, cls_name)(config))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory, sizes["max_position_embeddings"] - 2)
    return model


def global_mask(inputs: dict, positions: list[list[int]]) -> torch.Tensor:
    mask = torch.zeros_like(inputs["input_ids"])
    for row, where in enumerate(positions):
        mask[row, where] = 1
    return mask


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_longformer_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("LongformerModel", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path)
    assert isinstance(net, LongformerModel)
    inputs = batch(tokenizer, TEXT[:4])
    assert (inputs["attention_mask"] == 0).any(), "the batch must be padded"
    # <s> global in every row, a question-like prefix in one, none in the last
    for glob in (None, global_mask(inputs, [[0], [0, 1, 2, 3], [0, 5], []])):
        with torch.no_grad():
            ours = net.eval()(**inputs, global_attention_mask=glob)
            theirs = reference(**inputs, global_attention_mask=glob)
        assert (ours.last_hidden_state - theirs.last_hidden_state).abs().max() <= TOLERANCE
        assert (ours.pooler_output - theirs.pooler_output).abs().max() <= TOLERANCE


def test_from_hf_matches_longformer_for_masked_lm(tokenizer, tmp_path):
    reference = checkpoint("LongformerForMaskedLM", CONFIGS[0], tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, LongformerForMaskedLM)
    inputs = batch(tokenizer, TEXT[4:8])
    glob = global_mask(inputs, [[0]] * 4)
    with torch.no_grad():
        ours = net.mlm_head(net.eval()(**inputs, global_attention_mask=glob).last_hidden_state)
        theirs = reference(**inputs, global_attention_mask=glob).logits
    keep = inputs["attention_mask"].bool()
    assert (ours[keep] - theirs[keep]).abs().max() <= TOLERANCE


def test_blocked_sliding_window_equals_dense_banded_attention():
    torch.manual_seed(0)
    B, H, T, d, w = 2, 3, 23, 8, 3
    q, k, v = torch.randn(3, B, H, T, d).unbind(0)
    padding = torch.zeros(B, T, dtype=torch.bool)
    padding[1, 17:] = True
    glob = torch.tensor([[4, 20], [2, 0]])
    valid = torch.tensor([[True, True], [True, False]])
    out = sliding_window_attention(q, k, v, w, padding, glob, valid)
    i = torch.arange(T)
    is_global = torch.zeros(B, T, dtype=torch.bool)
    is_global[0, [4, 20]] = True
    is_global[1, 2] = True
    mask = ((i[:, None] - i[None, :]).abs() <= w) & ~padding[:, None, :]
    mask = (mask | is_global[:, None, :])[:, None]
    dense = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    real = ~padding
    assert (out.transpose(1, 2)[real] - dense.transpose(1, 2)[real]).abs().max() < 1e-6
