"""The inverse cloze task's examples: the pseudo-question is one of the passage's sentences, removed
from its evidence about 90% of the time (kept with probability 0.1, Lee et al. 2019 §5)."""

import random

from retrieval.ict import ict_example, sentences

PASSAGE = ("The Broncos won Super Bowl 50. It was held in 2016 at Levi's Stadium. Peyton Manning "
           "retired after it! Was it his last game? 7 players scored.")


def test_sentences_split_at_sentence_ends():
    assert sentences(PASSAGE) == ["The Broncos won Super Bowl 50.",
                                  "It was held in 2016 at Levi's Stadium.",
                                  "Peyton Manning retired after it!", "Was it his last game?",
                                  "7 players scored."]
    assert sentences("U.S. forces in the U.K. arrived.") == ["U.S. forces in the U.K. arrived."]


def test_the_query_sentence_is_removed_nine_times_in_ten():
    rng = random.Random(0)
    parts = sentences(PASSAGE)
    kept, n = 0, 4000
    for _ in range(n):
        query, evidence = ict_example(PASSAGE, rng, keep_probability=0.1)
        assert query in parts
        if evidence == PASSAGE:
            kept += 1
        else:
            assert evidence == " ".join(p for p in parts if p != query)
    assert abs(kept / n - 0.1) < 0.015  # binomial sd 0.0047
    assert ict_example("One sentence only.", rng, 0.1) is None
