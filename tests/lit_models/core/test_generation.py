"""Generation against transformers' ``generate`` on random BART weights (greedy and beam search,
length penalty, no-repeat n-grams, min length, early stopping), beam size 1 against greedy, and
cached against uncached decoding."""

import pytest
import torch

from datamodules.errors import PlmbenchError
from datamodules.tokenization import TextTokenizer, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.core.generation import (
    GenerationConfig,
    Seq2SeqDecoding,
    beam_search,
    constrain_,
    generate,
    greedy_search,
)
from lit_models.interop.hf import to_hf
from lit_models.nets.bart import BartConfig, BartForConditionalGeneration
from tests.conftest import require
from tests.nets.parity import TEXT, seq2seq_batch

BART = get_arch("bart")


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    """A small vocabulary of BART's tokenizer spec."""
    return train_tokenizer(BART.tokenizer, TEXT, vocab_size=300, lowercase=False)


transformers = require("transformers")

SIZES = dict(d_model=24, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
             decoder_attention_heads=3, encoder_ffn_dim=40, decoder_ffn_dim=36,
             activation_function="gelu", max_position_embeddings=80)
SETTINGS = [
    dict(num_beams=1, max_new_tokens=12),
    dict(num_beams=1, max_new_tokens=15, min_new_tokens=6, no_repeat_ngram_size=2),
    dict(num_beams=3, max_new_tokens=10, length_penalty=1.0),
    dict(num_beams=4, max_new_tokens=14, length_penalty=2.0, no_repeat_ngram_size=3,
         min_new_tokens=3, early_stopping=True),
    dict(num_beams=2, max_new_tokens=9, length_penalty=0.6, early_stopping="never"),
    dict(num_beams=5, max_new_tokens=11, length_penalty=-0.5),
]


#: a token the random model below emits mid-sequence, used as the end token so that
#: hypotheses finish at different lengths (its real end token comes first or never)
EOS = 134


@pytest.fixture(scope="module")
def models(tokenizer, tmp_path_factory):
    """(transformers' model, ours) with the same random weights (ours exported with to_hf)."""
    torch.manual_seed(0)
    config = BartConfig(vocab_size=tokenizer.vocab_size, init_std=0.2, eos_token_id=EOS, **SIZES)
    net = BartForConditionalGeneration(config).eval()
    directory = to_hf(Model(BART, net, tokenizer), tmp_path_factory.mktemp("bart") / "export")
    reference = transformers.AutoModelForSeq2SeqLM.from_pretrained(directory)
    return reference.eval(), net


def strip(ids: torch.Tensor, eos: int, pad: int) -> list[list[int]]:
    """Each row up to and with its first end token (the fill after it differs by design)."""
    rows = []
    for row in ids.tolist():
        rows.append(row[:row.index(eos) + 1] if eos in row else [t for t in row if t != pad])
    return rows


@pytest.mark.parametrize("settings", SETTINGS)
def test_generated_ids_match_transformers_generate(settings, models, tokenizer):
    reference, net = models
    batch = seq2seq_batch(tokenizer, TEXT[:3], TEXT[:3])
    special = tokenizer.special
    theirs = reference.generate(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], do_sample=False,
        decoder_start_token_id=special.sep, eos_token_id=EOS, pad_token_id=special.pad,
        forced_bos_token_id=None, forced_eos_token_id=None, num_return_sequences=1, **settings)
    ours = generate(BART, net, batch["input_ids"], batch["attention_mask"],
                    GenerationConfig(**settings))
    assert strip(ours, EOS, special.pad) == strip(theirs[:, 1:], EOS, special.pad)
    assert ours.shape[1] == max(len(row) for row in strip(ours, EOS, special.pad))


@pytest.mark.parametrize("early_stopping", [False, True])
def test_one_beam_is_greedy(early_stopping, models, tokenizer):
    _, net = models
    batch = seq2seq_batch(tokenizer, TEXT[:4], TEXT[:4])
    cfg = GenerationConfig(num_beams=1, max_new_tokens=12, early_stopping=early_stopping)
    with torch.no_grad():
        greedy = greedy_search(Seq2SeqDecoding(net, batch["input_ids"], batch["attention_mask"],
                                               1, True), cfg, EOS, 1)
        beam = beam_search(Seq2SeqDecoding(net, batch["input_ids"], batch["attention_mask"],
                                           1, True), cfg, EOS, 1)
    assert strip(beam, EOS, 1) == strip(greedy, EOS, 1)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_cached_and_uncached_decoding_agree(num_beams, models, tokenizer):
    _, net = models
    batch = seq2seq_batch(tokenizer, TEXT[1:4], TEXT[1:4])
    args = batch["input_ids"], batch["attention_mask"]
    cfg = dict(num_beams=num_beams, max_new_tokens=10, no_repeat_ngram_size=2)
    cached = generate(BART, net, *args, GenerationConfig(**cfg, use_cache=True))
    uncached = generate(BART, net, *args, GenerationConfig(**cfg, use_cache=False))
    assert torch.equal(cached, uncached)
    with torch.no_grad():  # and the logits of every step agree
        fast, slow = (Seq2SeqDecoding(net, *args, 1, use) for use in (True, False))
        sequences = fast.prompt
        for _ in range(6):
            a, b = fast.next_logits(sequences), slow.next_logits(sequences)
            assert (a - b).abs().max() <= 1e-5
            sequences = torch.cat([sequences, a.argmax(-1, keepdim=True)], 1)


def test_constraints_follow_their_definitions():
    cfg = GenerationConfig(min_new_tokens=2, no_repeat_ngram_size=2)
    sequences = torch.tensor([[5, 6, 7, 5], [1, 2, 3, 4]])
    scores = constrain_(torch.zeros(2, 9), sequences, generated=1, cfg=cfg, eos=8)
    banned = torch.isinf(scores)
    # row 0 ends in 5, and "5 6" occurred: 6 is banned; row 1's 4 never occurred before
    assert banned[0].nonzero().flatten().tolist() == [6, 8]
    assert banned[1].nonzero().flatten().tolist() == [8]
    scores = constrain_(torch.zeros(2, 9), sequences, generated=2, cfg=cfg, eos=8)
    assert not torch.isinf(scores[:, 8]).any()


def test_bad_settings_are_one_line():
    with pytest.raises(PlmbenchError, match="early_stopping"):
        GenerationConfig(early_stopping="sometimes")
    with pytest.raises(PlmbenchError, match="min_new_tokens"):
        GenerationConfig(min_new_tokens=5, max_new_tokens=3)


def test_the_test_model_ends_hypotheses_at_different_lengths(models, tokenizer):
    """Otherwise the comparisons above would not exercise the end-token bookkeeping."""
    _, net = models
    batch = seq2seq_batch(tokenizer, TEXT[:3], TEXT[:3])
    lengths = set()
    for settings in SETTINGS:
        ids = generate(BART, net, batch["input_ids"], batch["attention_mask"],
                       GenerationConfig(**settings))
        lengths |= {(len(row), row[-1] == EOS) for row in strip(ids, EOS, 1)}
    assert len({n for n, ended in lengths if ended}) >= 2 and any(not e for _, e in lengths)
