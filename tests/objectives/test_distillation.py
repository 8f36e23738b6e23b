"""DistilBERT's triple loss (Sanh et al. 2019, §2): each term against an independent computation,
the teacher frozen and in eval mode, the checks a teacher must pass, and tiny pretraining runs
whose losses fall: distillation into a DistilBERT student, ALBERT's MLM + SOP with n-gram masking.
"""

import random

import pytest
import torch
import torch.nn.functional as F

from datamodules.errors import PlmbenchError
from datamodules.tokenization import VOCAB_TXT, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.core.build import pretrained_net
from lit_models.interop.hf import from_hf, to_hf
from lit_models.nets.albert import AlbertConfig, AlbertForPreTraining
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.nets.distilbert import student_of_bert
from lit_models.objectives.distillation import Distillation, cosine_loss, distillation_loss
from lit_models.objectives.mlm import MaskedLM
from tests.nets.parity import TEXT

SENTENCES = [s.strip() + "." for text in TEXT[:4] for s in text.split(".") if s.strip()]


def test_distillation_loss_is_t_squared_kl_of_softened_distributions() -> None:
    torch.manual_seed(0)
    s, t, T = torch.randn(7, 11), torch.randn(7, 11), 2.5
    p, q = (t / T).softmax(-1), (s / T).softmax(-1)
    expected = T**2 * (p * (p.log() - q.log())).sum(-1).mean()
    assert torch.allclose(distillation_loss(s, t, T), expected, atol=1e-6)
    assert distillation_loss(t, t, T).abs() < 1e-6


def test_cosine_loss_ignores_padding() -> None:
    torch.manual_seed(0)
    s, t = torch.randn(2, 4, 8), torch.randn(2, 4, 8)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    rows = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    expected = sum(1 - F.cosine_similarity(s[i, j], t[i, j], dim=0) for i, j in rows) / 5
    assert torch.allclose(cosine_loss(s, t, mask), expected, atol=1e-6)
    t[0, 3] = -s[0, 3]  # a padded position counts for nothing
    assert torch.allclose(cosine_loss(s, t, mask), expected, atol=1e-6)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(VOCAB_TXT, SENTENCES * 5, vocab_size=200, lowercase=True)


def teacher_dir(tokenizer, tmp_path):
    torch.manual_seed(0)
    teacher = BertForPreTraining(BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64))
    return to_hf(Model(get_arch("bert"), teacher, tokenizer), tmp_path / "teacher")


def documents(tokenizer) -> list:
    encode = tokenizer.backend.encode
    return [[encode(s, add_special_tokens=False).ids for s in SENTENCES[i:i + 4]]
            for i in range(0, len(SENTENCES), 4)] * 3


def train(objective, net, tokenizer, steps: int = 25) -> list[float]:
    """Losses of ``steps`` AdamW steps on the objective's own examples and collate."""
    examples = objective.make_examples(32, tokenizer)(documents(tokenizer), rng=random.Random(0))
    collate = objective.collator(tokenizer, seed=0)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)
    history = []
    for step in range(steps):
        start = (4 * step) % (len(examples) - 8)
        batch = collate(examples[start:start + 8])
        loss = sum(objective.losses(net.train(), batch).values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss.item())
    return history


def test_distillation_trains_the_student_with_a_frozen_teacher(tokenizer, tmp_path):
    directory = teacher_dir(tokenizer, tmp_path)
    objective = Distillation(teacher=pretrained_net(f"hf:{directory}"), alpha_ce=5.0,
                             alpha_mlm=2.0, alpha_cos=1.0)
    _, teacher_net, _ = from_hf(directory, with_heads=True)
    student = get_arch("distilbert").init_from_arch["bert"](teacher_net, True)
    objective.check(Model(get_arch("distilbert"), student, tokenizer))
    teacher = objective.teacher
    before = [p.clone() for p in teacher.parameters()]
    history = train(objective, student, tokenizer)
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, teacher.parameters(), strict=True))
    assert sum(history[-5:]) < sum(history[:5])
    batch = objective.collator(tokenizer, 0)(
        objective.make_examples(32, tokenizer)(documents(tokenizer), rng=random.Random(0))[:4])
    terms = objective._terms(student.eval(), batch)
    weighted = objective.losses(student, batch)
    assert torch.allclose(weighted["distillation_loss"], 5.0 * terms["distillation_loss"])
    assert torch.allclose(weighted["cosine_loss"], 1.0 * terms["cosine_loss"])


def test_a_student_must_read_the_teachers_vocabulary(tokenizer, tmp_path):
    directory = teacher_dir(tokenizer, tmp_path)
    other = train_tokenizer(VOCAB_TXT, SENTENCES[:3] * 5, vocab_size=100, lowercase=True)
    torch.manual_seed(0)
    student = student_of_bert(BertForPreTraining(BertConfig(
        vocab_size=other.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64)))
    with pytest.raises(PlmbenchError, match="different vocabularies"):
        Distillation(teacher=pretrained_net(f"hf:{directory}")).check(
            Model(get_arch("distilbert"), student, other))
    with pytest.raises(PlmbenchError, match="use ckpt:<run dir>, hf:<dir> or hf:<org>"):
        pretrained_net("scratch")


def test_albert_pretrains_with_sop_and_ngram_masking():
    spec = get_arch("albert").tokenizer
    tokenizer = train_tokenizer(spec, SENTENCES * 5, vocab_size=150, lowercase=True)
    torch.manual_seed(0)
    net = AlbertForPreTraining(AlbertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, embedding_size=16, num_hidden_layers=3,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64))
    objective = MaskedLM(sop=True, max_ngram=3)
    objective.check(Model(get_arch("albert"), net, tokenizer))
    history = train(objective, net, tokenizer)
    assert sum(history[-5:]) < sum(history[:5])
