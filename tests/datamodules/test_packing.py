"""Packed pretraining rows (datamodules/packing.py): best-fit decreasing puts every example in
exactly one row and never overfills one, packed rows carry their examples' positions, sequence
ids and labels, and on the Wikipedia sample every MLM-family objective's batches are at least 98%
tokens (unpacked: 80-87%)."""

import random

import pytest
import torch

from datamodules.collate import IGNORE_INDEX, token_mask
from datamodules.packing import PackingConfig, collate_packed, efficiency, pack_examples
from datamodules.tokenization import load_tokenizer
from lit_models.families.pretrain import pretraining_datamodule
from lit_models.objectives.mlm import MaskedLM

WIKIPEDIA = dict(
    name="wikipedia-sample", dataset="wikipedia_en_sample", config="enwiki_pages_56.5M-57.0M",
    text_field="text", splits={"train": "train"}, document_format="article", max_length=128,
    max_train_samples=300, batch_size=32,
)


def example(length: int, label: int | None = None) -> dict:
    out = {"input_ids": [2, *range(10, 10 + length - 2), 3], "token_type_ids": [0] * length}
    return out if label is None else {**out, "next_sentence_label": label}


def test_every_example_lands_in_one_row_that_it_fits():
    rng = random.Random(0)
    lengths = [rng.randint(3, 32) for _ in range(500)] + [32] * 20
    examples = [example(n, label=i) for i, n in enumerate(lengths)]
    rows = pack_examples(examples, 32)
    assert all(len(row["input_ids"]) <= 32 for row in rows)
    labels = sorted(label for row in rows for label in row["next_sentence_label"])
    assert labels == list(range(len(examples)))  # each example exactly once
    for row in rows:  # the row's tokens are its examples', end to end
        starts = [i for i, p in enumerate(row["position_ids"]) if p == 0]
        pieces = [row["input_ids"][a:b] for a, b in zip(starts, [*starts[1:], None],
                                                         strict=True)]
        assert [len(examples[label]["input_ids"]) for label in row["next_sentence_label"]] == \
            [len(piece) for piece in pieces]
        assert row["sequence_ids"] == [k + 1 for k, p in enumerate(pieces) for _ in p]
    # within 3% of the lower bound, every row full: ceil(total tokens / 32) = 301 rows
    assert len(rows) <= 1.03 * -(-sum(lengths) // 32)
    assert efficiency(rows, 32) > 0.97


def test_examples_that_cannot_share_a_row_stay_as_they_are():
    examples = [example(30), example(31), example(32)]
    assert pack_examples(examples, 32) == examples
    with pytest.raises(ValueError, match="exceeds"):
        pack_examples([example(40)], 32)


def test_packed_rows_collate_into_flat_example_labels_and_first_positions():
    rows = pack_examples([example(5, 1), example(4, 0), example(9, 1), example(8, 0)], 10)
    batch = collate_packed(rows, pad_id=0, example_keys=["next_sentence_label"])
    ids = batch["input_ids"].flatten()
    assert (ids[batch["sequence_starts"]] == 2).all()  # every example's [CLS]
    assert len(batch["sequence_starts"]) == len(batch["next_sentence_label"]) == 4
    first_rows = batch["sequence_starts"] // batch["input_ids"].shape[1]
    expected = [label for row in rows for label in row["next_sentence_label"]]
    assert batch["next_sentence_label"].tolist() == expected
    assert first_rows.tolist() == [r for r, row in enumerate(rows)
                                   for _ in row["next_sentence_label"]]
    pad = batch["sequence_ids"] == 0
    assert torch.equal(pad, ~token_mask(batch))  # padding belongs to no example


@pytest.fixture
def tokenizer(minilm_path):
    return load_tokenizer(minilm_path)


@pytest.mark.parametrize(("objective", "cross_documents"), [
    ({}, True), ({}, False), ({"nsp": True}, True), ({"sop": True}, True)])
def test_packed_wikipedia_batches_are_at_least_98_percent_tokens(mirror, tokenizer, objective,
                                                                 cross_documents):
    """The share of a batch's [B x T] slots holding tokens, over a whole training epoch on 300
    Wikipedia articles at 128 tokens: FULL-SENTENCES run on across documents, documents packed
    apart (block-diagonal attention), and NSP / SOP pairs packed apart."""
    packing = {"enabled": True, "cross_documents": cross_documents}
    dm = pretraining_datamodule({**WIKIPEDIA, "packing": packing}, tokenizer,
                                MaskedLM(**objective), seed=0)
    dm.setup("fit")
    tokens = slots = 0
    for batch in dm.train_dataloader():
        tokens += int(token_mask(batch).sum())
        slots += batch["input_ids"].numel()
        assert (batch["labels"][~token_mask(batch)] == IGNORE_INDEX).all()
    assert tokens / slots >= 0.98
    unpacked = pretraining_datamodule(WIKIPEDIA, tokenizer, MaskedLM(**objective), seed=0)
    unpacked.setup("fit")
    assert efficiency(unpacked.train_data, 128) < 0.9  # what packing is for
    packed_tokens = sum(len(row["input_ids"]) for row in dm.train_data)
    assert packed_tokens == pytest.approx(tokens)


def test_packing_is_off_unless_the_task_asks():
    assert PackingConfig.of(WIKIPEDIA) == PackingConfig(enabled=False)
    assert PackingConfig.of({"packing": {"enabled": True}}).cross_documents
