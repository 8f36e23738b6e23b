"""ALBERT's n-gram masking (Lan et al. 2020, §4.1): selected targets are n-grams of n <= 3 whole
words with p(n) = (1/n) / (1 + 1/2 + 1/3), none crossing a special token, within the 15% budget."""

import torch

from datamodules.collate import IGNORE_INDEX
from lit_models.objectives.mlm import MaskingConfig, mask_tokens
from lit_models.objectives.ngram import ngram_probabilities, ngram_starts
from tests.objectives.test_mlm import padded_batch, special_flags

VOCAB = 1000


def selected_ngrams(ids: torch.Tensor, word_starts: torch.Tensor, generator):
    """(n-gram starts, labels) of one masking of ``ids`` with n-grams of up to 3 words."""
    special = special_flags(VOCAB)
    starts = ngram_starts(word_starts, ~special[ids], 3, generator)
    _, labels = mask_tokens(ids, special, MaskingConfig(max_ngram=3), VOCAB, mask_id=4,
                            generator=generator, word_starts=starts)
    return starts, labels != IGNORE_INDEX


def test_selected_ngram_lengths_follow_one_over_n() -> None:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    ids = padded_batch(400, 256, VOCAB)
    words = torch.ones_like(ids, dtype=torch.bool)  # one token per word
    starts, selected = selected_ngrams(ids, words, generator)
    unit = starts.long().cumsum(1) - 1 + torch.arange(len(ids))[:, None] * ids.shape[1]
    size = torch.bincount(unit.flatten())
    taken = torch.bincount(unit.flatten(), weights=selected.flatten().double()).long()
    assert ((taken == 0) | (taken == size)).all()  # an n-gram is selected whole or not at all
    lengths = size[taken > 0]
    share = torch.bincount(lengths, minlength=4)[1:].double() / len(lengths)
    assert len(lengths) > 4000 and lengths.max() == 3
    assert torch.allclose(share, ngram_probabilities(3), atol=0.03), share  # 6/11, 3/11, 2/11
    candidates = (~special_flags(VOCAB)[ids]).sum(1)
    budget = (candidates * 0.15).round().clamp(min=1).minimum(candidates)
    assert (selected.sum(1) <= budget).all() and (selected.sum(1) >= budget - 2).all()


def test_ngrams_hold_whole_words_and_stop_at_special_tokens() -> None:
    torch.manual_seed(1)
    generator = torch.Generator().manual_seed(1)
    ids = padded_batch(200, 64, VOCAB)
    ids[:, 30] = 3  # a [SEP] in the middle of every row
    words = torch.rand(ids.shape, generator=generator) < 0.6  # words of 1-several pieces
    candidates = ~special_flags(VOCAB)[ids]
    words[:, 1:] |= ~candidates[:, :-1]  # as the collator marks them: a word follows a special
    starts = ngram_starts(words, candidates, 3, generator)
    assert not starts[candidates & ~words].any()  # an n-gram begins at a word start only ...
    assert starts[:, 30].all() and starts[:, 31].all()  # ... and never spans the [SEP]
    # every n-gram holds 1..3 words
    unit = starts.long().cumsum(1) - 1 + torch.arange(len(ids))[:, None] * ids.shape[1]
    assert torch.bincount(unit.flatten(), weights=words.flatten().double()).max() <= 3
