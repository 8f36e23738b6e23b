"""BART against transformers: random transformers checkpoints imported with ``from_hf`` give the
same decoder ``last_hidden_state`` (BartModel) and LM logits (BartForConditionalGeneration) to
1e-5 in float32 on padded batches (exports, cached decoding and the other contracts:
``tests/contracts``)."""

from pathlib import Path

import pytest
import torch

from datamodules.collate import pad_collate
from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.bart import BartForConditionalGeneration, BartModel
from tests.conftest import require
from tests.nets.parity import TEXT, max_diff, randomize_

transformers = require("transformers")

TOLERANCE = 1e-5
BART = get_arch("bart")
#: sizes no other test uses: odd heads, unequal stacks, tanh GELU, scaled embeddings
CONFIGS = [
    dict(d_model=36, encoder_layers=2, decoder_layers=3, encoder_attention_heads=3,
         decoder_attention_heads=2, encoder_ffn_dim=50, decoder_ffn_dim=44,
         activation_function="gelu_new", max_position_embeddings=61, scale_embedding=True),
    dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
         activation_function="relu", max_position_embeddings=72),
]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(BART.tokenizer, TEXT, vocab_size=300, lowercase=False)


def inputs(tokenizer: TextTokenizer, sources: list[str], targets: list[str]) -> dict:
    """A padded source batch and right-padded decoder inputs of other lengths."""
    encode = tokenizer.backend.encode_batch
    batch = pad_collate([{"input_ids": e.ids} for e in encode(sources)], tokenizer.special.pad)
    decoder = pad_collate([{"input_ids": e.ids} for e in encode(targets)], tokenizer.special.pad)
    batch["decoder_input_ids"] = decoder["input_ids"]
    batch["decoder_mask"] = decoder["attention_mask"]
    assert (batch["attention_mask"] == 0).any() and (decoder["attention_mask"] == 0).any()
    return batch


def checkpoint(cls_name: str, sizes: dict, tokenizer: TextTokenizer, directory: Path):
    special = tokenizer.special
    config = transformers.BartConfig(
        vocab_size=tokenizer.vocab_size, pad_token_id=special.pad, bos_token_id=special.cls,
        eos_token_id=special.sep, decoder_start_token_id=special.sep, dropout=0.0, **sizes)
    model = randomize_(getattr(transformers, cls_name)(config))
    if hasattr(model, "final_logits_bias"):  # a buffer: randomize_ leaves it at zero
        model.final_logits_bias.normal_()
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory, sizes["max_position_embeddings"])
    return model


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_bart_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("BartModel", sizes, tokenizer, tmp_path)
    _, net, loaded = from_hf(tmp_path)
    assert isinstance(net, BartModel) and loaded.special == tokenizer.special
    batch = inputs(tokenizer, TEXT[:4], TEXT[5:9])
    keep = batch.pop("decoder_mask")
    with torch.no_grad():
        ours = net.eval()(**batch)
        theirs = reference(**batch)
    assert max_diff(ours.last_hidden_state, theirs.last_hidden_state, keep) <= TOLERANCE
    assert max_diff(ours.encoder_last_hidden_state, theirs.encoder_last_hidden_state,
                 batch["attention_mask"]) <= TOLERANCE


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_bart_for_conditional_generation(sizes, tokenizer, tmp_path):
    reference = checkpoint("BartForConditionalGeneration", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, BartForConditionalGeneration)
    assert net.final_logits_bias.abs().sum() > 0  # the bias came along
    batch = inputs(tokenizer, TEXT[2:6], TEXT[:4])
    keep = batch.pop("decoder_mask")
    with torch.no_grad():
        ours = net.logits(net.eval()(**batch).last_hidden_state)
        theirs = reference(**batch).logits
    assert max_diff(ours, theirs, keep) <= TOLERANCE
