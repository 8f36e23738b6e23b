"""Decoder-only generation against transformers' ``generate`` on random GPT-2 weights: greedy and
beam search (length penalty, no-repeat n-grams, min length, early stopping) continue left-padded
prompts to the same ids, with and without the cache; beam size 1 is greedy; cached and uncached
steps give the same logits."""

import pytest
import torch

from lit_models.archs import Model, get_arch
from lit_models.core.generation import (
    CausalDecoding,
    GenerationConfig,
    beam_search,
    generate,
    greedy_search,
)
from lit_models.interop.hf import to_hf
from lit_models.nets.gpt import GPTConfig, GPTLMHeadModel
from tests.conftest import require
from tests.lit_models.core.test_generation import SETTINGS, strip
from tests.nets.parity import TEXT
from tests.nets.test_gpt import tokenizer as tokenizer  # noqa: F401 (fixture)

GPT2 = get_arch("gpt2")

transformers = require("transformers")

SIZES = dict(n_embd=24, n_layer=2, n_head=3, n_inner=40, n_positions=80)
#: a token the random model below emits mid-sequence at different steps, used as the end token
EOS = 4


@pytest.fixture(scope="module")
def models(tokenizer, tmp_path_factory):  # noqa: F811
    """(transformers' model, ours) with the same random weights (ours exported with to_hf)."""
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, initializer_range=0.2, eos_token_id=EOS,
                       pad_token_id=tokenizer.special.pad, **SIZES)
    net = GPTLMHeadModel(config).eval()
    directory = to_hf(Model(GPT2, net, tokenizer), tmp_path_factory.mktemp("gpt2") / "export")
    reference = transformers.AutoModelForCausalLM.from_pretrained(directory)
    return reference.eval(), net


def prompts(tokenizer, n: int = 3) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: F811
    """``n`` left-padded prompts of different lengths."""
    rows = [e.ids[:8 + 3 * i] for i, e in enumerate(tokenizer.backend.encode_batch(TEXT[:n]))]
    width, pad = max(map(len, rows)), tokenizer.special.pad
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


@pytest.mark.parametrize("settings", SETTINGS)
def test_generated_ids_match_transformers_generate(settings, models, tokenizer):  # noqa: F811
    reference, net = models
    ids, mask = prompts(tokenizer)
    pad = tokenizer.special.pad
    theirs = reference.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                eos_token_id=EOS, pad_token_id=pad, num_return_sequences=1,
                                **settings)
    expected = strip(theirs[:, ids.shape[1]:], EOS, pad)
    for use_cache in (True, False):
        ours = generate(GPT2, net, ids, mask, GenerationConfig(**settings, use_cache=use_cache))
        assert strip(ours, EOS, pad) == expected


def test_the_test_model_ends_hypotheses_at_different_lengths(models, tokenizer):  # noqa: F811
    _, net = models
    ids, mask = prompts(tokenizer)
    lengths = set()
    for settings in SETTINGS:
        out = generate(GPT2, net, ids, mask, GenerationConfig(**settings))
        lengths |= {(len(row), row[-1] == EOS) for row in strip(out, EOS, 1)}
    assert len({n for n, ended in lengths if ended}) >= 2 and any(not e for _, e in lengths)


def test_one_beam_is_greedy_and_the_cache_changes_no_logit(models, tokenizer):  # noqa: F811
    _, net = models
    ids, mask = prompts(tokenizer, 4)
    cfg = GenerationConfig(num_beams=1, max_new_tokens=12)
    with torch.no_grad():
        greedy = greedy_search(CausalDecoding(net, ids, mask, 1, True), cfg, EOS, 1)
        beam = beam_search(CausalDecoding(net, ids, mask, 1, True), cfg, EOS, 1)
        assert strip(beam[:, ids.shape[1]:], EOS, 1) == strip(greedy[:, ids.shape[1]:], EOS, 1)
        fast, slow = (CausalDecoding(net, ids, mask, 1, use) for use in (True, False))
        sequences = fast.prompt
        for _ in range(6):
            a, b = fast.next_logits(sequences), slow.next_logits(sequences)
            assert (a - b).abs().max() <= 1e-5
            sequences = torch.cat([sequences, a.argmax(-1, keepdim=True)], 1)


def test_right_padded_prompts_are_refused(models, tokenizer):  # noqa: F811
    _, net = models
    ids, mask = prompts(tokenizer)
    with pytest.raises(ValueError, match="left-padded"):
        generate(GPT2, net, ids.flip(1), mask.flip(1), GenerationConfig())
