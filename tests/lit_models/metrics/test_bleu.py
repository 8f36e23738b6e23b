"""Corpus BLEU (Papineni et al. 2002) against a hand computation of its definition (clipped n-gram
counts pooled over the corpus, §2.1, their geometric mean, the brevity penalty of the total lengths,
§2.2.2) and against sacreBLEU's own ``corpus_bleu`` under each setting a task may give, its
signature included; degenerate corpora too: empty hypotheses, hypotheses equal to their
references, no n-gram in common."""

import math
from collections import Counter

import pytest
import sacrebleu

from datamodules.errors import PlmbenchError
from lit_models.metrics import build_metrics

#: whitespace-tokenised texts (13a splits nothing else here), lowercase, no punctuation
PREDICTIONS = ["the cat sat on the mat today", "a dog ran in the big green park",
               "birds sing in the early morning light", "he reads a book"]
REFERENCES = ["the cat sat on the red mat today", "the dog ran in the big park",
              "birds sing early in the morning light", "she reads a good book"]
#: texts the tokenizers and casing treat differently
MIXED = (["The cat sat on the mat.", "It is raining today, isn't it?", "",
          "Das Haus ist klein.", "a b c d e f"],
         ["The cat is on the mat.", "It rains today, doesn't it?", "Nothing here.",
          "Das Haus ist sehr klein.", "a b c d e f"])


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


def scored(predictions, references, batches=((0, None),), **settings) -> tuple[dict, dict]:
    """(values, signatures) of BLEU over the texts, updated batch by batch."""
    metrics = build_metrics(["bleu"], "texts", bleu=settings or None)
    for start, stop in batches:
        metrics.update(references[start:stop], texts=predictions[start:stop])
    return metrics.compute(), metrics.signatures()


def test_bleu_equals_the_definition_and_sacrebleu():
    got = scored(PREDICTIONS, REFERENCES, ((0, 1), (1, None)))[0]["bleu"]  # pooled, not averaged
    assert got == pytest.approx(hand_bleu(PREDICTIONS, REFERENCES), abs=1e-9)
    assert got == pytest.approx(sacrebleu.corpus_bleu(PREDICTIONS, [REFERENCES]).score)
    assert 10 < got < 90
    # the brevity penalty bites: cut every prediction to its first five words
    short = [" ".join(p.split()[:5]) for p in PREDICTIONS]
    values = scored(short, REFERENCES)[0]
    assert values["bleu"] == pytest.approx(hand_bleu(short, REFERENCES), abs=1e-9)
    assert values["bleu"] < got
    assert values["bleu_brevity_penalty"] == pytest.approx(math.exp(1 - 27 / 19))  # r / c


@pytest.mark.parametrize(("settings", "signature"), [
    ({}, "case:mixed|eff:no|tok:13a|smooth:exp"),
    ({"tokenize": "intl"}, "case:mixed|eff:no|tok:intl|smooth:exp"),  # T5's
    ({"lowercase": True}, "case:lc|eff:no|tok:13a|smooth:exp"),
    ({"smooth_method": "floor", "smooth_value": 0.1},
     "case:mixed|eff:no|tok:13a|smooth:floor[0.10]"),
])
def test_every_value_and_the_signature_are_sacrebleus(settings, signature):
    values, signatures = scored(*MIXED, ((0, 2), (2, None)), **settings)
    theirs = sacrebleu.corpus_bleu(MIXED[0], [MIXED[1]], **settings)
    assert values["bleu"] == theirs.score and values["bleu_brevity_penalty"] == theirs.bp
    assert [values[f"bleu_precision_{n}"] for n in range(1, 5)] == theirs.precisions
    assert (values["bleu_hyp_len"], values["bleu_ref_len"]) == (theirs.sys_len, theirs.ref_len)
    assert signatures == {"bleu": f"nrefs:1|{signature}|version:{sacrebleu.__version__}"}


def test_degenerate_corpora():
    assert scored(["a b c d e"], ["a b c d e"])[0]["bleu"] == pytest.approx(100.0)
    nothing = scored(["x y z w v"], ["a b c d e"])[0]
    assert nothing["bleu"] == 0.0 and nothing["bleu_precision_1"] == 0.0
    empty = scored(["", ""], ["a b c", "d e"])[0]  # no hypothesis tokens at all
    assert empty["bleu"] == 0.0 and empty["bleu_hyp_len"] == 0 and empty["bleu_ref_len"] == 5
    for predictions, references in ((["a b c d e"], ["a b c d e"]), (["x y z w v"], ["a b c d e"]),
                                    (["", ""], ["a b c", "d e"])):
        theirs = sacrebleu.corpus_bleu(predictions, [references])
        assert scored(predictions, references)[0]["bleu"] == theirs.score


def test_bad_settings_and_an_empty_corpus():
    with pytest.raises(PlmbenchError, match=r"task.bleu: unknown keys \['tokenizer'\]"):
        build_metrics(["bleu"], "texts", bleu={"tokenizer": "13a"})
    with pytest.raises(PlmbenchError, match="sacreBLEU refuses it"):
        build_metrics(["bleu"], "texts", bleu={"tokenize": "nope"})
    with pytest.raises(ValueError, match="empty corpus"):
        build_metrics(["bleu"], "texts").compute()


def test_reset_forgets_the_corpus():
    metrics = build_metrics(["bleu"], "texts")
    metrics.update(["a b c"], texts=["x y z"])
    metrics.reset()
    metrics.update(["a b c d"], texts=["a b c d"])
    assert metrics.compute()["bleu"] == pytest.approx(100.0)
