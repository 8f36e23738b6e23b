"""Corpus BLEU (Papineni et al. 2002) against a hand computation of its definition: clipped
n-gram counts pooled over the corpus (§2.1), their geometric mean, the brevity penalty of the
total lengths (§2.2.2)."""

import math
from collections import Counter

import pytest
import sacrebleu

from lit_models.metrics import build_metrics

#: whitespace-tokenised texts (13a splits nothing else here), lowercase, no punctuation
PREDICTIONS = ["the cat sat on the mat today", "a dog ran in the big green park",
               "birds sing in the early morning light", "he reads a book"]
REFERENCES = ["the cat sat on the red mat today", "the dog ran in the big park",
              "birds sing early in the morning light", "she reads a good book"]


def ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def hand_bleu(predictions: list[str], references: list[str]) -> float:
    matches, totals = [0] * 4, [0] * 4
    for p, r in zip(predictions, references, strict=True):
        p, r = p.split(), r.split()
        for n in range(1, 5):
            ours, theirs = ngrams(p, n), ngrams(r, n)
            matches[n - 1] += sum(min(c, theirs[g]) for g, c in ours.items())
            totals[n - 1] += max(len(p) - n + 1, 0)
    c = sum(len(p.split()) for p in predictions)
    r = sum(len(x.split()) for x in references)
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return 100 * brevity * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals,
                                                                         strict=True)) / 4)


def test_bleu_equals_the_definition_and_sacrebleu():
    metrics = build_metrics(["bleu"], "texts")
    metrics.update(REFERENCES[:1], texts=PREDICTIONS[:1])  # pooled over batches, not averaged
    metrics.update(REFERENCES[1:], texts=PREDICTIONS[1:])
    got = metrics.compute()["bleu"]
    assert got == pytest.approx(hand_bleu(PREDICTIONS, REFERENCES), abs=1e-9)
    assert got == pytest.approx(sacrebleu.corpus_bleu(PREDICTIONS, [REFERENCES]).score)
    assert 10 < got < 90
    # the brevity penalty bites: cut every prediction to its first five words
    short = [" ".join(p.split()[:5]) for p in PREDICTIONS]
    metrics.reset()
    metrics.update(REFERENCES, texts=short)
    assert metrics.compute()["bleu"] == pytest.approx(hand_bleu(short, REFERENCES), abs=1e-9)
    assert metrics.compute()["bleu"] < got
