"""DPR's 100-word passages: disjoint blocks, titles kept, ids by document and block, SQuAD's
repeated contexts deduplicated, a missing corpus refused in the data layer's one line."""

import datasets
import pytest

from datamodules.errors import PlmbenchError
from retrieval.passages import build_corpus, corpus_fingerprint, split_words


def test_split_words_cuts_disjoint_blocks_of_n_words():
    text = " ".join(f"w{i}" for i in range(250))
    blocks = split_words(text, 100)
    assert [len(b.split()) for b in blocks] == [100, 100, 50]
    assert " ".join(blocks).split() == text.split()
    assert split_words("   ", 100) == []


def _source(tmp_path, rows, **extra):
    path = tmp_path / "docs" / "default" / "train.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict(rows).to_parquet(str(path))
    return {"name": "docs", "dataset": "docs", "config": "default", "split": "train",
            "text_field": "text", "title_field": "title", "id_field": None, **extra}


def test_corpus_of_two_sources(tmp_path, monkeypatch, datasets_cache):
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path))
    words = " ".join(f"x{i}" for i in range(130))
    first = _source(tmp_path, {"title": ["A", "B", "A"], "text": [words, "short one", words]},
                    unique_texts=True)
    corpus = build_corpus([first, {**first, "unique_texts": False, "max_documents": 1}], 100)
    assert corpus["id"] == ["docs:0:0", "docs:0:1", "docs:1:0", "docs:0:0", "docs:0:1"]
    assert corpus["title"] == ["A", "A", "B", "A", "A"]
    assert corpus[1]["text"].split() == [f"x{i}" for i in range(100, 130)]
    again = build_corpus([first, {**first, "unique_texts": False, "max_documents": 1}], 100)
    assert corpus_fingerprint(again) == corpus_fingerprint(corpus)
    assert corpus_fingerprint(build_corpus([first], 50)) != corpus_fingerprint(corpus)


def test_squad_dev_contexts_are_deduplicated(mirror):
    source = {"name": "squad-dev", "dataset": "squad", "config": "plain_text",
              "split": "validation", "text_field": "context", "title_field": "title",
              "unique_texts": True, "max_documents": 5}
    corpus = build_corpus([source])
    documents = {pid.split(":")[1] for pid in corpus["id"]}
    assert documents == {"0", "1", "2", "3", "4"}
    assert corpus[0]["title"] == "Super_Bowl_50"
    texts = [corpus[i]["text"] for i in range(len(corpus))]
    assert len(set(texts)) == len(texts)


def test_a_corpus_missing_offline_is_one_line(mirror):
    wiki_dpr = {"name": "wiki_dpr", "dataset": "wiki_dpr",
                "config": "psgs_w100.nq.no_index.no_embeddings", "split": "train",
                "hub_id": "facebook/wiki_dpr", "text_field": "text",
                "title_field": "title", "id_field": "id", "presplit": True}
    with pytest.raises(PlmbenchError) as err:
        build_corpus([wiki_dpr])
    assert "\n" not in str(err.value) and "plmbench data mirror wiki_dpr" in str(err.value)
