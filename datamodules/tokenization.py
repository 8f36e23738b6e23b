"""Subword tokenizers in three families, on the Hugging Face `tokenizers` fast path.

- wordpiece: Devlin et al. 2019 (BERT), §3: WordPiece (Wu et al. 2016, §4.1) behind BERT's
  BasicTokenizer (clean text, split CJK characters, optional lowercasing with accent stripping,
  split on whitespace and punctuation); continuations carry a "##" prefix.
- bpe: byte-level BPE, Sennrich et al. 2016 merges over the bytes of the text as GPT-2 does
  (Radford et al. 2019, §2.2), so nothing is unknown; a word's leading space is part of its first
  token ("Ġ"). RoBERTa, GPT-2 and BART use it.
- unigram: Kudo 2018's unigram language model over NFKC-normalized text, spaces as "▁"
  (SentencePiece's Metaspace); T5, ALBERT and XLNet use it.

Special tokens are found by role (pad, unk, cls/bos, sep/eos, mask), never by their strings: an
architecture's TokenizerSpec names them for scratch vocabularies, a checkpoint's own files name
them for pretrained ones (``datamodules.vocab_files``). The trainers number the learned tokens in
hash-map order, so every family is renumbered canonically: the spec's tokens first, in its order.
"""

import hashlib
import json
import os
import shutil
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from tokenizers.models import BPE, Unigram, WordPiece

from datamodules import spm_files, strict_json, vocab_files
from datamodules.errors import PlmbenchError
from datamodules.files import staging_dir

FAMILIES = ("wordpiece", "bpe", "unigram")
ROLES = tuple(vocab_files.ROLE_KEYS)  # pad, unk, cls, sep, mask
CONTINUATION_PREFIX = "##"
METASPACE = "▁"
BYTE_LEVEL_SPACE = "Ġ"  # the byte-level alphabet's stand-in for a space
_FAMILY_OF_MODEL = {"WordPiece": "wordpiece", "BPE": "bpe", "Unigram": "unigram"}


@dataclass(frozen=True)
class SpecialTokens:
    """Ids by role in one vocabulary; None where it has no token in that role."""

    pad: int
    unk: int | None
    cls: int | None  # cls / bos: starts a sequence
    sep: int | None  # sep / eos: ends a segment
    mask: int | None

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(i for i in (self.pad, self.unk, self.cls, self.sep, self.mask)
                         if i is not None)


@dataclass(frozen=True)
class TokenizerSpec:
    """What an architecture registers for its vocabularies: the family, its special tokens as
    (role, string) in id order, post-processing templates over role names ("cls $A sep",
    ``:1`` for segment ids), the transformers class named in tokenizer_config.json, special
    tokens of no role numbered after them (T5's sentinels <extra_id_0> ...), and the inputs the
    architecture's transformers models take (its tokenizer class's ``model_input_names``: token
    types only where the model reads segments), which an export's tokenizer returns."""

    family: str
    tokens: tuple[tuple[str, str], ...]
    single: str
    pair: str
    tokenizer_class: str
    extra: tuple[str, ...] = ()
    #: released vocabularies number the extra tokens after the model's pieces from the last to
    #: the first (T5: <extra_id_99> first, <extra_id_0> highest)
    extra_descending: bool = False
    #: a SentencePiece checkpoint's text cleanup and its defaults (ALBERT's, XLNet's
    #: ``preprocess_text``: ("do_lower_case", True), ("keep_accents", False)); None: none
    spm_preprocess: tuple[tuple[str, bool], ...] | None = None
    model_input_names: tuple[str, ...] = ("input_ids", "token_type_ids", "attention_mask")
    #: where transformers' batches put padding: XLNet's classifier reads the last position, its
    #: <cls>, so its tokenizer pads on the left
    padding_side: str = "right"


