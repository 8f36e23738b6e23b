"""Salient span masking: the date and entity finders on hand-written sentences; on the Wikipedia
sample, the share of sentences with a salient span, every token of the chosen span masked with
[MASK] and nothing else; eval masks fixed by mask_seed; a tiny `plmbench run` whose loss falls."""

import csv
import math
import random

import pytest
import torch

from datamodules.collate import IGNORE_INDEX
from datamodules.errors import PlmbenchError
from datamodules.pretrain import split_documents
from datamodules.tokenization import load_tokenizer
from lit_models.objectives.salient_span import (
    SalientSpanMasking,
    SalientSpans,
    capitalised_runs,
    date_spans,
)
from tests.bench.invoke import plmbench, read, run_dir


def texts(text: str, spans) -> list[str]:
    return [text[a:b] for a, b in spans]


def test_dates_by_regular_expression():
    text = ("Born on 4 August 1961, she moved in March 1990 and on June 5, 2001 left; "
            "the 1990s ended, 12345 is no year, nor is May alone.")
    assert texts(text, date_spans(text)) == ["4 August 1961", "March 1990", "June 5, 2001",
                                             "1990s"]


@pytest.mark.parametrize(("sentence", "expected"), [
    ("Barack Obama was born in Honolulu, Hawaii.", ["Barack Obama", "Honolulu", "Hawaii"]),
    ("The University of Notre Dame was founded by Edward Sorin.",
     ["University of Notre Dame", "Edward Sorin"]),
    ("In the end the U.S. Senate and the Bank of England agreed.",
     ["U.S. Senate", "Bank of England"]),
    ("Paris is large.", []),  # only capitalised as the sentence's first word
    ("it rained all day and nobody came.", []),
    ("Members of the public said I was late.", []),
])
def test_entities_are_capitalised_runs(sentence, expected):
    assert texts(sentence, capitalised_runs(sentence)) == expected


def test_an_entity_overlapping_a_date_gives_way_to_it():
    text = "It closed on 12 March 1990 in Berlin."
    assert texts(text, SalientSpans()(text)) == ["12 March 1990", "Berlin"]
    assert texts(text, SalientSpans(dates=False)(text)) == ["March", "Berlin"]
    assert SalientSpans(entities="none")("Nothing here in Berlin.") == []
    with pytest.raises(PlmbenchError, match="use heuristic, none or a callable"):
        SalientSpans(entities="spacy")


WIKIPEDIA = {"name": "pretrain/wikipedia", "dataset": "wikipedia_en_sample",
             "config": "enwiki_pages_56.5M-57.0M", "hub_id": None, "text_field": "text",
             "document_format": "article", "splits": {"train": "train", "eval": []},
             "max_length": 64, "batch_size": 8, "max_train_samples": 12}


def test_masking_statistics_on_the_wikipedia_sample(mirror, minilm_path):
    tokenizer = load_tokenizer(minilm_path)
    documents = split_documents(WIKIPEDIA, "train")
    sentences = [s for d in documents for s in d]
    objective = SalientSpanMasking()
    examples = objective.make_examples(64, tokenizer)(documents, random.Random(0))
    share = len(examples) / len(sentences)
    # most encyclopedic sentences name an entity or a date; some are lists or fragments
    assert 0.5 < share < 1.0, share
    collate = objective.collator(tokenizer, seed=0)
    batch = collate(examples[:64])
    ids, labels = batch["input_ids"], batch["labels"]
    mask_id = tokenizer.special.mask
    for row, example in enumerate(examples[:64]):
        original = torch.tensor(example["input_ids"])
        n = len(original)
        masked = (labels[row] != IGNORE_INDEX).nonzero().squeeze(1)
        first, last = masked.min().item(), masked.max().item() + 1
        assert (first, last) in set(zip(example["spans"][::2], example["spans"][1::2],
                                        strict=True))  # exactly one of its spans ...
        assert len(masked) == last - first  # ... whole: every one of its tokens
        assert (ids[row, first:last] == mask_id).all()  # all [MASK], no 80/10/10
        assert torch.equal(labels[row, first:last], original[first:last])
        unmasked = torch.ones(n, dtype=torch.bool)
        unmasked[first:last] = False
        assert torch.equal(ids[row, :n][unmasked], original[unmasked])  # nothing else
    kept = SalientSpanMasking(fallback="random").make_examples(64, tokenizer)(
        documents, random.Random(0))
    assert len(kept) == len(sentences)
    spanless = [e for e in kept if not e["spans"]][:8]
    fallback = SalientSpanMasking(fallback="random").collator(tokenizer, seed=0)(spanless)
    assert ((fallback["labels"] != IGNORE_INDEX).sum(1) >= 1).all()  # BERT's random masking
    seeded = [{**e, "mask_seed": 7} for e in examples[:16]]
    assert torch.equal(collate(seeded)["input_ids"], collate(seeded)["input_ids"])


def test_tiny_ssm_pretraining_run_lowers_the_loss(mirror, tmp_path):
    args = ["model=bert-tiny-scratch", "task=pretrain/wikipedia", "objective=ssm",
            "task.max_train_samples=24", "task.eval_documents=6", "task.batch_size=16",
            "trainer.max_steps=12", "trainer.log_every_n_steps=1", "task.lr=2e-3",
            "trainer.enable_progress_bar=false"]
    done = plmbench("run", *args, f"results_dir={tmp_path}")
    assert done.rc == 0, done.err
    where = run_dir(tmp_path, "pretrain/wikipedia", *args[2:], label="bert-tiny-scratch")
    record = read(where)
    with open(where / "logs" / "metrics.csv") as f:
        train = [float(r["train/mlm_loss"]) for r in csv.DictReader(f) if r["train/mlm_loss"]]
    assert len(train) >= 10
    vocabulary = math.log(record["config"]["model"]["vocab_size"])
    assert train[0] == pytest.approx(vocabulary, abs=0.5)  # a random net: about uniform
    assert sum(train[-3:]) / 3 < sum(train[:3]) / 3 - 0.2
    assert record["metrics"]["heldout"]["mlm_loss"] < train[0]
