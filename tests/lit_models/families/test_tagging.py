"""Sequence labelling: labels on first sub-tokens for every tokenizer family, BIO decoding,
entity-level scores against values computed by hand, and a tiny run that leaves a record,
prediction files and a tagging board row."""

import itertools
import json

import numpy as np
import pytest

from bench.example_outputs import read_outputs
from datamodules.tagging import encode_words
from datamodules.tokenization import load_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.metrics.tagging import bio_decode, entity_scores
from tests.bench.invoke import plmbench, read, run_dir

WORDS = ["Familial", "adenomatous", "polyposis", "(", "FAP", ")", "is", "rare", "."]


@pytest.fixture(params=["wordpiece", "bpe"])
def tokenizer(request, minilm_path):
    if request.param == "wordpiece":
        return load_tokenizer(minilm_path)
    texts = ["Familial adenomatous polyposis is a rare disease of the colon."] * 30
    return train_tokenizer(get_arch("roberta").tokenizer, texts, 400, False)


def test_each_word_is_labelled_at_its_first_subtoken(tokenizer):
    (row,) = encode_words(tokenizer.words_encoder(64), [WORDS])
    words = row["word_ids"]
    assert sorted(w for w in words if w >= 0) == list(range(len(WORDS)))
    assert words[0] == -1 and words[-1] == -1  # [CLS]/<s> and [SEP]/</s>
    # each word tokenized on its own: its sub-tokens, from its first on, spell it; a byte-level
    # BPE's word starts after a space, as inside a sentence
    pieces = [tokenizer.backend.id_to_token(i) for i in row["input_ids"]]
    starts = [token for token, word in enumerate(words) if word >= 0] + [len(pieces) - 1]
    for word, (start, end) in enumerate(itertools.pairwise(starts)):
        spelled = "".join(p.removeprefix("##") for p in pieces[start:end])
        if tokenizer.family == "bpe":
            assert spelled.startswith("\u0120")
            spelled = spelled[1:]
        assert spelled == (WORDS[word].lower() if tokenizer.lowercase else WORDS[word])
    # more tokens than words: continuation sub-tokens carry no label
    assert words.count(-1) > 2


def test_bio_decoding_opens_entities_as_conlleval_reads_them():
    assert bio_decode(["O", "I-PER", "I-PER", "B-LOC", "I-PER", "I-LOC"]) == \
        ["O", "B-PER", "I-PER", "B-LOC", "B-PER", "B-LOC"]


def test_entity_scores_computed_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-PER"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"],  # PER right; LOC missed, ORG spurious
                 ["B-ORG", "O", "B-PER"]]  # both right
    # gold entities 4, predicted 4, correct 3: P = R = F1 = 3/4
    assert entity_scores(predicted, gold) == pytest.approx(
        {"precision": 0.75, "recall": 0.75, "f1": 0.75})
    # a boundary error is a miss and a false alarm: gold 1, predicted 1, correct 0
    assert entity_scores(predicted=[["B-PER", "O"]], gold=[["B-PER", "I-PER"]])["f1"] == 0.0
    # P 1/1, R 1/2: F1 2/3
    scores = entity_scores(predicted=[["B-PER", "O", "O"]], gold=[["B-PER", "O", "B-LOC"]])
    assert scores == pytest.approx({"precision": 1.0, "recall": 0.5, "f1": 2 / 3})


TINY = ["model=bert-tiny-scratch", "task=ner/ncbi_disease", "task.max_train_samples=64",
        "task.max_eval_samples=24", "trainer.max_steps=3", "trainer.enable_progress_bar=false"]


def test_tiny_run_leaves_a_record_predictions_and_a_board_row(mirror, tmp_path):
    done = plmbench("run", *TINY, f"results_dir={tmp_path}")
    assert done.rc == 0, done.err
    where = run_dir(tmp_path, "ner/ncbi_disease", *TINY[2:])
    record = read(where)
    assert record["predictions"] == {"validation": "predictions/validation.jsonl",
                                     "test": "predictions/test.jsonl"}
    lines = [json.loads(line) for line in (where / "predictions/test.jsonl").open()]
    assert len(lines) == 24
    assert all(len(s["tokens"]) == len(s["gold"]) == len(s["predicted"]) for s in lines)
    rescored = entity_scores([s["predicted"] for s in lines], [s["gold"] for s in lines])
    assert record["metrics"]["test"] == pytest.approx(rescored)
    outputs = read_outputs(record, "test")  # the paired bootstrap's per-sentence counts
    every = np.arange(len(outputs.ids))[None, :]
    assert {name: outputs.metric(name, every)[0] for name in rescored} == pytest.approx(rescored)
    board = plmbench("leaderboard", str(tmp_path), "--board", "tagging")
    assert board.rc == 0, board.err
    rows = [line for line in board.out.splitlines() if line.startswith("| bert-tiny-scratch")]
    assert len(rows) == 1 and "F1 (test)" in board.out