#: what transformers' BertTokenizer makes of a bare ``vocab.txt``: WordPiece with [CLS] A [SEP]
#: B [SEP] (segment ids 1 on B); BERT's own spec (``lit_models/archs/bert.py``)
VOCAB_TXT = TokenizerSpec(
    "wordpiece",
    (("pad", "[PAD]"), ("unk", "[UNK]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("mask", "[MASK]")),
    single="cls $A sep",
    pair="cls $A sep $B:1 sep:1",
    tokenizer_class="BertTokenizerFast",
)
#: what transformers' RobertaTokenizer makes of a bare ``vocab.json`` + ``merges.txt``: byte-level
#: BPE with <s> A </s></s> B </s> (one segment); RoBERTa's own spec (``archs/roberta.py``)
VOCAB_JSON = TokenizerSpec(
    "bpe",
    (("cls", "<s>"), ("pad", "<pad>"), ("sep", "</s>"), ("unk", "<unk>"), ("mask", "<mask>")),
    single="cls $A sep",
    pair="cls $A sep sep $B sep",
    tokenizer_class="RobertaTokenizerFast",
    model_input_names=("input_ids", "attention_mask"),  # one segment: no token types
)
#: the class a checkpoint without tokenizer_config.json's tokenizer_class is written back as
_DEFAULT_CLASS = {"wordpiece": VOCAB_TXT.tokenizer_class, "bpe": VOCAB_JSON.tokenizer_class,
                  "unigram": "T5TokenizerFast"}


def _json(backend: Tokenizer) -> dict[str, Any]:
    return json.loads(backend.to_str())


class TextTokenizer:
    """A ``tokenizers.Tokenizer`` (padding and truncation off: collation pads, datamodules
    truncate on a copy) with its family and the ids of its special tokens by role."""

    def __init__(self, backend: Tokenizer, family: str, special: SpecialTokens,
                 tokenizer_class: str) -> None:
        backend.no_padding()
        backend.no_truncation()
        self.backend, self.family, self.special = backend, family, special
        self.tokenizer_class = tokenizer_class

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size()

    @property
    def roles(self) -> dict[str, str]:
        """role -> token string, for the roles this vocabulary has."""
        ids = {role: getattr(self.special, role) for role in ROLES}
        return {role: self.backend.id_to_token(i) for role, i in ids.items() if i is not None}

    @property
    def fingerprint(self) -> str:
        """Short stable hash of the backend (vocabulary, pipeline) and the roles."""
        key = [self.backend.to_str(), self.family, self.roles]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]

    @property
    def lowercase(self) -> bool:
        """Whether the normalizer lowercases."""
        def lowers(normalizer: dict[str, Any] | None) -> bool:
            if not normalizer:
                return False
            if normalizer["type"] == "Sequence":
                return any(lowers(inner) for inner in normalizer["normalizers"])
            return normalizer["type"] == "Lowercase" or bool(normalizer.get("lowercase"))

        return lowers(_json(self.backend)["normalizer"])

    def check_room(self, max_length: int, segments: int = 1,
                   setting: str = "max_length") -> None:
        """``max_length`` holds the special tokens this tokenizer adds to ``segments`` texts (1 or
        2: a pair) and a token of each text; else one line naming ``setting`` and its minimum.
        (Below the special tokens the ``tokenizers`` library does not truncate at all; at them,
        it keeps no text, and a run would train on special tokens alone.)"""
        processor = self.backend.post_processor
        added = processor.num_special_tokens_to_add(segments == 2) if processor else 0
        least = added + segments
        if max_length < least:
            texts = "a pair of texts" if segments == 2 else "a text"
            empty = self.backend.encode("", "" if segments == 2 else None).tokens
            raise PlmbenchError(f"{setting}={max_length} leaves no room for text: this tokenizer "
                                f"adds {added} special tokens to {texts} ({' '.join(empty)}), so "
                                f"it must be at least {least} (a token of each text); raise it")

    def truncating(self, max_length: int, segments: int = 1,
                   setting: str = "max_length") -> Tokenizer:
        """A copy that truncates the longer segment first to ``max_length`` tokens, which must
        leave room for text in ``segments`` texts (``check_room``); no padding."""
        self.check_room(max_length, segments, setting)
        copy = Tokenizer.from_str(self.backend.to_str())
        copy.enable_truncation(max_length, strategy="longest_first")
        return copy

    def words_encoder(self, max_length: int, setting: str = "max_length") -> Tokenizer:
        """``truncating(max_length)`` for sentences given as words
        (``encode_batch(sentences, is_pretokenized=True)``), as transformers' token-classification
        recipe encodes them (``is_split_into_words=True``): each word on its own, a byte-level
        BPE's words each after a space (the recipe's ``add_prefix_space=True``), as they read
        inside a text; metaspace vocabularies mark every word already."""
        self.check_room(max_length, 1, setting)
        config = _json(self.backend)
        for step in _pre_tokenizer_steps(config["pre_tokenizer"]):
            if step["type"] == "ByteLevel":
                step["add_prefix_space"] = True
        copy = Tokenizer.from_str(json.dumps(config))
        copy.enable_truncation(max_length, strategy="longest_first")
        return copy

    def word_start_mask(self) -> torch.Tensor:
        """bool [vocab_size]: True where a token begins a word (wordpiece: no "##" prefix;
        byte-level BPE: "Ġ" first; metaspace: "▁" first) and on every special token."""
        vocab = self.backend.get_vocab()
        if self.family == "wordpiece":
            prefix = self.backend.model.continuing_subword_prefix
            starts = [i for token, i in vocab.items() if not token.startswith(prefix)]
        else:
            marker = _word_marker(_json(self.backend)["pre_tokenizer"])
            starts = [i for token, i in vocab.items() if token.startswith(marker)]
        specials = [i for i, t in self.backend.get_added_tokens_decoder().items() if t.special]
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        mask[[*starts, *specials, *self.special.ids]] = True
        return mask

    def punctuation_mask(self) -> torch.Tensor:
        """bool [vocab_size]: True where a token's text, its word marker and continuation prefix
        removed by the decoder, is punctuation only (Unicode categories P*); special tokens
        decode to nothing and are not."""
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        for i in range(self.vocab_size):
            text = self.backend.decode([i]).strip()
            mask[i] = bool(text) and all(unicodedata.category(c).startswith("P") for c in text)
        return mask


def _pre_tokenizer_steps(pre_tokenizer: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The steps of a (Sequence) pre-tokenizer's JSON, the objects themselves."""
    steps = [pre_tokenizer] if pre_tokenizer else []
    return [s for step in steps for s in step.get("pretokenizers", [step])]


def _word_marker(pre_tokenizer: dict[str, Any] | None) -> str:
    for step in _pre_tokenizer_steps(pre_tokenizer):
        if step["type"] == "Metaspace":
            return step["replacement"]
        if step["type"] == "ByteLevel":
            return BYTE_LEVEL_SPACE
    raise PlmbenchError(
        f"cannot tell where words start with pre-tokenizer {pre_tokenizer}; use a byte-level "
        "or metaspace pre-tokenizer"
    )


def _pipeline(backend: Tokenizer, family: str, lowercase: bool) -> Tokenizer:
    """The family's normalizer, pre-tokenizer and decoder (what the trainer sees, too)."""
    if family == "wordpiece":
        backend.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    elif family == "bpe":
        if lowercase:
            backend.normalizer = normalizers.Lowercase()
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
    else:
        nfkc = [normalizers.NFKC()]
        backend.normalizer = normalizers.Sequence(nfkc + [normalizers.Lowercase()] * lowercase)
        backend.pre_tokenizer = pre_tokenizers.Metaspace(METASPACE, prepend_scheme="always")
        backend.decoder = decoders.Metaspace(METASPACE, prepend_scheme="always")
    return backend


def _template(template: str, ids: dict[str, tuple[str, int]]) -> str:
    """Role names -> token strings in a template; "$A", "$B:1" and ":1" suffixes pass through."""
    pieces = []
    for piece in template.split():
        name, colon, type_id = piece.partition(":")
        if not name.startswith("$"):
            if name not in ids:
                raise PlmbenchError(
                    f"template {template!r} names role {name!r} but the vocabulary has only "
                    f"{sorted(ids)}; add ({name!r}, <token>) to the spec's tokens"
                )
            name = ids[name][0]
        pieces.append(name + colon + type_id)
    return " ".join(pieces)


def _assemble(backend: Tokenizer, spec: TokenizerSpec, where: str) -> TextTokenizer:
    """Tokenizer from a backend (model and pipeline) whose vocabulary holds the spec's tokens:
    special tokens (never split, skipped when decoding) and post-processing templates."""
    special = _special(backend, dict(spec.tokens), where)  # before add_special_tokens appends
    ids = {role: (token, getattr(special, role)) for role, token in spec.tokens}
    # a token that carries its leading space (Ġ / ▁) would leave that space before a mask
    # behind as a token of its own, so the mask eats it, as RoBERTa's and ALBERT's do
    backend.add_special_tokens([
        AddedToken(token, special=True, normalized=False,
                   lstrip=role == "mask" and spec.family != "wordpiece")
        for role, token in spec.tokens
    ] + [AddedToken(token, special=True, normalized=False) for token in spec.extra])
    template = processors.TemplateProcessing(
        single=_template(spec.single, ids),
        pair=_template(spec.pair, ids),
        special_tokens=list(ids.values()),
    )
    if spec.family == "bpe":  # offsets without the leading space, as RobertaProcessing trims
        template = processors.Sequence([processors.ByteLevel(trim_offsets=True), template])
    backend.post_processor = template
    return TextTokenizer(backend, spec.family, special, spec.tokenizer_class)


def _special(backend: Tokenizer, roles: dict[str, str], where: str) -> SpecialTokens:
    strange = sorted(set(roles) - set(ROLES))
    if strange:
        raise PlmbenchError(f"unknown special-token roles {strange}; use roles from {ROLES}")
    if "pad" not in roles:
        raise PlmbenchError(
            f"tokenizer at {where} names no pad token; add tokenizer_config.json with a "
            '"pad_token" (or a pad role to the spec)'
        )
    ids = {role: backend.token_to_id(token) for role, token in roles.items()}
    unknown = [roles[role] for role, i in ids.items() if i is None]
    if unknown:
        raise PlmbenchError(
            f"tokenizer at {where} lacks the special tokens {unknown} named for roles; add them "
            "to the vocabulary or name others in tokenizer_config.json / the spec"
        )
    return SpecialTokens(**{role: ids.get(role) for role in ROLES})


def _require_unk(spec: TokenizerSpec) -> str:
    unk = dict(spec.tokens).get("unk")
    if unk is None:
        raise PlmbenchError(f"{spec.family} vocabularies need an unknown token; add "
                            '("unk", <token>) to the spec\'s tokens')
    return unk


def train_tokenizer(spec: TokenizerSpec, texts: Iterable[str], vocab_size: int, lowercase: bool,
                    min_frequency: int = 2) -> TextTokenizer:
    """Learn a vocabulary of at most ``vocab_size`` tokens of the spec's family from ``texts``
    (unigram pruning has no frequency floor: ``min_frequency`` is for wordpiece and bpe)."""
    if spec.family not in FAMILIES:
        raise PlmbenchError(f"unknown tokenizer family {spec.family!r}; use one of {FAMILIES}")
    specials = [*(token for _, token in spec.tokens), *spec.extra]
    if spec.family == "wordpiece":
        learner = Tokenizer(WordPiece(unk_token=_require_unk(spec),
                                      continuing_subword_prefix=CONTINUATION_PREFIX))
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
            continuing_subword_prefix=CONTINUATION_PREFIX, show_progress=False)
    elif spec.family == "bpe":
        learner = Tokenizer(BPE())
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    else:
        learner = Tokenizer(Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials,
                                          unk_token=_require_unk(spec), show_progress=False)
    # the trainer sees normalized, pre-tokenized words, so the pipeline goes on first
    _pipeline(learner, spec.family, lowercase).train_from_iterator(texts, trainer=trainer)
    learned = _json(learner)["model"]
    if spec.family == "wordpiece":
        ordered = [*specials, *sorted(set(learned["vocab"]) - set(specials))]
        model = WordPiece({token: i for i, token in enumerate(ordered)}, unk_token=learned[
            "unk_token"], continuing_subword_prefix=CONTINUATION_PREFIX)
    elif spec.family == "bpe":  # the alphabet sorted, then each merge's token in merge order
        merges = [tuple(merge) for merge in learned["merges"]]
        merged = ["".join(merge) for merge in merges]
        alphabet = sorted(set(learned["vocab"]) - set(specials) - set(merged))
        ordered = list(dict.fromkeys([*specials, *alphabet, *merged]))
        model = BPE({token: i for i, token in enumerate(ordered)}, merges)
    else:  # the most probable pieces first, as SentencePiece numbers them. The EM sums scores
        # in hash-map order, so they are rounded above that float noise; the trainer still
        # spaces the scores of equally rare required characters in hash-map order, so their
        # few ids can differ between runs
        pieces = [(piece, round(score, 6)) for piece, score in learned["vocab"]
                  if piece not in specials]
        vocab = [(token, 0.0) for token in specials]
        vocab += sorted(pieces, key=lambda piece_score: (-piece_score[1], piece_score[0]))
        model = Unigram(vocab, unk_id=specials.index(_require_unk(spec)))
    return _assemble(_pipeline(Tokenizer(model), spec.family, lowercase), spec,
                     where="trained from texts")


def cache_root() -> Path:
    """``$PLMBENCH_CACHE``, else ``~/.cache/plmbench``."""
    root = os.environ.get("PLMBENCH_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "plmbench"


def cached_directory(namespace: str, key: str, write: Callable[[Path], None]) -> Path:
    """``cache_root()/<namespace>/<hash of key>/``, filled once by ``write(directory)``: written
    into a staging directory renamed into place (atomic: readers see all of it or none), so a
    cache hit never calls ``write``. ``key`` must change whenever what ``write`` writes does."""
    directory = cache_root() / namespace / hashlib.sha256(key.encode()).hexdigest()[:16]
    if not directory.is_dir():
        staging = staging_dir(directory)  # the user's umask, not mkdtemp's 0700
        try:
            write(staging)
            os.rename(staging, directory)
        except OSError:
            if not directory.is_dir():  # not a concurrent writer that got there first
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return directory


def scratch_tokenizer(spec: TokenizerSpec, texts: Callable[[], Iterable[str]], vocab_size: int,
                      lowercase: bool, corpus_key: str) -> TextTokenizer:
    """A vocabulary trained on ``texts()`` once per (corpus_key, spec, vocab_size, lowercase),
    kept under ``cache_root()/tokenizers/<hash>/`` in Hugging Face's layout; a cache hit never
    calls ``texts``. ``corpus_key`` must change whenever the texts do."""
    key = json.dumps([corpus_key, spec.family, spec.tokens, spec.single, spec.pair,
                      spec.tokenizer_class, vocab_size, lowercase]
                     + ([spec.extra] if spec.extra else []))  # others keep their cache keys
    return load_tokenizer(cached_directory("tokenizers", key, lambda staging: save_tokenizer(
        train_tokenizer(spec, texts(), vocab_size, lowercase), staging)))


def load_tokenizer(path: str | Path, spec: TokenizerSpec | None = None) -> TextTokenizer:
    """Tokenizer from a directory as Hugging Face writes it, or from a tokenizer.json file with
    its config files beside it: tokenizer.json; else the legacy files of the released
    checkpoints: a SentencePiece ``spiece.model`` or ``spm.model`` (T5, ALBERT, DeBERTa-v3;
    ``datamodules.spm_files``), a
    WordPiece vocab.txt (lowercasing from tokenizer_config.json's do_lower_case) or byte-level
    BPE's vocab.json + merges.txt. ``spec``, the architecture's (``from_hf`` passes it), gives
    legacy files their templates and default roles. Roles come from the tokenizer's own files,
    then the model's config.json (``datamodules.vocab_files``)."""
    path = Path(path)
    directory, file = (path, path / "tokenizer.json") if path.is_dir() else (path.parent, path)
    if not path.exists():
        raise _no_tokenizer(path)
    config = vocab_files.read_config(directory)
    roles = vocab_files.config_roles(config)
    ids = vocab_files.model_config_ids(directory)
    if file.is_file():
        backend = Tokenizer.from_file(str(file))
        model_roles = _roles_of_ids(backend, ids)
        roles = {**model_roles, **vocab_files.backend_roles(_json(backend)), **roles}
        family = _FAMILY_OF_MODEL.get(type(backend.model).__name__)
        if family is None:
            raise PlmbenchError(f"{file} holds a {type(backend.model).__name__} model; use a "
                                f"WordPiece, BPE or Unigram tokenizer")
        special = _special(backend, vocab_files.with_pad(roles, model_roles), str(directory))
        return TextTokenizer(backend, family, special,
                             config.get("tokenizer_class", _DEFAULT_CLASS[family]))
    if spm_files.model_file(directory) is not None:
        return _sentencepiece(directory, spec, config, roles, ids)
    legacy = VOCAB_TXT if (directory / "vocab.txt").is_file() else VOCAB_JSON
    if spec is not None and spec.family == legacy.family:
        legacy = spec
    if legacy.family == "wordpiece":
        model = WordPiece(WordPiece.read_file(str(directory / "vocab.txt")),
                          unk_token=_require_unk(legacy),
                          continuing_subword_prefix=CONTINUATION_PREFIX)
        lowercase = config.get("do_lower_case", True)
    elif (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
        model = BPE.from_file(str(directory / "vocab.json"), str(directory / "merges.txt"))
        lowercase = False
    else:
        raise _no_tokenizer(path)
    backend = _pipeline(Tokenizer(model), legacy.family, lowercase)
    return _assemble(backend, _with_roles(legacy, roles, _roles_of_ids(backend, ids), config),
                     str(directory))


def _roles_of_ids(backend: Tokenizer, ids: dict[str, int]) -> dict[str, str]:
    """role -> token string of the model config's special ids the vocabulary has."""
    tokens = {role: backend.id_to_token(i) for role, i in ids.items()}
    return {role: token for role, token in tokens.items() if token is not None}


def _with_roles(spec: TokenizerSpec, roles: dict[str, str], model_roles: dict[str, str],
                config: dict, *lower: dict[str, str]) -> TokenizerSpec:
    """``spec`` with the checkpoint's roles over its defaults (the tokenizer's config files
    first, then the model config's ids, then ``lower``: what the vocabulary file itself says),
    and the tokenizer class its config names."""
    merged = {**dict(spec.tokens), **{k: v for d in lower for k, v in d.items()},
              **model_roles, **roles}
    merged = vocab_files.with_pad(merged, model_roles)
    return replace(spec, tokens=tuple(merged.items()),
                   tokenizer_class=config.get("tokenizer_class", spec.tokenizer_class))


#: a SentencePiece directory of no known architecture: its roles, no template
_PLAIN_UNIGRAM = TokenizerSpec("unigram", (), single="$A", pair="$A $B:1",
                               tokenizer_class="PreTrainedTokenizerFast")


def _sentencepiece(directory: Path, spec: TokenizerSpec | None, config: dict,
                   roles: dict[str, str], ids: dict[str, int]) -> TextTokenizer:
    """A SentencePiece model directory: the SentencePiece pipeline (``spm_files``) with the
    architecture's preprocessing, extra tokens and templates. A role's token the model lacks
    (DeBERTa-v3's [MASK]) is numbered after its pieces, as transformers adds it."""
    spec = spec if spec is not None and spec.family == "unigram" else _PLAIN_UNIGRAM
    preprocess = None
    if spec.spm_preprocess is not None:
        preprocess = {key: config.get(key, default) for key, default in spec.spm_preprocess}
    extra = spec.extra[::-1] if spec.extra_descending else spec.extra
    file = spm_files.model_file(directory)
    proto = spm_files.read_model(file)
    absent = [token for token in {**dict(spec.tokens), **roles}.values()
              if token not in spm_files.pieces(proto) and token not in extra]
    backend = spm_files.spm_tokenizer(file, preprocess, (*absent, *extra))
    proto_roles = spm_files.proto_roles(proto)
    full = _with_roles(replace(spec, extra=()), roles, _roles_of_ids(backend, ids), config,
                       proto_roles)
    return _assemble(backend, full, str(directory))


def _no_tokenizer(path: Path) -> PlmbenchError:
    return PlmbenchError(
        f"no tokenizer at {path}: expected a tokenizer.json file or a directory with "
        "tokenizer.json, vocab.txt or vocab.json + merges.txt; point the tokenizer path at one"
    )


def save_tokenizer(tok: TextTokenizer, directory: Path, max_length: int | None = None,
                   spec: TokenizerSpec | None = None) -> None:
    """Write ``tok`` as transformers' ``AutoTokenizer.from_pretrained(directory)`` loads it:
    tokenizer.json, tokenizer_config.json (class, ``model_max_length`` unless None, roles; with
    the architecture's ``spec``, an export's, the ``model_input_names`` its models take and the
    ``padding_side`` they read batches with), special_tokens_map.json and the family's legacy
    files (vocab.txt; vocab.json + merges.txt).

    transformers 5's model classes (RobertaTokenizer, T5Tokenizer, ...) rebuild their own
    normalizer and pre-tokenizer around the vocabulary. Where that would encode differently from
    ours (a lowercasing byte-level BPE; every unigram pipeline, ours being NFKC rather than
    SentencePiece's charsmap) the config names PreTrainedTokenizerFast, which loads
    tokenizer.json as it is."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok.backend.save(str(directory / "tokenizer.json"))
    rebuilt_differently = tok.family == "unigram" or (tok.family == "bpe" and tok.lowercase)
    tokenizer_class = "PreTrainedTokenizerFast" if rebuilt_differently else tok.tokenizer_class
    config = vocab_files.hf_config(tok.roles, tokenizer_class, tok.family, tok.lowercase,
                                   max_length)
    if spec is not None:
        config |= {"model_input_names": list(spec.model_input_names),
                   "padding_side": spec.padding_side}
    tokens = vocab_files.special_tokens_map(tok.roles, tok.family)
    for name, content in ((vocab_files.CONFIG_FILE, config), (vocab_files.MAP_FILE, tokens)):
        text = strict_json.dumps(content, indent=2, ensure_ascii=False)
        (directory / name).write_text(text + "\n", encoding="utf-8")
    if tok.family != "unigram":  # SentencePiece's binary model file is not ours to write
        tok.backend.model.save(str(directory))


def tokenizer_fingerprint(tokenizer: TextTokenizer | Tokenizer) -> str:
    """Short stable hash of the whole tokenizer (vocabulary, pipeline, roles where known, and a
    bare backend's truncation settings)."""
    if isinstance(tokenizer, TextTokenizer):
        return tokenizer.fingerprint
    return hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:16]
