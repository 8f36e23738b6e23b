"""Tiny open-domain QA runs end to end (SQuAD-open on a few paragraphs and Wikipedia articles):
the record's recall@k equal what the predictions file's passage ids give when the answers are
looked for in those passages again, with BM25 and with dense MiniLM retrieval; a closed-book BART
run and a DPR bi-encoder run; the open_qa board shows each retriever as its own row."""

import json
import re

import numpy as np
import pytest

from bench.example_outputs import read_outputs
from lit_models.core.retrievers import build_corpus_of
from tests.bench.invoke import plmbench, read, run_dir

TINY = ["task=open_qa/squad_open", "model=bert-tiny-scratch", "task.max_train_samples=16",
        "task.max_eval_samples=12", "trainer.max_steps=1", "trainer.enable_progress_bar=false",
        "task.corpus.max_documents=3", "task.read_top_k=3", "task.max_length=192",
        "task.doc_stride=64"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


def words(text: str) -> str:
    return " ".join(re.findall(r"\w+|[^\w\s]", text.lower()))


def recall_from_predictions(where, k: int) -> float:
    """recall@k recomputed from the passage ids of predictions/validation.jsonl: the passage
    texts looked up again in the corpus, an answer searched as a lower-cased sequence of words
    and punctuation marks."""
    record = read(where)
    corpus = build_corpus_of(record["config"]["task"])
    text = dict(zip(corpus["id"], corpus["text"], strict=True))
    lines = (where / "predictions/validation.jsonl").read_text().splitlines()
    found = 0
    for row in map(json.loads, lines):
        passages = [words(text[p["id"]]) for p in row["passages"][:k]]
        found += any(f" {words(a)} " in f" {p} " for a in row["references"] for p in passages)
    return 100 * found / len(lines)


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
def test_recall_in_the_record_is_the_predictions_recall(mirror, results, retriever):
    args = [*TINY, f"task.retriever={retriever}"]
    done = plmbench("run", *args, f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "open_qa/squad_open", *args[1:])
    record = read(where)
    metrics = record["metrics"]["validation"]
    assert record["predictions"] == {"validation": "predictions/validation.jsonl"}
    rows = [json.loads(line) for line in
            (where / "predictions/validation.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and all(len(r["passages"]) == 100 or len(r["passages"]) ==
                                   metrics["corpus_size"] for r in rows)
    scores = [p["score"] for p in rows[0]["passages"]]
    assert scores == sorted(scores, reverse=True)
    for k in (1, 5, 20):
        assert metrics[f"recall@{k}"] == pytest.approx(recall_from_predictions(where, k))
    assert metrics["recall@20"] > 50  # 3 SQuAD paragraphs among a few dozen passages
    assert {"exact_match", "mrr", "queries_per_s", "passages_per_s", "corpus_size"} <= set(metrics)


def test_closed_book_bart_and_the_board(mirror, results):
    args = ["task=open_qa/squad_open", "model=bart-tiny-scratch", *TINY[2:6],
            "task.corpus.max_documents=3"]
    done = plmbench("run", *args, f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "open_qa/squad_open", *args[1:], label="bart-tiny-scratch")
    rows = [json.loads(line) for line in
            (where / "predictions/validation.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and all(r["passages"] == [] for r in rows)
    done = plmbench("leaderboard", str(results), "--board", "open_qa")
    assert done.rc == 0, done.err
    header, _, *lines = [line for line in done.out.splitlines() if line.startswith("|")]
    assert "open_qa/squad_open EM" in header and "open_qa/squad_open R@20" in header
    labels = sorted(line.split("|")[1].strip() for line in lines)
    assert labels == [
        "bart-tiny-scratch (auto, dense, Flat)",
        "bert-tiny-scratch (auto, bm25, bm25s lucene)",
        "bert-tiny-scratch (auto, dense, Flat)",
    ]


def test_dpr_bi_encoder_trains_and_serves_open_qa(mirror, results):
    args = ["task=retrieval/dpr_squad", "model=bert-tiny-scratch", "task.max_train_samples=32",
            "task.max_eval_samples=16", "trainer.max_steps=2", "save_model=true",
            "trainer.enable_progress_bar=false"]
    done = plmbench("run", *args, f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "retrieval/dpr_squad", *args[1:])
    assert {"recall@1", "recall@20", "mrr"} <= set(read(where)["metrics"]["validation"])
    served = [*TINY, "task.retriever=dense", f"task.dense.encoder=ckpt:{where}", "label=dpr-tiny"]
    done = plmbench("run", *served, f"results_dir={results}")  # MiniLM's mean pooling
    assert done.rc == 2 and "was trained with" in done.err_lines[-1]
    done = plmbench("run", *served, "task.dense.pooling=cls", "task.dense.normalize=false",
                    f"results_dir={results}", "skip_completed=false")
    assert done.rc == 0, done.err


def test_realm_and_rag_beside_the_baselines_on_the_board(mirror, tmp_path):
    """REALM (refreshing its index once) and RAG-Token / RAG-Sequence train a step each and
    leave records and predictions; the board holds them beside retrieve-then-read and
    closed-book rows, each labelled with its reader."""
    few = [*TINY[2:7], "task.batch_size=4"]
    runs = [("bert-tiny-scratch", "realm", ["task.read_top_k=3", "task.max_length=192",
                                    "task.doc_stride=64", "task.realm.top_k=3",
                                    "task.realm.refresh_every=1"]),
            ("bart-tiny-scratch", "rag_token", ["task.rag.top_k=3", "task.rag.max_length=160"]),
            ("bart-tiny-scratch", "rag_sequence", ["task.rag.top_k=3", "task.rag.max_length=160"]),
            ("bert-tiny-scratch", "extractive", ["task.read_top_k=3", "task.max_length=192",
                                         "task.doc_stride=64"]),
            ("bart-tiny-scratch", "closed_book", [])]
    for model, reader, extra in runs:
        args = ["task=open_qa/squad_open", f"model={model}", *few, f"task.reader={reader}",
                *extra, f"label={model}-{reader}"]
        done = plmbench("run", *args, f"results_dir={tmp_path}")
        assert done.rc == 0, done.err
        where = run_dir(tmp_path, "open_qa/squad_open", *args[1:-1], label=f"{model}-{reader}")
        metrics = read(where)["metrics"]["validation"]
        lines = (where / "predictions/validation.jsonl").read_text().splitlines()
        assert len(lines) == 12
        outputs = read_outputs(read(where), "validation")  # the bootstrap's per-question EM
        assert outputs.metric("exact_match", np.arange(12)[None, :])[0] == pytest.approx(
            metrics["exact_match"])
        if reader in ("realm", "rag_token", "rag_sequence"):
            assert metrics["index_refreshes"] == (1 if reader == "realm" else 0)
            for k in (1, 5):
                assert metrics[f"recall@{k}"] == pytest.approx(recall_from_predictions(where, k))
    done = plmbench("leaderboard", str(tmp_path), "--board", "open_qa")
    assert done.rc == 0, done.err
    _, _, *lines = [line for line in done.out.splitlines() if line.startswith("|")]
    labels = sorted(line.split("|")[1].strip() for line in lines)
    assert labels == [f"{model}-{reader} ({reader}, dense, Flat)" for model, reader, _ in
                      sorted(runs)]
