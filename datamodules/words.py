"""Words: the unit of static word vectors (word2vec, GloVe), of ELMo's biLM and of the BiLSTM
baselines, where the Transformers read sub-words.

Text is split into words by ``tokenizers``' BERT pipeline (``BertNormalizer``: control characters
removed, CJK characters spaced, optional lowercasing without accent stripping; then
``BertPreTokenizer``: whitespace, and every punctuation character a word of its own), the
tokenization the Transformer baselines' BasicTokenizer applies before WordPiece. A
``WordVocabulary`` is a ``tokenizers`` WordLevel model trained by ``WordLevelTrainer`` (the most
frequent words first, at least ``min_count`` occurrences, at most ``max_size`` words including
the special ones) plus each word's corpus count: word2vec's subsampling, GloVe's vocabulary and
the frequency restriction of analogy evaluation read them. A word outside the vocabulary encodes
as ``<unk>``; ``words`` gives the surface forms (ELMo spells every word, known or not).
"""

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, normalizers, pre_tokenizers, trainers
from tokenizers.models import WordLevel

from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.tokenization import cached_directory

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<S>", "</S>"  # ELMo's sentence markers <S> and </S>
SPECIALS = (PAD, UNK, BOS, EOS)
COUNTS_FILE = "word_counts.json"
TOKENIZER_FILE = "tokenizer.json"


def word_pipeline(lowercase: bool) -> Tokenizer:
    """A WordLevel tokenizer with no vocabulary yet: the normalizer and pre-tokenizer only."""
    backend = Tokenizer(WordLevel(unk_token=UNK))
    backend.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                    strip_accents=False, lowercase=lowercase)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return backend


def split_words(texts: Sequence[str], lowercase: bool) -> list[list[str]]:
    """Each text as its (normalized) words."""
    backend = word_pipeline(lowercase)
    return [[word for word, _ in backend.pre_tokenizer.pre_tokenize_str(
        backend.normalizer.normalize_str(text))] for text in texts]


