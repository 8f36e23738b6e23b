"""Spoiler detection on a Goodreads fixture in the raw file's schema: its conversion into the
mirror (split by book, ids kept), the mirror command's download-and-convert path (from a file://
URL: no network), the sentence examples with their context, the imbalance options, and the
board's majority and TF-IDF + logistic-regression rows against scikit-learn run here directly."""

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

from bench.boards.baselines import BASELINE_LABEL
from datamodules import sources
from datamodules.errors import PlmbenchError
from datamodules.goodreads import DATASET, convert
from datamodules.sources import FileSource, load_split, mirror_dataset
from datamodules.spoilers import SpoilerDataModule
from datamodules.tokenization import VOCAB_TXT, train_tokenizer
from lit_models.families.spoilers import TFIDF_ROW, SpoilerDetection
from tests import hub_fixtures
from tests.bench.invoke import plmbench

SPLITS = ("train", "validation", "test")
#: the splits read here are cached by `datasets` in a per-test directory, never ~/.cache
pytestmark = pytest.mark.usefixtures("datasets_cache")


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return hub_fixtures.write_goodreads(tmp_path_factory.mktemp("raw") / "spoilers.json.gz")


@pytest.fixture(scope="module")
def mirror(raw, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mirror")
    convert(raw, root)
    return root


def task(**overrides) -> dict:
    return {"name": "spoilers/goodreads", "dataset": DATASET, "config": "by_book",
            "hub_id": None, "num_labels": 2, "splits": {"train": "train",
                                                        "eval": ["validation", "test"]},
            "context": {"sentences": 1}, "imbalance": {"method": "weighted", "ratio": 1.0},
            "metrics": ["auroc", "f1", "accuracy"], "max_length": 64, "batch_size": 8,
            "tfidf": {"ngram_range": [1, 2], "min_df": 1, "max_features": 1000, "C": 1.0,
                      "max_iter": 1000}, **overrides}


def test_conversion_splits_by_book_and_keeps_every_review(raw, mirror):
    with gzip.open(raw, "rt") as lines:
        reviews = {r["review_id"]: r for r in map(json.loads, lines)}
    books = {}
    seen = []
    for split in SPLITS:
        table = pq.read_table(mirror / DATASET / "by_book" / f"{split}.parquet").to_pylist()
        books[split] = {row["book_id"] for row in table}
        for row in table:
            source = reviews[row["review_id"]]
            assert (row["user_id"], row["book_id"]) == (source["user_id"], source["book_id"])
            assert row["sentences"] == [s for _, s in source["review_sentences"]]
            assert row["labels"] == [label for label, _ in source["review_sentences"]]
            seen.append(row["review_id"])
    assert sorted(seen) == sorted(reviews)
    assert all(books[split] for split in SPLITS)
    assert not (books["train"] & books["test"] or books["train"] & books["validation"]
                or books["validation"] & books["test"])


def test_a_malformed_line_is_named(tmp_path):
    bad = tmp_path / "bad.json.gz"
    with gzip.open(bad, "wt") as out:
        out.write('{"review_id": "r1"}\n')
    with pytest.raises(PlmbenchError, match="line 1 is no Goodreads spoiler review"):
        convert(bad, tmp_path / "mirror")
    assert not (tmp_path / "mirror" / DATASET / "by_book" / "train.parquet").exists()


def test_mirror_command_downloads_and_converts_and_a_missing_split_names_it(
        raw, tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("PLMBENCH_DATA", str(root))
    with pytest.raises(PlmbenchError, match=f"plmbench data mirror {DATASET}"):
        load_split(DATASET, "by_book", "train")
    with pytest.raises(PlmbenchError, match="HF_HUB_OFFLINE"):  # the tests run offline
        mirror_dataset(DATASET)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    source = FileSource((f"file://{tmp_path}/gone.json.gz", raw.as_uri()), "1 KB", convert)
    monkeypatch.setitem(sources.FILE_SOURCES, DATASET, source)
    result = plmbench("data", "mirror", DATASET)
    assert result.rc == 0, result.err
    assert {Path(line).stem for line in result.out.split()} == set(SPLITS)
    assert len(load_split(DATASET, "by_book", "test")) > 0
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # the download is gone


def test_sentences_carry_their_neighbours_and_ids(mirror, monkeypatch):
    monkeypatch.setenv("PLMBENCH_DATA", str(mirror))
    reviews = pq.read_table(mirror / DATASET / "by_book" / "train.parquet").to_pylist()
    first = reviews[0]
    config = SpoilerDataModule.checked(task())
    rows = SpoilerDataModule.rows(config, "train", None)
    assert len(rows) == sum(len(r["sentences"]) for r in reviews)
    s = first["sentences"]
    assert rows[1]["sentence"] == s[1] and rows[1]["context"] == f"{s[0]} {s[2]}"
    assert rows[0]["context"] == s[1] and rows[1]["position"] == 1
    assert (rows[1]["review_id"], rows[1]["book_id"]) == (first["review_id"], first["book_id"])
    assert config["text_fields"] == ["sentence", "context"]
    alone = SpoilerDataModule.checked(task(context={"sentences": 0}))
    assert alone["text_fields"] == ["sentence"]
    assert len(SpoilerDataModule.rows(config, "train", 7)) == 7
    with pytest.raises(PlmbenchError, match="imbalance.method='oversample'"):
        SpoilerDataModule.checked(task(imbalance={"method": "oversample", "ratio": 1}))


def test_imbalance_weights_and_undersampling(mirror, monkeypatch):
    monkeypatch.setenv("PLMBENCH_DATA", str(mirror))
    labels = SpoilerDataModule.labels(task(), "train", "max_train_samples")
    n, spoilers = len(labels), sum(labels)
    weights = SpoilerDetection().class_weights(SpoilerDataModule.checked(task()))
    assert weights == pytest.approx([n / (2 * (n - spoilers)), n / (2 * spoilers)])
    assert SpoilerDetection().class_weights(task(imbalance={"method": "none"})) is None
    tokenizer = train_tokenizer(VOCAB_TXT, ["a b c"] * 10, vocab_size=50, lowercase=True)
    dm = SpoilerDataModule(task(imbalance={"method": "undersample", "ratio": 1.0}), tokenizer,
                           seed=3)
    dm.setup("fit")
    kept = dm.train_data["labels"]
    assert sum(kept) == spoilers and len(kept) == 2 * spoilers


def sklearn_row(config: dict) -> dict:
    """The TF-IDF + logistic-regression row computed here, with scikit-learn's metrics."""
    def texts(rows):
        return [f"{s} {c}" for s, c in zip(rows["sentence"], rows["context"], strict=True)]

    train = SpoilerDataModule.rows(config, "train", None)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=1, max_features=1000,
                                 sublinear_tf=True)
    model = LogisticRegression(class_weight="balanced", max_iter=1000)
    model.fit(vectorizer.fit_transform(texts(train)), train["label"])
    out = {}
    for split in ("validation", "test"):
        rows = SpoilerDataModule.rows(config, split, None)
        p = model.predict_proba(vectorizer.transform(texts(rows)))[:, 1]
        out[split] = {"auroc": roc_auc_score(rows["label"], p),
                      "f1": f1_score(rows["label"], p > 0.5),
                      "accuracy": accuracy_score(rows["label"], p > 0.5)}
    return out


def test_board_rows_match_scikit_learn_and_are_cached(mirror, monkeypatch):
    monkeypatch.setenv("PLMBENCH_DATA", str(mirror))
    rows = SpoilerDetection().baselines(task())
    assert set(rows) == {None, TFIDF_ROW}
    for split in ("validation", "test"):
        majority = rows[None][split]
        assert majority["f1"] == 0.0 and majority["auroc"] == pytest.approx(0.5)
        expected = sklearn_row(SpoilerDataModule.checked(task()))[split]
        assert rows[TFIDF_ROW][split] == pytest.approx(expected, abs=1e-6)

    def refit(*args, **kwargs):
        raise AssertionError("the cached row was fitted again")

    monkeypatch.setattr(LogisticRegression, "fit", refit)
    assert SpoilerDetection().baselines(task())[TFIDF_ROW] == rows[TFIDF_ROW]


def test_a_run_reports_to_the_spoilers_board_beside_both_rows(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("PLMBENCH_DATA", str(mirror))
    results = tmp_path / "results"
    run = plmbench(
        "run",
        "model=bert-tiny-scratch",
        "task=spoilers/goodreads",
        "trainer.max_steps=1",
        "task.max_eval_samples=null",
        "task.tfidf.min_df=1",
        f"results_dir={results}",
        "trainer.enable_progress_bar=false",
    )
    assert run.rc == 0, run.err
    board = plmbench("leaderboard", str(results), "--board", "spoilers", "--format", "json")
    labels = {row["label"] for row in json.loads(board.out)["rows"]}
    assert labels == {"bert-tiny-scratch", BASELINE_LABEL, TFIDF_ROW}
