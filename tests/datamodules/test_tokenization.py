"""Tokenizer families: training, special tokens by role, loading / saving in Hugging Face's layout
(transformers' AutoTokenizer as the oracle), word starts, the scratch cache, fingerprints."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from tokenizers import Tokenizer, processors

from datamodules.errors import PlmbenchError
from datamodules.sources import load_split
from datamodules.tokenization import (
    VOCAB_JSON,
    VOCAB_TXT,
    SpecialTokens,
    TextTokenizer,
    TokenizerSpec,
    load_tokenizer,
    save_tokenizer,
    scratch_tokenizer,
    tokenizer_fingerprint,
    train_tokenizer,
)
from tests.conftest import require

T5 = TokenizerSpec(
    "unigram", (("pad", "<pad>"), ("sep", "</s>"), ("unk", "<unk>")),
    single="$A sep", pair="$A sep $B sep", tokenizer_class="T5TokenizerFast",
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
#: real-text probes for the families: accents, CJK, doubled spaces, each family's mask string
PROBES = [
    "Héllo, World! it's a  naïve café in 東京, <mask> [MASK] .",
    "the movie is n't <mask> bad , just [MASK] dull .",
]


def _save_and_reload(tokenizer: TextTokenizer, directory: Path) -> TextTokenizer:
    save_tokenizer(tokenizer, directory, max_length=128)
    return load_tokenizer(directory)


def _assert_encodes_like_transformers(ours: TextTokenizer, directory: Path, texts) -> None:
    auto = require("transformers").AutoTokenizer.from_pretrained(directory)
    for args in [*((text,) for text in texts), tuple(texts)]:
        expected = auto(*args)
        encoding = ours.backend.encode(*args)
        assert encoding.ids == expected["input_ids"], args
        if "token_type_ids" in expected:
            assert encoding.type_ids == expected["token_type_ids"]


def test_train_wordpiece_vocab_template_and_round_trip() -> None:
    tokenizer = train_tokenizer(VOCAB_TXT, CORPUS, vocab_size=80, lowercase=True, min_frequency=1)
    vocab = tokenizer.backend.get_vocab()
    assert tokenizer.vocab_size == len(vocab) <= 80
    assert [vocab[token] for _, token in VOCAB_TXT.tokens] == [0, 1, 2, 3, 4]  # [PAD] = 0
    assert tokenizer.special == SpecialTokens(pad=0, unk=1, cls=2, sep=3, mask=4)
    assert tokenizer.special.ids == frozenset(range(5))
    assert tokenizer.family == "wordpiece" and tokenizer.lowercase
    assert any(token.startswith("##") for token in vocab)

    text = "The quickest foxes jumping over lazy dogs"
    encoding = tokenizer.backend.encode(text)
    assert encoding.tokens[0] == "[CLS]" and encoding.tokens[-1] == "[SEP]"
    assert "[UNK]" not in encoding.tokens
    assert any(token.startswith("##") for token in encoding.tokens)  # some word was split
    assert tokenizer.backend.decode(encoding.ids) == text.lower()  # BERT normalizer lowercases

    pair = tokenizer.backend.encode("quick fox", "lazy dog")
    assert pair.tokens == ["[CLS]", "quick", "fox", "[SEP]", "lazy", "dog", "[SEP]"]
    assert pair.type_ids == [0, 0, 0, 0, 1, 1, 1]  # "$B:1 sep:1"
    assert tokenizer.backend.encode("zebra").tokens == ["[CLS]", "[UNK]", "[SEP]"]


def test_train_wordpiece_keeps_case_when_asked() -> None:
    tokenizer = train_tokenizer(VOCAB_TXT, CORPUS, vocab_size=120, lowercase=False, min_frequency=1)
    assert "The" in tokenizer.backend.get_vocab() and not tokenizer.lowercase
    assert tokenizer.backend.decode(tokenizer.backend.encode("The fox").ids) == "The fox"


def test_roberta_pair_template_and_mask_eats_its_space() -> None:
    tokenizer = train_tokenizer(VOCAB_JSON, CORPUS, vocab_size=300, lowercase=False,
                                min_frequency=1)
    assert tokenizer.special == SpecialTokens(pad=1, unk=3, cls=0, sep=2, mask=4)
    a, b = ("quick fox", "lazy dog")
    pair = tokenizer.backend.encode(a, b)
    bare = [tokenizer.backend.encode(text, add_special_tokens=False).tokens for text in (a, b)]
    assert pair.tokens == ["<s>", *bare[0], "</s>", "</s>", *bare[1], "</s>"]
    assert pair.type_ids == [0] * len(pair.ids)
    masked = tokenizer.backend.encode("the <mask> fox")
    assert masked.ids[1:-1] == [tokenizer.backend.token_to_id("the"), 4,
                                tokenizer.backend.token_to_id("Ġfox")]  # no lone "Ġ" before it
    assert tokenizer.backend.encode("the <mask>").offsets[2] == (4, 10)  # trimmed, as RoBERTa's


def test_template_naming_a_role_the_spec_lacks() -> None:
    with pytest.raises(PlmbenchError, match=r"names role 'cls'.*add \('cls', <token>\)"):
        train_tokenizer(replace(T5, single="cls $A sep"), CORPUS, 60, lowercase=True)
    with pytest.raises(PlmbenchError, match="need an unknown token"):
        no_unk = VOCAB_TXT.tokens[:1] + VOCAB_TXT.tokens[2:]
        train_tokenizer(replace(VOCAB_TXT, tokens=no_unk), CORPUS, 60, lowercase=True)


@pytest.mark.parametrize(
    ("spec", "lowercase"),
    [(VOCAB_TXT, True), (VOCAB_TXT, False), (VOCAB_JSON, False), (VOCAB_JSON, True), (T5, True)],
    ids=["wordpiece-uncased", "wordpiece-cased", "bpe-cased", "bpe-uncased", "unigram"],
)
def test_family_trains_on_real_text_and_round_trips(mirror, tmp_path, spec, lowercase) -> None:
    texts = load_split("glue", "sst2", "train", ["sentence"])["sentence"][:20000]
    tokenizer = train_tokenizer(spec, texts, vocab_size=2000, lowercase=lowercase)
    assert tokenizer.vocab_size == 2000 and tokenizer.family == spec.family
    assert tokenizer.lowercase == lowercase
    assert [tokenizer.roles[role] for role, _ in spec.tokens] == [t for _, t in spec.tokens]
    assert sorted(tokenizer.special.ids) == list(range(len(spec.tokens)))  # spec's tokens first
    unk = tokenizer.special.unk
    assert unk not in tokenizer.backend.encode(texts[0]).ids  # trained on it: all known

    reloaded = _save_and_reload(tokenizer, tmp_path)
    assert reloaded.special == tokenizer.special and reloaded.family == tokenizer.family
    assert reloaded.fingerprint == tokenizer.fingerprint
    batch = [*PROBES, tuple(PROBES), *texts[:50]]
    assert [e.ids for e in reloaded.backend.encode_batch(batch)] == [
        e.ids for e in tokenizer.backend.encode_batch(batch)
    ]
    _assert_encodes_like_transformers(tokenizer, tmp_path, PROBES)
    _assert_encodes_like_transformers(tokenizer, tmp_path, texts[100:102])


def test_training_is_reproducible_and_fingerprinted() -> None:
    for spec, size in ((VOCAB_TXT, 80), (VOCAB_JSON, 300)):  # byte-level BPE starts from 256 bytes
        first, same = (train_tokenizer(spec, CORPUS, size, True, min_frequency=1) for _ in "ab")
        assert first.backend.get_vocab() == same.backend.get_vocab()  # ids run to run
        assert tokenizer_fingerprint(first) == first.fingerprint == same.fingerprint
        assert len(first.fingerprint) == 16
        smaller = train_tokenizer(spec, CORPUS, size - 20, True, min_frequency=1)
        assert smaller.fingerprint != first.fingerprint
    # a bare backend: its truncation settings count, as the datamodules' encoders carry them
    truncating = first.truncating(16)
    assert truncating.truncation["max_length"] == 16 and first.backend.truncation is None
    assert truncating.truncation["strategy"] == "longest_first" and truncating.padding is None
    assert tokenizer_fingerprint(truncating) != tokenizer_fingerprint(first.backend)
    renamed = TextTokenizer(first.backend, first.family, replace(first.special, pad=2),
                            first.tokenizer_class)
    assert renamed.fingerprint != first.fingerprint  # roles are part of it


@pytest.mark.parametrize(
    ("spec", "starts", "continues"),
    [(VOCAB_TXT, ["the", "a"], ["##s", "##e"]), (VOCAB_JSON, ["Ġ", "Ġthe"], ["s", "the"]),
     (T5, ["▁", "▁the"], ["s", "e"])],
    ids=["wordpiece", "bpe", "unigram"],
)
def test_word_start_mask(mirror, spec, starts, continues) -> None:
    texts = load_split("glue", "sst2", "train", ["sentence"])["sentence"][:5000]
    tokenizer = train_tokenizer(spec, texts, vocab_size=800, lowercase=True)
    mask = tokenizer.word_start_mask()
    assert mask.shape == (tokenizer.vocab_size,) and mask.dtype.is_floating_point is False
    ids = tokenizer.backend.token_to_id
    assert [bool(mask[ids(token)]) for token in starts] == [True] * len(starts)
    assert [bool(mask[ids(token)]) for token in continues] == [False] * len(continues)
    assert all(mask[i] for i in tokenizer.special.ids)
    assert len(tokenizer.special.ids) < int(mask.sum()) < tokenizer.vocab_size


def test_roles_come_from_the_config_files(tmp_path) -> None:
    saved = tmp_path / "roberta"
    tokenizer = train_tokenizer(VOCAB_JSON, CORPUS, vocab_size=300, lowercase=False)
    save_tokenizer(tokenizer, saved, max_length=64)
    config = json.loads((saved / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "RobertaTokenizerFast" and config["model_max_length"] == 64
    assert (config["bos_token"], config["eos_token"]) == ("<s>", "</s>")
    # GPT-2 practice: pad with the end token. special_tokens_map.json overrides the config, as
    # in transformers, so it goes too; a dict value is an AddedToken
    config["pad_token"] = {"content": "</s>", "lstrip": False}
    (saved / "tokenizer_config.json").write_text(json.dumps(config))
    kept_map = (saved / "special_tokens_map.json").read_text()
    (saved / "special_tokens_map.json").unlink()
    assert load_tokenizer(saved).special == replace(tokenizer.special, pad=tokenizer.special.sep)
    (saved / "special_tokens_map.json").write_text(kept_map)
    assert load_tokenizer(saved).special == tokenizer.special

    del config["cls_token"], config["sep_token"]  # bos / eos stand in for them
    config.update(bos_token="</s>", eos_token="<s>")
    (saved / "tokenizer_config.json").write_text(json.dumps(config))
    (saved / "special_tokens_map.json").unlink()
    swapped = load_tokenizer(saved).special
    assert (swapped.cls, swapped.sep) == (tokenizer.special.sep, tokenizer.special.cls)

    config["mask_token"] = "<nowhere>"
    (saved / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(PlmbenchError, match=r"lacks the special tokens \['<nowhere>'\]"):
        load_tokenizer(saved)


def test_roles_from_tokenizer_json_alone(tmp_path) -> None:
    for spec, lowercase in ((VOCAB_TXT, True), (VOCAB_JSON, False), (T5, False)):
        tokenizer = train_tokenizer(spec, CORPUS, vocab_size=300, lowercase=lowercase)
        directory = tmp_path / spec.family
        save_tokenizer(tokenizer, directory, max_length=64)
        (directory / "tokenizer_config.json").unlink()
        (directory / "special_tokens_map.json").unlink()
        with pytest.raises(PlmbenchError, match="names no pad token; add tokenizer_config.json"):
            load_tokenizer(directory)
        backend = tokenizer.truncating(64)
        backend.enable_padding(pad_id=tokenizer.special.pad, pad_token=tokenizer.roles["pad"])
        backend.save(str(directory / "tokenizer.json"))
        loaded = load_tokenizer(directory / "tokenizer.json")
        # cls / sep from the post-processor's template, unk from the model (byte-level BPE
        # needs none and names none), pad from padding; nothing there says which token masks
        unk = None if spec.family == "bpe" else tokenizer.special.unk
        assert loaded.special == replace(tokenizer.special, mask=None, unk=unk)
        assert loaded.backend.padding is None and loaded.backend.truncation is None

    roberta = Tokenizer.from_str(tokenizer.backend.to_str())  # RobertaProcessing, as released
    roberta.post_processor = processors.RobertaProcessing(("</s>", 1), ("<pad>", 0))
    roberta.enable_padding(pad_id=2, pad_token="<unk>")
    roberta.save(str(tmp_path / "tokenizer.json"))
    assert load_tokenizer(tmp_path).special == SpecialTokens(pad=2, unk=2, cls=0, sep=1,
                                                             mask=None)


def test_scratch_tokenizer_is_cached_by_key(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PLMBENCH_CACHE", str(tmp_path / "cache"))
    calls = []

    def corpus():
        calls.append(1)
        return iter(CORPUS)

    def no_corpus():
        raise AssertionError("a cache hit must not read the corpus")

    first = scratch_tokenizer(VOCAB_JSON, corpus, vocab_size=300, lowercase=False, corpus_key="toy")
    again = scratch_tokenizer(VOCAB_JSON, no_corpus, 300, lowercase=False, corpus_key="toy")
    assert len(calls) == 1
    assert again.backend.get_vocab() == first.backend.get_vocab()
    assert again.fingerprint == first.fingerprint and again.special == first.special
    [entry] = (tmp_path / "cache" / "tokenizers").iterdir()  # no partial directories left
    assert (entry / "tokenizer.json").is_file()

    scratch_tokenizer(VOCAB_JSON, corpus, vocab_size=280, lowercase=False, corpus_key="toy")
    scratch_tokenizer(VOCAB_JSON, corpus, vocab_size=300, lowercase=False, corpus_key="other")
    scratch_tokenizer(VOCAB_TXT, corpus, vocab_size=300, lowercase=False, corpus_key="toy")
    assert len(calls) == 4
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 4


def test_minilm_checkpoint_roles_and_encoding(minilm_path, tmp_path) -> None:
    tokenizer = load_tokenizer(minilm_path)
    assert tokenizer.special == SpecialTokens(pad=0, unk=100, cls=101, sep=102, mask=103)
    assert tokenizer.family == "wordpiece" and tokenizer.lowercase
    assert tokenizer.tokenizer_class == "BertTokenizer"
    assert "[MASK]" in tokenizer.backend.encode(SENTENCES[1]).tokens  # never split
    _assert_encodes_like_transformers(tokenizer, minilm_path, SENTENCES)
    resaved = _save_and_reload(tokenizer, tmp_path)
    assert resaved.fingerprint == tokenizer.fingerprint
    _assert_encodes_like_transformers(tokenizer, tmp_path, SENTENCES)


def test_load_tokenizer_file_dir_and_vocab_only_dir(minilm_path, tmp_path) -> None:
    reference = Tokenizer.from_file(str(minilm_path / "tokenizer.json"))
    reference.no_padding()
    from_dir = load_tokenizer(minilm_path)
    from_file = load_tokenizer(minilm_path / "tokenizer.json")
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_path / name, tmp_path / name)
    from_vocab = load_tokenizer(tmp_path)
    assert from_vocab.special == from_dir.special == from_file.special
    long_text = " ".join(["word"] * 300)
    batch = [*SENTENCES, tuple(SENTENCES)]
    for tokenizer in (from_dir, from_file, from_vocab):
        backend = tokenizer.backend
        assert backend.padding is None and backend.truncation is None
        assert len(backend.encode("hi").ids) == 3  # the file itself pads to 128
        assert len(backend.encode(long_text).ids) == 302  # and truncates at 128
        for a, b in zip(backend.encode_batch(batch), reference.encode_batch(batch), strict=True):
            assert a.ids == b.ids and a.type_ids == b.type_ids and a.offsets == b.offsets

    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    cased = load_tokenizer(tmp_path)
    assert not cased.lowercase and cased.backend.encode("Hello").tokens != (
        from_vocab.backend.encode("Hello").tokens)

    vocab = (tmp_path / "vocab.txt").read_text().splitlines()
    (tmp_path / "vocab.txt").write_text("\n".join(t for t in vocab if t != "[MASK]"))
    with pytest.raises(PlmbenchError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        load_tokenizer(tmp_path)  # checked, not silently appended


def test_load_tokenizer_missing_names_the_path(tmp_path) -> None:
    with pytest.raises(PlmbenchError, match="no tokenizer at .*tokenizer.json.*vocab.txt") as info:
        load_tokenizer(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(info.value) and "\n" not in str(info.value)


def test_load_byte_level_bpe_from_vocab_and_merges(tmp_path) -> None:
    tokenizer = train_tokenizer(VOCAB_JSON, CORPUS, vocab_size=300, lowercase=False)
    save_tokenizer(tokenizer, tmp_path, max_length=64)
    (tmp_path / "tokenizer.json").unlink()  # as older RoBERTa / GPT-2 checkpoints ship
    legacy = load_tokenizer(tmp_path)
    assert legacy.special == tokenizer.special and legacy.family == "bpe"
    batch = [*CORPUS[:4], "the <mask> fox", tuple(CORPUS[:2])]
    assert [e.ids for e in legacy.backend.encode_batch(batch)] == [
        e.ids for e in tokenizer.backend.encode_batch(batch)
    ]


@pytest.mark.parametrize("spec", [VOCAB_TXT, VOCAB_JSON, T5], ids=["bert", "roberta", "t5"])
def test_a_max_length_with_no_room_for_text_is_refused_with_its_minimum(spec, tmp_path) -> None:
    """The minimum is the special tokens transformers adds (``num_special_tokens_to_add``, the
    oracle) plus a token per text; at it every text keeps a token, below it the ``tokenizers``
    library would not truncate at all (or keep no text), so it is refused in one line."""
    tokenizer = train_tokenizer(spec, CORPUS, vocab_size=120 if spec is VOCAB_TXT else 300,
                                lowercase=False, min_frequency=1)
    save_tokenizer(tokenizer, tmp_path)
    auto = require("transformers").AutoTokenizer.from_pretrained(tmp_path)
    for segments, texts in ((1, ("quick fox jumps",)), (2, ("quick fox jumps", "lazy dog"))):
        least = auto.num_special_tokens_to_add(pair=segments == 2) + segments
        encoder = tokenizer.truncating(least, segments, "task.max_length")
        encoding = encoder.encode(*texts)
        assert len(encoding.ids) == least and set(encoding.type_ids) <= {0, 1}
        kept = [tokenizer.backend.encode(text, add_special_tokens=False).ids[0] for text in texts]
        assert all(token in encoding.ids for token in kept)  # a token of each text
        with pytest.raises(PlmbenchError, match=rf"task.max_length={least - 1} leaves no room "
                           rf"for text: this tokenizer adds {least - segments} special tokens "
                           rf".* it must be at least {least} \(a token of each text\)"):
            tokenizer.truncating(least - 1, segments, "task.max_length")
    with pytest.raises(PlmbenchError, match="at least"):  # words, one text each
        tokenizer.words_encoder(auto.num_special_tokens_to_add(pair=False), "task.max_length")
