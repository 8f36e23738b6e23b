"""SuperGLUE's own formulations: ReCoRD and MultiRC candidates (expansion, whole questions kept by
the caps, scoring by question), WiC and WSC spans (characters to tokens, truncation, the
self-attentive pooling), on hub-schema fixtures."""

import random

import datasets
import pytest
import torch

from datamodules.candidates import CandidateDataModule, multirc, record
from datamodules.spans import SpanPairDataModule, token_span, word_span
from datamodules.tokenization import BERT, train_tokenizer
from lit_models.families.candidates import score_multirc, score_record
from lit_models.metrics import build_metrics
from lit_models.metrics.superglue import multirc_scores, record_scores
from lit_models.nets.heads import SpanPairClassifier
from lit_models.nets.outputs import EncoderOutput
from tests import hub_fixtures

#: the splits read here are cached by `datasets` in a per-test directory, never ~/.cache
pytestmark = pytest.mark.usefixtures("datasets_cache")


@pytest.fixture(scope="module")
def tokenizer():
    texts = [hub_fixtures.sentence(random.Random(i)) for i in range(200)]
    return train_tokenizer(BERT, texts + hub_fixtures.ENTITIES * 5, vocab_size=300,
                           lowercase=True)


def test_record_fills_the_placeholder_with_each_distinct_entity():
    rows = {"passage": ["Obama met Alice.\n@highlight\nParis"], "query": ["@placeholder smiled"],
            "entities": [["Obama", "Alice", "Obama"]], "answers": [["Alice"]],
            "idx": [{"passage": 3, "query": 7}]}
    out = record(rows)
    assert out["second"] == ["Obama smiled", "Alice smiled"]
    assert out["label"] == [0, 1] and out["group"] == ["3-7", "3-7"]
    assert out["first"][0] == "Obama met Alice.\n- Paris"


def test_multirc_caps_whole_questions(tmp_path, monkeypatch):
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path))
    hub_fixtures.write(tmp_path, "super_glue", "multirc", "validation", n=30)
    task = CandidateDataModule.checked({
        "name": "superglue/multirc", "dataset": "super_glue", "config": "multirc",
        "format": "multirc", "splits": {"eval": ["validation"]}, "max_length": 64,
        "batch_size": 4})
    rows = CandidateDataModule.rows(task, "validation", 3)
    assert len(set(rows["group"])) == 3
    full = CandidateDataModule.rows(task, "validation", None)
    groups = full["group"]
    assert rows["group"] == groups[:len(rows)] and groups[len(rows)] not in rows["group"]


def test_scoring_reads_each_question_whole():
    candidates = datasets.Dataset.from_dict(record({
        "passage": ["p", "q"], "query": ["@placeholder ran", "x @placeholder"],
        "entities": [["A", "B", "C"], ["D", "E"]], "answers": [["B"], ["D", "E"]],
        "idx": [{"passage": 0, "query": 0}, {"passage": 1, "query": 1}]}))
    scorer = build_metrics(["f1"], "entities")
    rows = score_record(scorer, candidates, [0.1, 0.7, 0.3, 0.2, 0.6])
    assert [r["prediction_text"] for r in rows] == ["B", "E"]
    assert scorer.compute() == record_scores(["B", "E"], [["B"], ["D", "E"]]) == {
        "exact_match": 1.0, "f1": 1.0}
    options = datasets.Dataset.from_dict(multirc({
        "paragraph": ["p"] * 4, "question": ["q1", "q1", "q2", "q2"], "answer": list("abcd"),
        "label": [1, 0, 1, 1],
        "idx": [{"paragraph": 0, "question": q, "answer": a} for q, a in
                ((0, 0), (0, 1), (1, 0), (1, 1))]}))
    scorer = build_metrics(["f1a"], "answer_options")
    rows = score_multirc(scorer, options, [0.9, 0.2, 0.8, 0.4])
    metrics = scorer.compute()
    assert [r["prediction"] for r in rows] == [1, 0, 1, 0]
    assert metrics == multirc_scores([1, 0, 1, 0], [1, 0, 1, 1], ["0-0", "0-0", "0-1", "0-1"])
    assert metrics["exact_match"] == 0.5


def test_spans_cover_the_marked_words(tokenizer):
    text = "The quick dog sat on the mat because it was lazy ."
    start, end = word_span(text, 8, "it")
    assert text[start:end] == "it"
    encoding = tokenizer.backend.encode("A bird sat .", text)
    first, last = token_span(encoding, 1, start, end)
    assert tokenizer.backend.decode(encoding.ids[first:last]) == "it"
    truncated = tokenizer.truncating(6).encode("A bird sat .", text)
    assert token_span(truncated, 1, start, end) == (0, 1)  # cut away: the first token


def test_wic_examples_carry_both_word_spans(tmp_path, monkeypatch, tokenizer):
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path))
    hub_fixtures.write(tmp_path, "super_glue", "wic", "validation", n=6)
    task = {"name": "superglue/wic", "dataset": "super_glue", "config": "wic", "format": "wic",
            "text_fields": ["sentence1", "sentence2"], "label_field": "label", "num_labels": 2,
            "splits": {"eval": ["validation"]}, "max_length": 64, "batch_size": 2}
    dm = SpanPairDataModule(task, tokenizer)
    dm.setup("validate")
    words = SpanPairDataModule.rows(dm.task, "validation", None)["word"]
    for example, word in zip(dm.eval_data[0], words, strict=True):
        s1, e1, s2, e2 = example["spans"]
        assert tokenizer.backend.decode(example["input_ids"][s1:e1]) == word
        assert tokenizer.backend.decode(example["input_ids"][s2:e2]) == word
        assert example["token_type_ids"][s1] == 0 and example["token_type_ids"][s2] == 1
    batch = next(iter(dm.val_dataloader()[0]))
    assert batch["spans"].shape == (2, 4)


def test_span_pooling_is_the_attention_weighted_sum_of_the_span():
    class Config:
        hidden_size, initializer_range = 4, 0.5

    head = SpanPairClassifier(Config, 2, 0.0, with_pooled=True).eval()
    hidden = torch.randn(2, 6, 4)
    spans = torch.tensor([[1, 3, 4, 5], [0, 1, 2, 6]])
    expected = []
    for row in range(2):
        parts = [hidden[row, 0]]
        for start, end in spans[row].view(2, 2).tolist():
            weights = head.attention(hidden[row, start:end]).squeeze(-1).softmax(0)
            parts.append((weights[:, None] * hidden[row, start:end]).sum(0))
        expected.append(head.out(torch.cat(parts)))
    with torch.no_grad():
        got = head(EncoderOutput(hidden, None, None), spans)
    assert torch.allclose(got, torch.stack(expected).detach(), atol=1e-6)
