"""BERT WordPiece tokenization on the Hugging Face `tokenizers` fast path.

Devlin et al. 2019 (BERT), §3 "Input/Output Representations": WordPiece embeddings (Wu et al.
2016, §4.1) with a 30,000-token vocabulary; every sequence starts with [CLS], sentence pairs are
packed as "[CLS] A [SEP] B [SEP]" with segment (token type) ids 0 for A and 1 for B.
The normalizer / pre-tokenizer reproduce BERT's BasicTokenizer (clean text, split CJK
characters, optional lowercasing with accent stripping, split on whitespace and punctuation).
"""

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import WordPiece

from datamodules.errors import PlmbenchError

#: BERT's special tokens, in the id order train_wordpiece gives them ([PAD] = 0).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CONTINUATION_PREFIX = "##"


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of BERT's special tokens in one vocabulary."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> "SpecialTokens":
        ids = {f.name: tokenizer.token_to_id(f"[{f.name.upper()}]") for f in fields(cls)}
        missing = [f"[{name.upper()}]" for name, i in ids.items() if i is None]
        if missing:
            raise PlmbenchError(
                f"tokenizer vocabulary lacks special tokens {missing}; use a BERT-style WordPiece "
                f"vocabulary with {list(SPECIAL_TOKENS)} (e.g. train one with train_wordpiece)"
            )
        return cls(**ids)


def _bert_pipeline(tokenizer: Tokenizer, lowercase: bool) -> Tokenizer:
    """Attach BERT's normalizer, pre-tokenizer, [CLS]/[SEP] template and decoder."""
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = SpecialTokens.of(tokenizer)  # checked before add_special_tokens could append them
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))  # never split, skipped when decoding
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", special.cls), ("[SEP]", special.sep)],
    )
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    return tokenizer


def train_wordpiece(
    texts: Iterable[str], vocab_size: int, lowercase: bool = True, min_frequency: int = 2
) -> Tokenizer:
    """Learn a WordPiece vocabulary of at most ``vocab_size`` tokens from ``texts``."""
    model = WordPiece(unk_token="[UNK]", continuing_subword_prefix=CONTINUATION_PREFIX)
    learner = Tokenizer(model)
    # the trainer sees the normalized, pre-tokenized words, so the pipeline goes on first
    learner.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    learner.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix=CONTINUATION_PREFIX,
    )
    learner.train_from_iterator(texts, trainer=trainer)
    # The learned token set is deterministic but the trainer numbers it in hash-map order, so
    # ids would differ between runs; renumber canonically (specials first, then sorted).
    learned = set(learner.get_vocab()) - set(SPECIAL_TOKENS)
    ordered = [*SPECIAL_TOKENS, *sorted(learned)]
    return bert_wordpiece_tokenizer({token: i for i, token in enumerate(ordered)}, lowercase)


def bert_wordpiece_tokenizer(
    vocab: dict[str, int] | str | Path, lowercase: bool = True
) -> Tokenizer:
    """BERT tokenizer from a token -> id mapping or a ``vocab.txt`` (one token per line)."""
    if not isinstance(vocab, dict):
        if not Path(vocab).is_file():
            raise PlmbenchError(f"vocabulary file {vocab} not found; pass a BERT vocab.txt path")
        vocab = WordPiece.read_file(str(vocab))
    model = WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix=CONTINUATION_PREFIX)
    return _bert_pipeline(Tokenizer(model), lowercase)


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Tokenizer from a ``tokenizer.json`` file, or a directory holding ``tokenizer.json`` or a
    ``vocab.txt`` (lowercasing then read from ``tokenizer_config.json``'s ``do_lower_case``).
    Padding and truncation are switched off: collation pads, datamodules truncate on a copy."""
    path = Path(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    if file.is_file():
        tokenizer = Tokenizer.from_file(str(file))
    elif (path / "vocab.txt").is_file():
        config = path / "tokenizer_config.json"
        settings = json.loads(config.read_text()) if config.is_file() else {}
        lowercase = settings.get("do_lower_case", True)
        tokenizer = bert_wordpiece_tokenizer(path / "vocab.txt", lowercase)
    else:
        raise PlmbenchError(
            f"no tokenizer at {path}: expected a tokenizer.json file or a directory with "
            "tokenizer.json or vocab.txt; point the model's tokenizer path at one"
        )
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """Short stable hash of the whole tokenizer (vocabulary, pipeline, truncation settings)."""
    return hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:16]
