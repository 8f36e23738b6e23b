"""Conneau et al. 2018's probing tasks that need nothing but raw text ("What you can cram into a
single $&!#* vector: Probing sentence embeddings for linguistic properties", §3), generated from
a corpus's sentences with a fixed seed:

- SentLen (surface): the sentence's length in words, in 6 equal-width bins over 5-28 words
  (their bins are of 4 words, the last of 3; ours 4 each: 5-8, ..., 25-28), classes balanced;
- WC, word content (surface): which of a set of mid-frequency words (theirs: the 1,000 ranked
  2,000-3,000 in their corpus; ours ``words`` from ``first_rank`` of the corpus's own counts) the
  sentence holds, each kept sentence holding exactly one, classes balanced;
- BShift, bigram shift (syntactic): whether two adjacent words (punctuation never one of them)
  were swapped, half of the sentences being so.

Words are the regex tokens of a sentence (word characters, or one punctuation mark), given to
the model joined by single spaces. Each generator returns (words, label) pairs and the label
names; the train and eval examples come from disjoint sentences (the caller splits them).
"""

import random
import re
from collections import Counter
from collections.abc import Sequence

WORD = re.compile(r"\w+|[^\w\s]")
LENGTH_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 24), (25, 28))


def words_of(sentence: str) -> list[str]:
    return WORD.findall(sentence)


def _balanced(by_label: dict[int, list[list[str]]], per_label: int, rng: random.Random
              ) -> list[tuple[list[str], int]]:
    examples = [(words, label) for label, group in sorted(by_label.items())
                for words in rng.sample(group, min(per_label, len(group)))]
    rng.shuffle(examples)
    return examples


def sentence_length(sentences: Sequence[list[str]], per_label: int, seed: int = 0
                    ) -> tuple[list[tuple[list[str], int]], list[str]]:
    """(words, length bin) pairs, at most ``per_label`` of each bin."""
    by_label: dict[int, list[list[str]]] = {}
    for words in sentences:
        for label, (low, high) in enumerate(LENGTH_BINS):
            if low <= len(words) <= high:
                by_label.setdefault(label, []).append(words)
    names = [f"{low}-{high}" for low, high in LENGTH_BINS]
    return _balanced(by_label, per_label, random.Random(seed)), names


def word_content(sentences: Sequence[list[str]], per_label: int, words: int, first_rank: int,
                 vocabulary_from: Sequence[list[str]] | None = None, seed: int = 0
                 ) -> tuple[list[tuple[list[str], int]], list[str]]:
    """(words, which target word it holds) pairs: the targets are the ``words`` lowercased
    alphabetic words of frequency rank ``first_rank`` on in ``vocabulary_from`` (the training
    sentences, so train and eval share one target set), at most ``per_label`` each."""
    counts = Counter(w.lower() for s in (vocabulary_from or sentences) for w in s if w.isalpha())
    ranked = [w for w, _ in counts.most_common()]
    targets = ranked[first_rank:first_rank + words]
    index = {w: i for i, w in enumerate(targets)}
    by_label: dict[int, list[list[str]]] = {}
    for sentence in sentences:
        held = {index[w.lower()] for w in sentence if w.lower() in index}
        occurrences = sum(w.lower() in index for w in sentence)
        if len(held) == 1 and occurrences == 1:
            by_label.setdefault(held.pop(), []).append(sentence)
    return _balanced(by_label, per_label, random.Random(seed)), targets


def bigram_shift(sentences: Sequence[list[str]], count: int, seed: int = 0
                 ) -> tuple[list[tuple[list[str], int]], list[str]]:
    """(words, swapped?) pairs for ``count`` sentences of 5 words or more, every other one with
    two adjacent non-punctuation words swapped."""
    rng = random.Random(seed)
    pool = [s for s in sentences if len(s) >= 5]
    examples = []
    for n, words in enumerate(rng.sample(pool, min(count, len(pool)))):
        pairs = [i for i in range(len(words) - 1)
                 if WORD.fullmatch(words[i]) and words[i][0].isalnum()
                 and words[i + 1][0].isalnum() and words[i] != words[i + 1]]
        if n % 2 == 0 or not pairs:
            examples.append((list(words), 0))
            continue
        i = rng.choice(pairs)
        shifted = list(words)
        shifted[i], shifted[i + 1] = shifted[i + 1], shifted[i]
        examples.append((shifted, 1))
    return examples, ["original", "inverted"]
