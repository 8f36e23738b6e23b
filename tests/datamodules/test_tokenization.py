"""WordPiece training, BERT tokenizer construction and loading, special tokens, fingerprints."""

import json
import shutil

import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from datamodules.errors import PlmbenchError
from datamodules.tokenization import (
    SPECIAL_TOKENS,
    SpecialTokens,
    bert_wordpiece_tokenizer,
    load_tokenizer,
    tokenizer_fingerprint,
    train_wordpiece,
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A quick brown dog jumps over the lazy fox!",
    "Foxes and dogs are quick; dogs are lazy, foxes are not.",
    "Jumping foxes, jumping dogs: the quickest jumps win.",
] * 5

SENTENCES = [
    "Héllo, World! The unaffable naïve café owner said 東京 is far.",
    "BERT uses WordPiece: [MASK] tokens are never split.",
]


def test_train_wordpiece_vocab_template_and_round_trip() -> None:
    torch.manual_seed(0)
    tokenizer = train_wordpiece(CORPUS, vocab_size=80, min_frequency=1)
    vocab = tokenizer.get_vocab()
    assert len(vocab) <= 80
    assert [vocab[token] for token in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]  # [PAD] = 0
    assert SpecialTokens.of(tokenizer) == SpecialTokens(pad=0, unk=1, cls=2, sep=3, mask=4)
    assert any(token.startswith("##") for token in vocab)

    text = "The quickest foxes jumping over lazy dogs"
    encoding = tokenizer.encode(text)
    assert encoding.tokens[0] == "[CLS]" and encoding.tokens[-1] == "[SEP]"
    assert "[UNK]" not in encoding.tokens
    assert any(token.startswith("##") for token in encoding.tokens)  # some word was split
    assert tokenizer.decode(encoding.ids) == text.lower()  # BERT normalizer lowercases

    pair = tokenizer.encode("quick fox", "lazy dog")
    assert pair.tokens == ["[CLS]", "quick", "fox", "[SEP]", "lazy", "dog", "[SEP]"]
    assert pair.type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert tokenizer.encode("zebra").tokens == ["[CLS]", "[UNK]", "[SEP]"]  # unseen characters


def test_train_wordpiece_keeps_case_when_asked() -> None:
    tokenizer = train_wordpiece(CORPUS, vocab_size=120, lowercase=False, min_frequency=1)
    assert "The" in tokenizer.get_vocab()
    assert tokenizer.decode(tokenizer.encode("The fox").ids) == "The fox"


def test_bert_wordpiece_from_vocab_matches_checkpoint_tokenizer(minilm_path) -> None:
    reference = Tokenizer.from_file(str(minilm_path / "tokenizer.json"))
    reference.no_padding()
    ours = bert_wordpiece_tokenizer(minilm_path / "vocab.txt", lowercase=True)
    for a, b in zip(
        ours.encode_batch([*SENTENCES, tuple(SENTENCES)]),
        reference.encode_batch([*SENTENCES, tuple(SENTENCES)]),
        strict=True,
    ):
        assert a.ids == b.ids and a.type_ids == b.type_ids and a.offsets == b.offsets
    assert "[MASK]" in ours.encode(SENTENCES[1]).tokens  # special tokens are never split
    assert ours.decode(ours.encode("hello world").ids) == "hello world"


def test_load_tokenizer_file_dir_and_vocab_only_dir(minilm_path, tmp_path) -> None:
    from_dir = load_tokenizer(minilm_path)
    from_file = load_tokenizer(minilm_path / "tokenizer.json")
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_path / name, tmp_path / name)
    from_vocab = load_tokenizer(tmp_path)
    long_text = " ".join(["word"] * 300)
    for tokenizer in (from_dir, from_file, from_vocab):
        assert tokenizer.padding is None and tokenizer.truncation is None
        assert len(tokenizer.encode("hi").ids) == 3  # the file itself pads to 128
        assert len(tokenizer.encode(long_text).ids) == 302  # and truncates at 128
        assert tokenizer.encode(*SENTENCES).ids == from_dir.encode(*SENTENCES).ids

    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    assert load_tokenizer(tmp_path).encode("Hello").tokens != from_vocab.encode("Hello").tokens


def test_load_tokenizer_missing_names_the_path(tmp_path) -> None:
    with pytest.raises(PlmbenchError, match="no tokenizer at .*tokenizer.json.*vocab.txt") as info:
        load_tokenizer(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(info.value) and "\n" not in str(info.value)


def test_special_tokens_of_checkpoint_and_missing(minilm_path) -> None:
    assert SpecialTokens.of(load_tokenizer(minilm_path)) == SpecialTokens(0, 100, 101, 102, 103)
    word_level = Tokenizer(WordLevel({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "x": 3}, "[UNK]"))
    with pytest.raises(PlmbenchError, match=r"lacks special tokens \['\[SEP\]', '\[MASK\]'\]"):
        SpecialTokens.of(word_level)
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])}
    with pytest.raises(PlmbenchError, match=r"\['\[MASK\]'\]"):  # not silently appended
        bert_wordpiece_tokenizer(vocab)


def test_fingerprint_tracks_vocabulary_and_settings() -> None:
    first = train_wordpiece(CORPUS, vocab_size=80, min_frequency=1)
    same = train_wordpiece(CORPUS, vocab_size=80, min_frequency=1)
    smaller = train_wordpiece(CORPUS, vocab_size=60, min_frequency=1)
    assert first.get_vocab() == same.get_vocab()  # ids reproducible from run to run
    assert tokenizer_fingerprint(first) == tokenizer_fingerprint(same)
    assert len(tokenizer_fingerprint(first)) == 16
    assert tokenizer_fingerprint(first) != tokenizer_fingerprint(smaller)
    same.enable_truncation(16)
    assert tokenizer_fingerprint(first) != tokenizer_fingerprint(same)
