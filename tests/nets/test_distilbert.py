"""DistilBERT reads no token types; a student built from a BERT teacher holds every other teacher
layer and computes the teacher's embeddings (parity with transformers:
``tests/nets/test_parity.py``; exports and the other contracts: ``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import train_tokenizer
from lit_models.archs import get_arch
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.nets.distilbert import (
    DistilBertConfig,
    DistilBertModel,
    student_of_bert,
)
from tests.nets.parity import TEXT, batch, randomize_

DISTILBERT = get_arch("distilbert")


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(DISTILBERT.tokenizer, TEXT, vocab_size=300, lowercase=True)


def test_token_types_are_ignored(tokenizer):
    """DistilBERT has no segment embeddings: token type ids, as a pair's batch carries them,
    change nothing (the registry declares none: the contract suite passes none)."""
    net = randomize_(DistilBertModel(DistilBertConfig(
        vocab_size=tokenizer.vocab_size, dim=24, n_layers=1, n_heads=3, hidden_dim=30))).eval()
    assert net.pooler is None
    inputs = batch(tokenizer, TEXT[:4])
    types = torch.randint(2, inputs["input_ids"].shape)
    with torch.no_grad():
        assert torch.equal(net(**inputs, token_type_ids=types).last_hidden_state,
                           net(**inputs).last_hidden_state)


def test_student_takes_every_other_teacher_layer(tokenizer):
    teacher = randomize_(BertForPreTraining(BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=24, num_hidden_layers=5,
        num_attention_heads=3, intermediate_size=30, max_position_embeddings=64)))
    student = student_of_bert(teacher).eval()
    assert student.config.n_layers == 3 and student.config.dim == 24
    for mine, theirs in zip(student.distilbert.encoder.layers,
                            teacher.bert.encoder.layers[::2], strict=True):
        for (name, p), q in zip(mine.named_parameters(), theirs.parameters(), strict=True):
            assert torch.equal(p, q), name
    assert torch.equal(student.mlm_head.dense.weight, teacher.mlm_head.dense.weight)
    assert torch.equal(student.mlm_head.bias, teacher.mlm_head.bias)
    ids = batch(tokenizer, TEXT[:2])["input_ids"]
    with torch.no_grad():  # segment A folded into the positions: the same embeddings
        assert torch.allclose(student.distilbert.embeddings(ids), teacher.bert.embeddings(ids),
                              atol=1e-6)
    assert student_of_bert(teacher, with_heads=False).__class__ is DistilBertModel
    with pytest.raises(ValueError, match="post-LN"):
        student_of_bert(BertForPreTraining(BertConfig(
            vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=8, pre_norm=True)))
