"""Our corpus BLEU against sacreBLEU's own ``corpus_bleu`` and against the definition worked out
by hand (Papineni et al. 2002: clipped n-gram precisions, brevity penalty), on degenerate corpora
too: empty hypotheses, hypotheses equal to their references, no n-gram in common."""

import math

import pytest
import sacrebleu

from lit_models.metrics.bleu import Bleu

HYPOTHESES = ["The cat sat on the mat.", "It is raining today, isn't it?", "",
              "Das Haus ist klein.", "a b c d e f"]
REFERENCES = ["The cat is on the mat.", "It rains today, doesn't it?", "Nothing here.",
              "Das Haus ist sehr klein.", "a b c d e f"]


def scored(hypotheses, references, *updates, **settings) -> dict[str, float]:
    bleu = Bleu(**settings)
    for start, stop in updates or [(0, len(hypotheses))]:
        bleu.update(hypotheses[start:stop], references[start:stop])
    values = {key: float(value) for key, value in bleu.compute().items()}
    return values | {"signature": bleu.signatures()["bleu"]}


@pytest.mark.parametrize(("settings", "signature"), [
    ({}, "case:mixed|eff:no|tok:13a|smooth:exp"),
    ({"tokenize": "intl"}, "case:mixed|eff:no|tok:intl|smooth:exp"),  # T5's
    ({"lowercase": True}, "case:lc|eff:no|tok:13a|smooth:exp"),
    ({"smooth_method": "floor", "smooth_value": 0.1},
     "case:mixed|eff:no|tok:13a|smooth:floor[0.10]"),
])
def test_equals_sacrebleu_corpus_bleu(settings, signature):
    ours = scored(HYPOTHESES, REFERENCES, (0, 2), (2, 5), **settings)  # two batches, one corpus
    theirs = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES], **settings)
    assert ours["bleu"] == theirs.score
    assert ours["bleu_brevity_penalty"] == theirs.bp
    assert [ours[f"bleu_precision_{n}"] for n in range(1, 5)] == theirs.precisions
    assert (ours["bleu_hyp_len"], ours["bleu_ref_len"]) == (theirs.sys_len, theirs.ref_len)
    assert ours["signature"] == f"nrefs:1|{signature}|version:{sacrebleu.__version__}"


def test_hand_computed_value():
    """One 6-token hypothesis against a 7-token reference (13a splits off the final period):
    "the cat sat on the mat ." vs "the cat is on the big mat .": clipped matches per order
    1: the x2, cat, on, mat, . = 6 of 7; 2: "the cat", "on the", "mat ." = 3 of 6;
    3: none of 5, smoothed ("exp": 1 / 2^k for the k-th zero order over its total);
    4: none of 4, smoothed again."""
    ours = scored(["the cat sat on the mat ."], ["the cat is on the big mat ."])
    precisions = [6 / 7, 3 / 6, (1 / 2) / 5, (1 / 4) / 4]
    brevity = math.exp(1 - 8 / 7)
    expected = 100 * brevity * math.exp(sum(math.log(p) for p in precisions) / 4)
    assert ours["bleu"] == pytest.approx(expected, rel=1e-9)
    assert ours["bleu_brevity_penalty"] == pytest.approx(brevity)


def test_degenerate_corpora():
    assert scored(["a b c d e"], ["a b c d e"])["bleu"] == pytest.approx(100.0)
    nothing = scored(["x y z w v"], ["a b c d e"])
    assert nothing["bleu"] == 0.0 and nothing["bleu_precision_1"] == 0.0
    empty = scored(["", ""], ["a b c", "d e"])  # no hypothesis tokens at all
    assert empty["bleu"] == 0.0 and empty["bleu_hyp_len"] == 0 and empty["bleu_ref_len"] == 5
    for hypotheses, references in ((["a b c d e"], ["a b c d e"]), (["x y z w v"], ["a b c d e"]),
                                   (["", ""], ["a b c", "d e"])):
        theirs = sacrebleu.corpus_bleu(hypotheses, [references])
        assert scored(hypotheses, references)["bleu"] == theirs.score


def test_an_empty_corpus_and_unpaired_texts_are_errors():
    with pytest.raises(ValueError, match="empty corpus"):
        Bleu().compute()
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        Bleu().update(["a", "b"], ["a"])


def test_reset_forgets_the_corpus():
    bleu = Bleu()
    bleu.update(["x y z"], ["a b c"])
    bleu.reset()
    bleu.update(["a b c d"], ["a b c d"])
    assert float(bleu.compute()["bleu"]) == pytest.approx(100.0)
