"""Generation against transformers' ``generate`` on random T5 weights, T5 (ReLU, tied and scaled
output layer) and v1.1 (gated GELU, own output layer): greedy and beam search with the BART
tests' settings give the same ids, with and without the cache (the decoder's relative position
bias follows the cached positions); beam size 1 is greedy."""

import pytest
import torch

from datamodules.tokenization import TextTokenizer, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.core.generation import (
    GenerationConfig,
    Seq2SeqDecoding,
    beam_search,
    generate,
    greedy_search,
)
from lit_models.interop.hf import to_hf
from lit_models.nets.t5 import T5Config, T5ForConditionalGeneration
from tests.conftest import require
from tests.lit_models.core.test_generation import SETTINGS, strip
from tests.nets.parity import TEXT, seq2seq_batch

T5 = get_arch("t5")


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    """A small vocabulary of T5's tokenizer spec."""
    return train_tokenizer(T5.tokenizer, TEXT, vocab_size=300, lowercase=False)


def inputs(tokenizer: TextTokenizer, sources: list[str], targets: list[str]) -> dict:
    """Sources and decoder inputs from T5's decoder start (its pad)."""
    return seq2seq_batch(tokenizer, sources, targets, start=[tokenizer.special.pad])


transformers = require("transformers")

SIZES = dict(d_model=24, d_kv=8, d_ff=40, num_layers=2, num_decoder_layers=2, num_heads=3,
             relative_attention_num_buckets=10, relative_attention_max_distance=30,
             initializer_factor=3.0)


def end_token(net, batch) -> int:
    """A token the random net emits third in one row and nowhere before, and never in another
    row: used as the end token, hypotheses finish at different lengths or not at all."""
    ids = generate(T5, net, batch["input_ids"], batch["attention_mask"],
                   GenerationConfig(max_new_tokens=15))
    for row in ids.tolist():
        token = row[2]
        if token not in row[:2] and any(token not in other for other in ids.tolist()):
            return token
    raise AssertionError("no row of the random net yields an end token; change the seed")


@pytest.fixture(scope="module", params=["relu", "gated-gelu"])
def models(request, tokenizer, tmp_path_factory):
    """(transformers' model, ours, the end token) with the same random weights."""
    torch.manual_seed(0)
    gated = request.param != "relu"
    config = T5Config(vocab_size=tokenizer.vocab_size, feed_forward_proj=request.param,
                      tie_word_embeddings=not gated, **SIZES)
    net = T5ForConditionalGeneration(config).eval()
    net.config.eos_token_id = end_token(net, inputs(tokenizer, TEXT[:3], TEXT[:3]))
    directory = to_hf(Model(T5, net, tokenizer), tmp_path_factory.mktemp("t5") / "export")
    reference = transformers.AutoModelForSeq2SeqLM.from_pretrained(directory)
    return reference.eval(), net, net.config.eos_token_id


@pytest.mark.parametrize("settings", SETTINGS)
def test_generated_ids_match_transformers_generate(settings, models, tokenizer):
    reference, net, eos = models
    batch = inputs(tokenizer, TEXT[:3], TEXT[:3])
    pad = tokenizer.special.pad
    theirs = reference.generate(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], do_sample=False,
        decoder_start_token_id=pad, eos_token_id=eos, pad_token_id=pad,
        num_return_sequences=1, **settings)
    for use_cache in (True, False):
        ours = generate(T5, net, batch["input_ids"], batch["attention_mask"],
                        GenerationConfig(**settings, use_cache=use_cache))
        assert strip(ours, eos, pad) == strip(theirs[:, 1:], eos, pad)


def test_one_beam_is_greedy(models, tokenizer):
    _, net, eos = models
    batch = inputs(tokenizer, TEXT[:4], TEXT[:4])
    args = net, batch["input_ids"], batch["attention_mask"], 1, True
    cfg = GenerationConfig(num_beams=1, max_new_tokens=12)
    greedy = greedy_search(Seq2SeqDecoding(*args), cfg, eos, 0)
    beam = beam_search(Seq2SeqDecoding(*args), cfg, eos, 0)
    assert strip(beam, eos, 0) == strip(greedy, eos, 0)
    ended = [row[-1] == eos for row in strip(greedy, eos, 0)]
    assert any(ended) and not all(ended)  # the end-token bookkeeping is exercised
