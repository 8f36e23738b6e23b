"""Conneau et al. 2018's raw-text probing tasks (datamodules/sentence_probes.py): length bins,
word content and bigram shift examples hold what their labels say."""

import itertools
import random
from collections import Counter

from datamodules.sentence_probes import (
    LENGTH_BINS,
    bigram_shift,
    sentence_length,
    word_content,
    words_of,
)

VOCABULARY = [f"w{i}" for i in range(60)]


def sentences(n: int = 600, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(VOCABULARY[: 5 + i % 55]) for _ in range(rng.randint(3, 30))] + ["."]
            for i in range(n)]


def test_words_are_word_characters_or_one_punctuation_mark():
    assert words_of("Hello, world! It's 3pm.") == ["Hello", ",", "world", "!", "It", "'", "s",
                                                   "3pm", "."]


def test_sentence_length_bins_hold_their_lengths_and_are_balanced():
    examples, names = sentence_length(sentences(), per_label=20)
    assert names == ["5-8", "9-12", "13-16", "17-20", "21-24", "25-28"]
    for words, label in examples:
        low, high = LENGTH_BINS[label]
        assert low <= len(words) <= high
    assert set(Counter(label for _, label in examples).values()) == {20}


def test_word_content_sentences_hold_exactly_one_target_word_which_is_the_label():
    # five words in every sentence (ranks 0-4), one of ten others (ranks 5-14) in each, a second
    # one in every 7th, and a word of its own (the rarest)
    common, middle = ["the", "of", "and", "a", "to"], [f"word{c}" for c in "abcdefghij"]
    own = ["".join(letters) for letters in itertools.product("klmnop", repeat=4)]
    data = [common + [middle[i % 10]] + [middle[(i + 1) % 10]] * (i % 7 == 0) + [own[i], "."]
            for i in range(300)]
    examples, targets = word_content(data, per_label=5, words=10, first_rank=5)
    assert sorted(targets) == middle and len(examples) == 50
    for words, label in examples:
        held = [w for w in words if w in targets]
        assert held == [targets[label]]


def test_bigram_shift_swaps_one_adjacent_pair_of_words_in_every_other_sentence():
    data = [s for s in sentences() if len(s) >= 5]
    examples, names = bigram_shift(data, count=200, seed=1)
    assert names == ["original", "inverted"] and len(examples) == 200
    assert 95 <= sum(label for _, label in examples) <= 100
    originals = {tuple(s) for s in data}
    for words, label in examples:
        if label == 0:
            assert tuple(words) in originals
            continue
        assert tuple(words) not in originals or any(  # the swap made another real sentence
            tuple(words) == tuple(s) for s in data)
        swapped = [i for i in range(len(words) - 1)
                   if tuple(words[:i] + [words[i + 1], words[i]] + words[i + 2:]) in originals]
        assert swapped and all(words[i] != "." and words[i + 1] != "." for i in swapped)
