"""DistilBERT against transformers: random transformers checkpoints imported with ``from_hf`` give
the same ``last_hidden_state`` (DistilBertModel) and masked-LM logits (DistilBertForMaskedLM) to
1e-5 in float32 on padded batches; a student built from a BERT teacher holds every other teacher
layer and computes the teacher's embeddings (exports and the other contracts:
``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.nets.distilbert import (
    DistilBertForMaskedLM,
    DistilBertModel,
    student_of_bert,
)
from tests.conftest import require
from tests.nets.parity import TEXT, assert_close, batch, randomize_

transformers = require("transformers")

TOLERANCE = 1e-5
DISTILBERT = get_arch("distilbert")
#: sizes no other test uses: odd head and layer counts, tanh GELU
CONFIGS = [
    dict(dim=36, n_layers=3, n_heads=3, hidden_dim=50, activation="gelu_new",
         max_position_embeddings=83),
    dict(dim=40, n_layers=1, n_heads=5, hidden_dim=64, activation="gelu",
         max_position_embeddings=96),
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(DISTILBERT.tokenizer, TEXT, vocab_size=300, lowercase=True)


def checkpoint(cls_name, sizes, tokenizer, directory, **extra):
    values = dict(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.special.pad)
    config = transformers.DistilBertConfig(**{**values, **sizes, **extra})
    model = randomize_(getattr(transformers, cls_name)(config))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory, sizes["max_position_embeddings"])
    return model


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_distilbert_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("DistilBertModel", sizes, tokenizer, tmp_path)
    _, net, loaded_tokenizer = from_hf(tmp_path)
    assert isinstance(net, DistilBertModel) and net.pooler is None
    assert loaded_tokenizer.special == tokenizer.special
    inputs = batch(tokenizer, TEXT[:4])
    assert (inputs["attention_mask"] == 0).any(), "the batch must be padded"
    types = torch.randint(2, inputs["input_ids"].shape)  # ignored: there are no segments
    with torch.no_grad():
        ours = net.eval()(**inputs, token_type_ids=types)
        theirs = reference(**inputs)
    assert_close(ours.last_hidden_state, theirs.last_hidden_state, inputs["attention_mask"])


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_distilbert_for_masked_lm(sizes, tokenizer, tmp_path):
    reference = checkpoint("DistilBertForMaskedLM", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, DistilBertForMaskedLM)
    inputs = batch(tokenizer, TEXT[4:8])
    with torch.no_grad():
        logits = net.eval().mlm_head(net(**inputs).last_hidden_state)
        assert_close(logits, reference(**inputs).logits, inputs["attention_mask"])


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
