"""ALBERT's sentence-order pairs (Lan et al. 2020, §3.1): both segments always come from one
document, consecutive, and half of the pairs are swapped (label 1), the others in order (0)."""

import random

import pytest

from datamodules.errors import PlmbenchError
from lit_models.archs import Model, get_arch
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.objectives.mlm import MaskedLM
from lit_models.objectives.nsp import IN_ORDER, SWAPPED, make_segment_pairs
from tests.objectives.test_nsp import CLS, SEP, corpus, is_contiguous, split_pair


def test_sop_pairs_are_consecutive_segments_swapped_half_the_time() -> None:
    documents, where = corpus(3000, max_sentence=40)
    pairs = make_segment_pairs(documents, 64, False, random.Random(0), sop=True,
                               cls_id=CLS, sep_id=SEP)
    assert len(pairs) > 10_000 and all("next_sentence_label" not in p for p in pairs)
    labels = [p["sentence_order_label"] for p in pairs]
    assert abs(labels.count(SWAPPED) / len(labels) - 0.5) < 0.02  # std ~0.005
    for pair, label in zip(pairs, labels, strict=True):
        assert len(pair["input_ids"]) <= 64
        first, second = split_pair(pair)
        assert is_contiguous(first) and is_contiguous(second)
        assert where[first[0]][0] == where[second[0]][0]  # one document, never a random one
        earlier, later = (second, first) if label == SWAPPED else (first, second)
        assert label in (IN_ORDER, SWAPPED) and earlier[-1] < later[0]  # A's text precedes B's
    # unlike NSP, a single document makes pairs
    one = make_segment_pairs(documents[:1], 64, False, random.Random(0), sop=True,
                             cls_id=CLS, sep_id=SEP)
    assert all(where[split_pair(p)[0][0]][0] == 0 for p in one)


def test_sop_objective_needs_a_sentence_order_head() -> None:
    with pytest.raises(PlmbenchError, match="set one of them"):
        MaskedLM(nsp=True, sop=True)
    with pytest.raises(PlmbenchError, match="sentence-order-prediction head, and bert"):
        bert = BertForPreTraining(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=8))
        MaskedLM(sop=True).check(Model(get_arch("bert"), bert, None))
