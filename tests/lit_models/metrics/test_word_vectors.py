"""Intrinsic word-vector metrics against gensim on the same vectors: nearest neighbours as
``KeyedVectors.most_similar``, word-pair Spearman/Pearson as ``evaluate_word_pairs`` (scipy) and
3CosAdd analogy accuracy as ``evaluate_word_analogies``."""

import numpy as np
import pytest
import torch
from gensim import models as gensim_models

from lit_models.metrics.word_vectors import (
    analogy_predictions,
    nearest_neighbours,
    similarity_scores,
)

WORDS = [f"w{i}" for i in range(60)]


@pytest.fixture(scope="module")
def keyed():
    kv = gensim_models.KeyedVectors(vector_size=8)
    kv.add_vectors(WORDS, np.random.default_rng(0).normal(size=(60, 8)).astype(np.float32))
    return kv


def test_neighbours_are_gensims(keyed):
    ids, cosines = nearest_neighbours(torch.from_numpy(keyed.vectors), torch.tensor([3, 17]), 5)
    for row, query in enumerate(("w3", "w17")):
        theirs = keyed.most_similar(query, topn=5)
        assert [WORDS[i] for i in ids[row]] == [w for w, _ in theirs]
        assert np.allclose(cosines[row].numpy(), [c for _, c in theirs], atol=1e-5)


def test_similarity_is_gensims_evaluate_word_pairs(keyed, tmp_path):
    rng = np.random.default_rng(1)
    pairs = [(f"w{a}", f"w{b}", float(s)) for a, b, s in zip(
        rng.integers(0, 60, 40), rng.integers(0, 60, 40), rng.uniform(0, 10, 40), strict=True)]
    pairs += [("w1", "unknown", 5.0), ("unknown", "w2", 1.0)]
    path = tmp_path / "pairs.tsv"
    path.write_text("# a comment\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs))
    pearson, spearman, oov = keyed.evaluate_word_pairs(str(path), case_insensitive=False)
    known = [(a, b, s) for a, b, s in pairs if a in WORDS and b in WORDS]
    model = [float(keyed.similarity(a, b)) for a, b, _ in known]
    ours = similarity_scores(model, [s for *_, s in known], len(pairs))
    assert ours["spearman"] == pytest.approx(spearman.statistic, abs=1e-6)
    assert ours["pearson"] == pytest.approx(pearson.statistic, abs=1e-5)
    assert 100 * ours["oov"] == pytest.approx(oov)


def test_constant_or_empty_similarities_give_nan_not_a_number_made_up():
    assert np.isnan(similarity_scores([], [], 3)["spearman"])
    assert similarity_scores([], [], 3)["oov"] == 1.0


def test_analogies_are_gensims_evaluate_word_analogies(keyed, tmp_path):
    rng = np.random.default_rng(2)
    questions = rng.integers(0, 60, (200, 4))
    questions[:20, 3] = [int(analogy_predictions(  # some answers right, as 3CosAdd answers them
        torch.from_numpy(keyed.vectors), *map(torch.tensor, ([q[0]], [q[1]], [q[2]])))[0])
        for q in questions[:20]]
    questions = [q for q in questions if len(set(q[:3])) == 3]
    path = tmp_path / "analogies.txt"
    path.write_text(": section\n" + "".join(" ".join(f"w{i}" for i in q) + "\n"
                                             for q in questions))
    score, _ = keyed.evaluate_word_analogies(str(path), case_insensitive=False)
    a, b, c, d = (torch.tensor([q[i] for q in questions]) for i in range(4))
    predicted = analogy_predictions(torch.from_numpy(keyed.vectors), a, b, c)
    assert float((predicted == d).float().mean()) == pytest.approx(score)
    assert score > 0
