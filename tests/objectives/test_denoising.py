"""BART's noise against its definition (Lewis et al. 2020, §2.2): Poisson(3) span lengths,
one mask per span, 30% of tokens covered, kept tokens in order, sentence permutation, and
teacher-forcing labels that reconstruct the original block."""

import math
import random
from collections import Counter

import pytest

from datamodules.errors import PlmbenchError
from datamodules.tokenization import train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.objectives.denoising import (
    Denoising,
    DenoisingCollator,
    NoiseConfig,
    infill,
    poisson,
    sentence_blocks,
)

MASK = -1


def test_poisson_draws_have_the_poisson_distribution():
    rng = random.Random(0)
    draws = [poisson(3.0, rng) for _ in range(20000)]
    counts = Counter(draws)
    assert sum(draws) / len(draws) == pytest.approx(3.0, abs=0.05)
    assert counts[0] / len(draws) == pytest.approx(math.exp(-3), abs=0.01)


def test_infilling_covers_the_ratio_with_one_mask_per_span():
    rng, cfg = random.Random(1), NoiseConfig(mask_ratio=0.3)
    removed_shares, masks = [], []
    for _ in range(50):
        tokens = list(range(200))
        out = infill(tokens, cfg, MASK, rng)
        kept = [t for t in out if t != MASK]
        assert kept == sorted(kept)  # the kept tokens, in order
        removed_shares.append(1 - len(kept) / len(tokens))
        masks.append(out.count(MASK))
    # spans may overlap, so slightly under 30% on average, never above
    assert 0.25 < sum(removed_shares) / 50 <= 0.3
    # one mask per span: about 60 / 3 = 20 spans, fewer masks where spans touch and merge
    assert 12 < sum(masks) / 50 <= 21


def test_collator_permutes_sentences_and_reconstructs_the_original():
    tokenizer = train_tokenizer(get_arch("bart").tokenizer, ["a b c. d e f."] * 30, 300, False)
    special = tokenizer.special
    examples = sentence_blocks([[[10, 11, 12], [20, 21], [30, 31, 32, 33]]], random.Random(0), 20)
    assert examples == [{"sentences": [[10, 11, 12], [20, 21], [30, 31, 32, 33]]}]
    assert len(sentence_blocks([[[1] * 7, [2] * 7]], random.Random(0), 10)) == 2
    collate = DenoisingCollator(tokenizer, NoiseConfig(mask_ratio=0.0), seed=0)
    seen = set()
    for seed in range(20):
        batch = collate([{**examples[0], "mask_seed": seed}])
        original = [special.cls, 10, 11, 12, 20, 21, 30, 31, 32, 33, special.sep]
        assert batch["labels"][0].tolist() == original
        assert batch["decoder_input_ids"][0].tolist() == [special.sep, *original[:-1]]
        ids = batch["input_ids"][0].tolist()
        assert sorted(ids) == sorted(original)  # no masking: a permutation of the sentences
        seen.add(tuple(ids))
        assert collate([{**examples[0], "mask_seed": seed}])["input_ids"][0].tolist() == ids
    assert len(seen) > 3  # several orders


def test_denoising_refuses_an_encoder():
    tokenizer = train_tokenizer(get_arch("bert").tokenizer, ["a b c."] * 30, 100, True)
    net = BertForPreTraining(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=8))
    with pytest.raises(PlmbenchError, match="pretrains encoder-decoder models"):
        Denoising().check(Model(get_arch("bert"), net, tokenizer))
    with pytest.raises(PlmbenchError, match="mask_ratio"):
        Denoising(mask_ratio=1.5)
