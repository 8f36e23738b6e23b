"""Word-level data of the baselines: ELMo's character ids (the released model's mapping, by hand),
GloVe's co-occurrence counts against cooccur.c's loop written out, and word vocabularies."""

import numpy as np
import pytest

from datamodules.characters import NUM_CHARACTERS, char_ids
from datamodules.cooccurrence import count_cooccurrences
from datamodules.words import SPECIALS, WordVocabulary, split_words


def test_characters_are_bytes_between_word_markers_shifted_by_one():
    ids = char_ids(["ab", "<S>", "</S>", "é"])
    pad = 261  # the within-word padding character 260, shifted
    assert ids[0].tolist() == [259, 98, 99, 260] + [pad] * 46
    assert ids[1].tolist() == [259, 257, 260] + [pad] * 47
    assert ids[2].tolist() == [259, 258, 260] + [pad] * 47
    assert ids[3, :4].tolist() == [259, 0xC3 + 1, 0xA9 + 1, 260]  # UTF-8 bytes of é
    assert ids.max() < NUM_CHARACTERS and ids.min() > 0


def test_a_long_word_keeps_its_first_48_bytes():
    ids = char_ids(["x" * 60])[0]
    assert ids[0] == 259 and ids[-1] == 260 and (ids[1:49] == ord("x") + 1).all()


def reference_cooccur(lines: list[list[int]], window: int, vocab_size: int) -> np.ndarray:
    """cooccur.c's counting loop: history of in-vocabulary words, reset at each line, each
    context word k places to the left adding 1/k symmetrically (ids < 0: out of vocabulary)."""
    x = np.zeros((vocab_size, vocab_size))
    for line in lines:
        history: list[int] = []
        for w2 in line:
            if w2 < 0:
                continue
            for distance, w1 in enumerate(reversed(history[-window:]), start=1):
                x[w1, w2] += 1.0 / distance
                x[w2, w1] += 1.0 / distance
            history.append(w2)
    return x


def test_cooccurrences_count_as_glove_cooccur_does():
    rng = np.random.default_rng(0)
    lines = [list(rng.integers(-1, 6, size=rng.integers(0, 15))) for _ in range(30)]
    expected = reference_cooccur(lines, window=3, vocab_size=6)
    in_vocab = [[w for w in line if w >= 0] for line in lines]
    for chunk in (5, 1_000_000):  # several chunks merge to the same counts
        x = count_cooccurrences(in_vocab, 6, window=3, chunk_tokens=chunk)
        assert np.allclose(x.dense(6).numpy(), expected)
        assert (x.values > 0).all()


def test_a_vocabulary_orders_words_by_count_and_keeps_the_specials_first():
    texts = ["the cat sat", "the Cat ran", "the dog"]
    vocab = WordVocabulary.train(lambda: iter(texts), max_size=None, min_count=1, lowercase=True)
    assert vocab.words[: len(SPECIALS)] == list(SPECIALS)
    assert vocab.words[4:6] == ["the", "cat"]
    assert vocab.counts[vocab.index["the"]] == 3 and vocab.counts[vocab.index["cat"]] == 2
    assert vocab.words_of(["The Cat!"]) == [["The", "Cat", "!"]]
    assert vocab.ids(["Cat", "<S>", "zebra"]) == [vocab.index["cat"], vocab.bos, vocab.unk]
    counted = WordVocabulary.count(split_words(texts, lowercase=False), None, 1, True)
    assert counted.words == vocab.words and counted.counts.tolist() == vocab.counts.tolist()


def test_a_vocabulary_round_trips(tmp_path):
    vocab = WordVocabulary.count([["a", "b", "a"]], None, 1, False)
    vocab.save(tmp_path)
    again = WordVocabulary.load(tmp_path)
    assert again.words == vocab.words and again.fingerprint == vocab.fingerprint


@pytest.mark.parametrize("max_size", [5, 6])
def test_max_size_counts_the_specials(max_size):
    vocab = WordVocabulary.count([["a", "a", "b"]], max_size, 1, False)
    assert len(vocab) == max_size