class WordVocabulary:
    """Words by id (specials first, then by falling corpus count), their counts, and the
    tokenizer that encodes text into them."""

    def __init__(self, backend: Tokenizer, counts: Sequence[int], lowercase: bool) -> None:
        backend.no_padding()
        backend.no_truncation()
        self.backend, self.lowercase = backend, lowercase
        vocab = backend.get_vocab()
        self.words = sorted(vocab, key=vocab.__getitem__)
        missing = [token for token in SPECIALS if token not in vocab]
        if missing:
            raise PlmbenchError(f"word vocabulary lacks {missing}; build it with "
                                "WordVocabulary.train or from_words")
        if len(counts) != len(self.words):
            raise PlmbenchError(f"word vocabulary of {len(self.words)} words has "
                                f"{len(counts)} counts; rebuild it")
        self.counts = np.asarray(counts, dtype=np.int64)
        self.pad, self.unk, self.bos, self.eos = (vocab[token] for token in SPECIALS)
        self.index = vocab

    def __len__(self) -> int:
        return len(self.words)

    @property
    def fingerprint(self) -> str:
        """Short stable hash of the words, their counts and the pipeline."""
        key = [self.backend.to_str(), self.counts.tolist()]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]

    @classmethod
    def from_words(cls, words: Sequence[str], counts: Sequence[int] | None,
                   lowercase: bool) -> "WordVocabulary":
        """The vocabulary of ``words`` in this order after the specials (those among ``words``
        keep the specials' places), with their counts (zero where None)."""
        counts = [0] * len(words) if counts is None else list(counts)
        kept = [(w, c) for w, c in zip(words, counts, strict=True) if w not in SPECIALS]
        ordered = [*SPECIALS, *(w for w, _ in kept)]
        backend = word_pipeline(lowercase)
        backend.model = WordLevel({w: i for i, w in enumerate(ordered)}, unk_token=UNK)
        return cls(backend, [0] * len(SPECIALS) + [c for _, c in kept], lowercase)

    @classmethod
    def train(cls, texts: Callable[[], Iterable[str]], max_size: int | None, min_count: int,
              lowercase: bool) -> "WordVocabulary":
        """The ``max_size`` most frequent words of ``texts()`` (read twice: to learn, to count)
        seen at least ``min_count`` times."""
        backend = word_pipeline(lowercase)
        trainer = trainers.WordLevelTrainer(
            vocab_size=max_size or 2**31 - 1, min_frequency=min_count,
            special_tokens=list(SPECIALS), show_progress=False)
        backend.train_from_iterator(texts(), trainer=trainer)
        counts = np.zeros(backend.get_vocab_size(), dtype=np.int64)
        for batch in _batches(texts(), 4096):
            ids = [np.asarray(e.ids) for e in backend.encode_batch(batch, add_special_tokens=False)]
            if ids:
                counts += np.bincount(np.concatenate(ids), minlength=len(counts))
        return cls(backend, counts, lowercase)

    @classmethod
    def count(cls, sentences: Iterable[Sequence[str]], max_size: int | None, min_count: int,
              lowercase: bool) -> "WordVocabulary":
        """The vocabulary of words already split: the ``max_size`` most frequent (specials
        included; ties in alphabetical order, as ``train``) seen ``min_count`` times or more."""
        counts = Counter(w.lower() if lowercase else w for words in sentences for w in words)
        ranked = sorted((item for item in counts.items() if item[1] >= min_count
                         and item[0] not in SPECIALS), key=lambda item: (-item[1], item[0]))
        if max_size is not None:
            ranked = ranked[: max(0, max_size - len(SPECIALS))]
        return cls.from_words([w for w, _ in ranked], [c for _, c in ranked], lowercase)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Word ids of each text (``unk`` for words outside the vocabulary)."""
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=False)]

    def words_of(self, texts: Sequence[str]) -> list[list[str]]:
        """The surface words of each text (as written, before lowercasing)."""
        encodings = self.backend.encode_batch(list(texts), add_special_tokens=False)
        return [[text[start:end] for start, end in e.offsets]
                for text, e in zip(texts, encodings, strict=True)]

    def ids(self, words: Iterable[str]) -> list[int]:
        """Ids of words already split (lowercased first where the vocabulary is; the special
        tokens as they are)."""
        index, unk, lower = self.index, self.unk, self.lowercase
        return [index[w] if w in SPECIALS else index.get(w.lower() if lower else w, unk)
                for w in words]

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / TOKENIZER_FILE, self.backend.to_str())
        atomic_write_text(directory / COUNTS_FILE, strict_json.dumps(
            {"lowercase": self.lowercase, "counts": self.counts.tolist()}) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> "WordVocabulary":
        directory = Path(directory)
        files = [directory / TOKENIZER_FILE, directory / COUNTS_FILE]
        if not all(f.is_file() for f in files):
            raise PlmbenchError(f"no word vocabulary at {directory} (expected {TOKENIZER_FILE} "
                                f"and {COUNTS_FILE}); point at a run that saved one")
        meta = json.loads(files[1].read_text())
        return cls(Tokenizer.from_file(str(files[0])), meta["counts"], meta["lowercase"])


def _batches(items: Iterable[str], size: int) -> Iterable[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def cached_vocabulary(corpus_key: str, texts: Callable[[], Iterable[str]], max_size: int | None,
                      min_count: int, lowercase: bool) -> WordVocabulary:
    """``WordVocabulary.train`` once per (corpus, sizes, casing), kept under
    ``cache_root()/words/<hash>/``; a cache hit never reads ``texts``. ``corpus_key`` must change
    whenever the texts do."""
    key = json.dumps([corpus_key, max_size, min_count, lowercase, SPECIALS])
    return WordVocabulary.load(cached_directory("words", key, lambda staging: WordVocabulary.train(
        texts, max_size, min_count, lowercase).save(staging)))
