"""BERT's next-sentence pairs (Devlin et al. 2019, §3.1 Task #2, Appendix A.2), RoBERTa's
FULL-SENTENCES packing (Liu et al. 2019, §4.2) and the NSP loss.

Every token id in the synthetic corpus is unique, so each token tells which document, sentence
and position it came from, and pair structure can be checked exactly.
"""

import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from datamodules.errors import PlmbenchError
from lit_models.objectives.nsp import IS_NEXT, NOT_NEXT, make_segment_pairs, next_sentence_loss

CLS, SEP = 2, 3
FIRST_ID = 10  # corpus ids start here, so they never collide with [CLS]/[SEP]


def corpus(n_documents: int, max_sentence: int, seed: int = 0):
    """Documents of 1-25 sentences of 1..max_sentence unique ids, and id -> (doc, sentence)."""
    rng = random.Random(seed)
    ids = iter(range(FIRST_ID, 10**9))
    documents = [
        [[next(ids) for _ in range(rng.randint(1, max_sentence))]
         for _ in range(rng.randint(1, 25))]
        for _ in range(n_documents)
    ]
    where = {
        t: (d, s) for d, doc in enumerate(documents) for s, sent in enumerate(doc) for t in sent
    }
    return documents, where


def split_pair(example: dict) -> tuple[list[int], list[int]]:
    ids, types = example["input_ids"], example["token_type_ids"]
    assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2
    boundary = ids.index(SEP)
    assert types == [0] * (boundary + 1) + [1] * (len(ids) - boundary - 1)
    return ids[1:boundary], ids[boundary + 1 : -1]


def is_contiguous(tokens: list[int]) -> bool:
    return tokens == list(range(tokens[0], tokens[0] + len(tokens)))


def test_pairs_are_half_is_next_and_truly_consecutive() -> None:
    torch.manual_seed(0)
    documents, where = corpus(3000, max_sentence=40)  # long sentences force truncation
    pairs = make_segment_pairs(documents, 64, True, random.Random(0), cls_id=CLS, sep_id=SEP)
    assert len(pairs) > 10_000
    labels = [p["next_sentence_label"] for p in pairs]
    assert set(labels) == {IS_NEXT, NOT_NEXT}
    assert abs(labels.count(IS_NEXT) / len(labels) - 0.5) < 0.02  # std ~0.005
    for pair in pairs:
        assert len(pair["input_ids"]) <= 64
        tokens_a, tokens_b = split_pair(pair)
        assert tokens_a and tokens_b and is_contiguous(tokens_a) and is_contiguous(tokens_b)
        doc_a, last_a = where[tokens_a[-1]]
        doc_b, first_b = where[tokens_b[0]]
        # A ends at a sentence end, B starts at a sentence start (A loses its front, B its back)
        assert documents[doc_a][last_a][-1] == tokens_a[-1]
        assert documents[doc_b][first_b][0] == tokens_b[0]
        if pair["next_sentence_label"] == IS_NEXT:
            assert (doc_b, first_b) == (doc_a, last_a + 1)
        else:
            assert doc_b != doc_a


def test_pairs_are_deterministic_and_short_seq_prob_shortens() -> None:
    documents, _ = corpus(300, max_sentence=12)
    full = make_segment_pairs(documents, 128, True, random.Random(1), 0.0, cls_id=CLS, sep_id=SEP)
    again = make_segment_pairs(documents, 128, True, random.Random(1), 0.0, cls_id=CLS, sep_id=SEP)
    short = make_segment_pairs(documents, 128, True, random.Random(1), 1.0, cls_id=CLS, sep_id=SEP)
    assert full == again

    def mean_length(pairs: list[dict]) -> float:
        return sum(len(p["input_ids"]) for p in pairs) / len(pairs)

    # a target drawn uniformly from [2, 125] per document instead of 125 everywhere
    assert mean_length(short) < 0.75 * mean_length(full)


def test_full_sentences_pack_every_sentence_in_order() -> None:
    documents, where = corpus(200, max_sentence=20)
    packed = make_segment_pairs(documents, 48, False, random.Random(0), cls_id=CLS, sep_id=SEP)
    stream: list[int] = []
    for example in packed:
        ids = example["input_ids"]
        assert "next_sentence_label" not in example
        assert len(ids) <= 48 and ids[0] == CLS and ids[-1] == SEP
        assert example["token_type_ids"] == [0] * len(ids)
        text = ids[1:-1]
        assert text[0] != SEP  # a document separator never opens an input
        # whole sentences only; an inner [SEP] marks the start of a new document
        opens_document = [t != SEP and documents[where[t][0]][0][0] == t for t in text]
        document_starts = [k for k, opens in enumerate(opens_document) if opens and k > 0]
        assert document_starts == [k + 1 for k, t in enumerate(text) if t == SEP]
        first, last = text[0], text[-1]
        assert documents[where[first][0]][where[first][1]][0] == first
        assert documents[where[last][0]][where[last][1]][-1] == last
        stream.extend(t for t in text if t != SEP)
    assert stream == [t for doc in documents for sentence in doc for t in sentence]
    # greedy packing: inputs are nearly full
    assert sum(len(e["input_ids"]) for e in packed) / len(packed) > 0.75 * 48


def test_bad_inputs_raise_one_line_errors() -> None:
    documents, _ = corpus(1, max_sentence=5)
    with pytest.raises(PlmbenchError, match="at least 2"):
        make_segment_pairs(documents, 64, True, random.Random(0), cls_id=CLS, sep_id=SEP)
    with pytest.raises(PlmbenchError, match="too short"):
        make_segment_pairs(documents * 2, 4, True, random.Random(0), cls_id=CLS, sep_id=SEP)


def test_next_sentence_loss_is_cross_entropy_of_the_head() -> None:
    torch.manual_seed(0)
    pooled, labels, head = torch.randn(8, 16), torch.randint(0, 2, (8,)), nn.Linear(16, 2)
    logits = head(pooled)
    expected = (logits.logsumexp(-1) - logits.gather(1, labels[:, None]).squeeze(1)).mean()
    assert torch.allclose(next_sentence_loss(pooled, labels, head), expected, atol=1e-6)
    assert torch.allclose(expected, F.cross_entropy(logits, labels), atol=1e-6)
