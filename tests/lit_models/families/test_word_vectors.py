"""Static word vectors end to end on a toy corpus (task=embeddings/wikipedia pointed at a mirror
written here, with word sets in the hub schema of WordSim-353 and as gensim analogy files): the
vectors a run writes load in gensim, gensim's nearest neighbours on them are the record's, and
the record's similarity and analogy scores are gensim's evaluators' on them; GloVe's loss is eq. 8
and falls, word2vec (through gensim) is reproducible."""

import csv
import json
import random

import datasets
import numpy as np
import pytest
import torch
from gensim.models import KeyedVectors

from lit_models.nets.glove import Glove, GloveConfig, weighting
from tests.bench.invoke import plmbench, read, records_under

ANIMALS = ["cat", "dog", "horse", "cow", "sheep", "goat"]
COUNTRIES = ["france", "spain", "italy", "germany"]
CAPITALS = ["paris", "madrid", "rome", "berlin"]
PAIRS = [("cat", "dog", 8.0), ("cow", "sheep", 7.5), ("paris", "rome", 6.0),
         ("cat", "paris", 1.0), ("dog", "madrid", 0.5), ("horse", "goat", 7.0),
         ("Cat", "unknownword", 5.0)]


def article(rng: random.Random) -> str:
    lines = []
    for _ in range(12):
        i = rng.randrange(4)
        a, b = rng.sample(ANIMALS, 2)
        lines.append(rng.choice([
            f"The {a} and the {b} eat grass on the farm.",
            f"{CAPITALS[i].title()} is the capital of {COUNTRIES[i].title()}.",
            f"People in {COUNTRIES[i].title()} travel to {CAPITALS[i].title()} by train.",
            f"A {a} sleeps near a {b} in the barn."]))
    return "\n".join(lines)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A mirror with a toy corpus and a WordSim-353-schema split, and an analogy file."""
    root = tmp_path_factory.mktemp("mirror")
    rng = random.Random(0)
    (root / "toy" / "default").mkdir(parents=True)
    datasets.Dataset.from_dict({"text": [article(rng) for _ in range(60)]}).to_parquet(
        str(root / "toy" / "default" / "train.parquet"))
    (root / "wordsim353" / "default").mkdir(parents=True)
    datasets.Dataset.from_dict({  # almogtavor/WordSim353's columns
        "Word 1": [a for a, _, _ in PAIRS], "Word 2": [b for _, b, _ in PAIRS],
        "Human (Mean)": [s for *_, s in PAIRS]}).to_parquet(
        str(root / "wordsim353" / "default" / "train.parquet"))
    analogies = root / "analogies.txt"
    lines = [f"{c1} {k1} {c2} {k2}" for c1, k1 in zip(COUNTRIES, CAPITALS, strict=True)
             for c2, k2 in zip(COUNTRIES, CAPITALS, strict=True) if c1 != c2]
    analogies.write_text(": capital\n" + "\n".join(lines) + "\n")
    return root, analogies


def run(toy, tmp_path_factory, model: str, *extra: str):
    root, analogies = toy
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(root))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.mktemp("hf")))
        result = plmbench(
            "run", f"model={model}", "task=embeddings/wikipedia", "task.dataset=toy",
            "task.config=default", f"results_dir={results}", "trainer.enable_progress_bar=false",
            "task.splits.eval=[wordsim353,google]", "~task.intrinsic.similarity.simlex999",
            "~task.intrinsic.similarity.wordsim353.file",
            "+task.intrinsic.similarity.wordsim353.dataset=wordsim353",
            "+task.intrinsic.similarity.wordsim353.config=default",
            "+task.intrinsic.similarity.wordsim353.split=train",
            "+task.intrinsic.similarity.wordsim353.fields=['Word 1','Word 2','Human (Mean)']",
            f"task.intrinsic.analogy.google.file={analogies}",
            "task.intrinsic.neighbours.words=[cat,paris,spain]", "task.intrinsic.neighbours.k=4",
            *extra)
    assert result.rc == 0, result.err[-3000:]
    [path] = records_under(results)
    return read(path.parent), path.parent


@pytest.fixture(scope="module")
def word2vec(toy, tmp_path_factory):
    return run(toy, tmp_path_factory, "word2vec-tiny", "model.epochs=3")


@pytest.fixture(scope="module")
def glove(toy, tmp_path_factory):
    return run(toy, tmp_path_factory, "glove-tiny", "model.epochs=8", "task.batch_size=256",
               "trainer.log_every_n_steps=1")


@pytest.mark.parametrize("trained", ["word2vec", "glove"])
def test_gensim_finds_the_records_neighbours_and_scores_in_the_vectors(trained, request, toy,
                                                                       tmp_path):
    record, run_dir = request.getfixturevalue(trained)
    assert record["status"] == "ok"
    keyed = KeyedVectors.load_word2vec_format(str(run_dir / "model" / "vectors.txt"))
    assert "<unk>" not in keyed.key_to_index and "cat" in keyed.key_to_index
    neighbours = record["outputs"]["neighbours"]
    assert set(neighbours) == {"cat", "paris", "spain"}
    for word, ours in neighbours.items():
        theirs = keyed.most_similar(word, topn=4)
        assert [w for w, _ in ours] == [w for w, _ in theirs]
        assert np.allclose([c for _, c in ours], [c for _, c in theirs], atol=1e-3)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in PAIRS))
    pearson, spearman, oov = keyed.evaluate_word_pairs(str(pairs))
    ours = record["metrics"]["wordsim353"]
    assert ours["spearman"] == pytest.approx(spearman.statistic, abs=1e-5)
    assert ours["pearson"] == pytest.approx(pearson.statistic, abs=1e-4)
    assert 100 * ours["oov"] == pytest.approx(oov)
    accuracy, _ = keyed.evaluate_word_analogies(str(toy[1]))
    assert record["metrics"]["google"]["accuracy"] == pytest.approx(accuracy)
    assert record["metrics"]["google"]["oov"] == 0


def test_glove_training_lowers_the_weighted_least_squares(glove):
    record, run_dir = glove
    with open(run_dir / "logs" / "metrics.csv") as handle:
        losses = [float(row["train/loss"]) for row in csv.DictReader(handle) if row["train/loss"]]
    assert len(losses) >= 8
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3])
    assert record["config"]["optim"]["name"] == "adagrad"
    assert record["throughput"]["train_tokens"] > 0  # co-occurrence entries


def test_glove_loss_is_equation_8():
    torch.manual_seed(0)
    net = Glove(GloveConfig(vocab_size=10, vector_size=3, x_max=5.0, alpha=0.75))
    rows, cols = torch.tensor([1, 2, 3]), torch.tensor([4, 2, 9])
    counts = torch.tensor([0.5, 7.0, 2.0])
    w, c = net.word.weight.detach(), net.context.weight.detach()
    b, bc = net.word_bias.weight.detach()[:, 0], net.context_bias.weight.detach()[:, 0]
    expected = sum(min(1.0, (x / 5.0) ** 0.75) * (w[i] @ c[j] + b[i] + bc[j] - np.log(x)) ** 2
                   for i, j, x in zip(rows.tolist(), cols.tolist(), counts.tolist(), strict=True))
    assert net.loss(rows, cols, counts).item() == pytest.approx(0.5 * float(expected), rel=1e-5)
    assert weighting(torch.tensor([100.0, 250.0]), 100.0, 0.75).tolist() == [1.0, 1.0]
    assert torch.equal(net.vectors(), w + c)


def test_word2vec_runs_are_reproducible(word2vec, toy, tmp_path_factory):
    record, run_dir = word2vec
    again, again_dir = run(toy, tmp_path_factory, "word2vec-tiny", "model.epochs=3")
    assert again["metrics"] == record["metrics"]
    assert (again_dir / "model" / "vectors.txt").read_bytes() == (
        run_dir / "model" / "vectors.txt").read_bytes()
    assert json.loads(json.dumps(again["outputs"])) == record["outputs"]
