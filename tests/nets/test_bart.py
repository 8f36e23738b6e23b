"""BART against transformers: random transformers checkpoints imported with ``from_hf`` give the
same decoder ``last_hidden_state`` (BartModel) and LM logits (BartForConditionalGeneration) to
1e-5 in float32 on padded batches; our nets exported with ``to_hf`` load back into transformers
equal; cached incremental decoding gives the logits of a full decoder pass."""

from pathlib import Path

import pytest
import torch

from datamodules.collate import pad_collate
from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.core.hf import from_hf, to_hf
from lit_models.nets.bart import BartConfig, BartForConditionalGeneration, BartModel
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
    net, loaded = from_hf(tmp_path)
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
    net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, BartForConditionalGeneration)
    assert net.final_logits_bias.abs().sum() > 0  # the bias came along
    batch = inputs(tokenizer, TEXT[2:6], TEXT[:4])
    keep = batch.pop("decoder_mask")
    with torch.no_grad():
        ours = net.logits(net.eval()(**batch).last_hidden_state)
        theirs = reference(**batch).logits
    assert max_diff(ours, theirs, keep) <= TOLERANCE


def test_to_hf_round_trips_through_transformers(tokenizer, tmp_path):
    special = tokenizer.special
    config = BartConfig(vocab_size=tokenizer.vocab_size, pad_token_id=special.pad, **CONFIGS[0])
    ours = randomize_(BartForConditionalGeneration(config))
    to_hf(ours, tokenizer, tmp_path / "export")
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "export").eval()
    assert type(theirs).__name__ == "BartForConditionalGeneration"
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
    assert hf_tokenizer("The cat sat.")["input_ids"] == tokenizer.backend.encode("The cat sat.").ids
    batch = inputs(tokenizer, TEXT[:3], TEXT[4:7])
    keep = batch.pop("decoder_mask")
    with torch.no_grad():
        logits = ours.logits(ours(**batch).last_hidden_state)
        assert max_diff(logits, theirs(**batch).logits, keep) <= TOLERANCE
    again, _ = from_hf(tmp_path / "export", with_heads=True)
    for (name, mine), theirs_param in zip(ours.named_parameters(), again.parameters(),
                                          strict=True):
        assert torch.equal(mine, theirs_param), name


def test_cached_decoding_gives_the_full_pass_logits(tokenizer):
    """Feeding the decoder one token at a time through the caches equals one causal pass."""
    config = BartConfig(vocab_size=tokenizer.vocab_size, **CONFIGS[0])
    net = randomize_(BartForConditionalGeneration(config))
    batch = inputs(tokenizer, TEXT[:2], ["The cat sat on the mat.", "A dog ran."])
    ids = batch["decoder_input_ids"]
    with torch.no_grad():
        memory = net.encode(batch["input_ids"], batch["attention_mask"])
        full = net.logits(net.decode(ids, memory, batch["attention_mask"]))
        caches = net.new_caches()
        steps = [net.logits(net.decode(ids[:, t:t + 1], memory if t == 0 else None,
                                       batch["attention_mask"], caches))
                 for t in range(ids.shape[1])]
    assert (torch.cat(steps, 1) - full).abs().max() <= TOLERANCE
    with pytest.raises(ValueError, match="max_position_embeddings"):
        net.decode(torch.ones(1, 62, dtype=torch.long), memory[:1], None)
