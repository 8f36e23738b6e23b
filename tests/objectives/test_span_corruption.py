"""T5's span corruption against its definition (Raffel et al. 2020, §3.1.4; the released
``random_spans_noise_mask``): exactly round(0.15 n) noise tokens in exactly round(noise / 3)
spans, kept and noise segments alternating from a kept one, segment lengths distributed as a
uniformly random composition; Figure 2's inputs and targets; T5's 568-token blocks for 512-token
inputs; the loss equals transformers' T5ForConditionalGeneration loss on the same batch."""

import random
from collections import Counter
from itertools import groupby
from math import comb

import pytest
import torch

from datamodules.collate import token_mask
from datamodules.errors import PlmbenchError
from datamodules.tokenization import train_tokenizer
from lit_models.archs import get_arch
from lit_models.core.hf import to_hf
from lit_models.nets.t5 import T5Config, T5ForConditionalGeneration
from lit_models.objectives.span_corruption import (
    SpanConfig,
    SpanCorruption,
    corrupt,
    random_spans_noise_mask,
)
from tests.conftest import require
from tests.nets.parity import TEXT

CFG = SpanConfig()


def runs(mask: list[bool]) -> list[tuple[bool, int]]:
    """(is noise, length) of each maximal run."""
    return [(key, len(list(group))) for key, group in groupby(mask)]


@pytest.mark.parametrize("length", [2, 7, 100, 568])
def test_exact_noise_and_span_counts_alternating_from_kept(length):
    noise, spans = CFG.counts(length)
    assert noise == min(max(round(0.15 * length), 1), length - 1)
    assert spans == max(round(noise / 3), 1)
    rng = random.Random(length)
    for _ in range(200):
        mask = random_spans_noise_mask(length, CFG, rng)
        assert len(mask) == length and sum(mask) == noise
        segments = runs(mask)
        assert [key for key, _ in segments] == [False, True] * spans  # kept first, noise last
        assert all(n > 0 for _, n in segments)


def composition_part(items: int, parts: int, j: int) -> float:
    """P(a given part has j items) when ``items`` are split into ``parts`` non-empty parts,
    every split equally likely: C(items - j - 1, parts - 2) / C(items - 1, parts - 1)."""
    return comb(items - j - 1, parts - 2) / comb(items - 1, parts - 1)


def test_span_lengths_are_a_uniform_random_composition():
    """n = 100: 15 noise tokens in 5 spans (mean length 3), 85 kept in 5 segments."""
    rng, draws = random.Random(0), 4000
    noise_lengths, kept_lengths = Counter(), Counter()
    for _ in range(draws):
        for noise, n in runs(random_spans_noise_mask(100, CFG, rng)):
            (noise_lengths if noise else kept_lengths)[n] += 1
    total = 5 * draws
    assert sum(n * c for n, c in noise_lengths.items()) / total == pytest.approx(3.0)
    for j in range(1, 9):
        assert noise_lengths[j] / total == pytest.approx(composition_part(15, 5, j), abs=0.01)
    for j in (1, 10, 17, 30, 50):
        assert kept_lengths[j] / total == pytest.approx(composition_part(85, 5, j), abs=0.006)


def test_figure_2():
    words = "Thank you for inviting me to your party last week .".split()
    noise = [w in ("for", "inviting", "last") for w in words]
    inputs, targets = corrupt(words, noise, ["<X>", "<Y>", "<Z>"], "</s>")
    assert " ".join(inputs) == "Thank you <X> me to your party <Y> week . </s>"
    assert " ".join(targets) == "<X> for inviting <Y> last </s>"


def test_t5_block_length_for_512_token_inputs():
    """random_spans_helper: 568 raw tokens -> 512 input tokens and 114 target tokens."""
    assert CFG.raw_length(512) == 568
    noise, spans = CFG.counts(568)
    assert (568 - noise + spans + 1, noise + spans + 1) == (512, 114)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(get_arch("t5").tokenizer, TEXT, vocab_size=300, lowercase=False)


def test_collated_batches_rebuild_the_text_and_match_transformers_loss(tokenizer, tmp_path):
    transformers = require("transformers")
    objective = SpanCorruption()
    documents = [[tokenizer.backend.encode(s, add_special_tokens=False).ids for s in TEXT[i:i + 2]]
                 for i in range(0, 8, 2)]
    examples = objective.make_examples(40, tokenizer)(documents, rng=random.Random(0))
    assert {len(e["tokens"]) for e in examples[:-1]} == {CFG.raw_length(40)}
    batch = objective.collator(tokenizer, 0)([{**e, "mask_seed": i}
                                              for i, e in enumerate(examples[:4])])
    assert batch["input_ids"].shape[1] <= 40
    sentinel = {tokenizer.backend.token_to_id(f"<extra_id_{i}>"): i for i in range(100)}
    eos, pad = tokenizer.special.sep, tokenizer.special.pad
    for row, example in enumerate(examples[:4]):  # sentinels -> their spans: the block again
        inputs = [t for t in batch["input_ids"][row].tolist() if t not in (pad, eos)]
        target = [t for t in batch["labels"][row].tolist() if t not in (-100, eos)]
        spans, current = {}, None
        for t in target:
            current = sentinel[t] if t in sentinel else current
            spans.setdefault(current, []).extend([] if t in sentinel else [t])
        rebuilt = [t for s in inputs for t in (spans[sentinel[s]] if s in sentinel else [s])]
        assert rebuilt == example["tokens"]
    config = T5Config(vocab_size=tokenizer.vocab_size, d_model=16, d_kv=4, d_ff=24,
                      num_layers=1, num_heads=2, dropout_rate=0.0)
    net = T5ForConditionalGeneration(config).eval()
    reference = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        to_hf(net, tokenizer, tmp_path / "export")).eval()
    with torch.no_grad():
        ours = objective.losses(net, batch)["span_corruption_loss"]
        theirs = reference(input_ids=batch["input_ids"], attention_mask=token_mask(batch).long(),
                           labels=batch["labels"]).loss
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)


def test_a_vocabulary_without_sentinels_is_refused():
    bart = train_tokenizer(get_arch("bart").tokenizer, TEXT, vocab_size=300, lowercase=False)
    with pytest.raises(PlmbenchError, match="needs the sentinels"):
        SpanCorruption().make_examples(128, bart)
