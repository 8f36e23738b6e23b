"""RAG: the two marginalisations against brute-force products and sums in probability space;
RAG-Token decoding against a step-by-step brute-force marginal (greedy) and with/without the cache
(beam); RAG-Sequence thorough decoding equals the exact marginal of each generated hypothesis, and
fast decoding never exceeds it, equalling it where every document produced the hypothesis."""

import math

import pytest
import torch

from datamodules.tokenization import TextTokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.core.generation import GenerationConfig, generate
from lit_models.families.open_qa.rag import (
    fast_marginals,
    generate_rag_token,
    hypothesis_scores,
    rag_sequence_log_likelihood,
    rag_token_log_likelihood,
    sequence_log_probs,
    thorough_marginals,
)
from lit_models.nets.bart import BartConfig, BartForConditionalGeneration
from tests.nets.parity import TEXT, seq2seq_batch

BART = get_arch("bart")


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    """A small vocabulary of BART's tokenizer spec."""
    return train_tokenizer(BART.tokenizer, TEXT, vocab_size=300, lowercase=False)


SIZES = dict(d_model=24, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
             decoder_attention_heads=3, encoder_ffn_dim=40, decoder_ffn_dim=36,
             activation_function="gelu", max_position_embeddings=80)
EOS = 134  # a token the random model emits mid-sequence: hypotheses end at different lengths


def test_marginalisations_equal_brute_force():
    torch.manual_seed(0)
    B, k, T = 2, 3, 4
    doc_logp = torch.randn(B, k, dtype=torch.float64).log_softmax(-1)
    token_logp = -torch.rand(B, k, T, dtype=torch.float64) * 2
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.float64)
    sequence = rag_sequence_log_likelihood(doc_logp, token_logp, mask)
    token = rag_token_log_likelihood(doc_logp, token_logp, mask)
    p_z, p_t = doc_logp.exp(), token_logp.exp()
    for b in range(B):
        steps = int(mask[b].sum())
        seq = sum(p_z[b, z] * math.prod(p_t[b, z, t] for t in range(steps)) for z in range(k))
        tok = math.prod(sum(p_z[b, z] * p_t[b, z, t] for z in range(k)) for t in range(steps))
        assert sequence[b].item() == pytest.approx(math.log(seq), abs=1e-12)
        assert token[b].item() == pytest.approx(math.log(tok), abs=1e-12)


@pytest.fixture(scope="module")
def net(tokenizer):
    torch.manual_seed(0)
    config = BartConfig(vocab_size=tokenizer.vocab_size, init_std=0.2, eos_token_id=EOS, **SIZES)
    return BartForConditionalGeneration(config).eval()


@pytest.fixture(scope="module")
def documents(tokenizer):
    """B = 2 questions × k = 3 documents of padded inputs and their p(z|x)."""
    batch = seq2seq_batch(tokenizer, TEXT[:6], TEXT[:6])
    torch.manual_seed(1)
    return batch["input_ids"], batch["attention_mask"], torch.randn(2, 3).log_softmax(-1)


def brute_next_logp(net, ids, mask, doc_logp, prefix):
    """log Σ_z p(z|x) p(y|x, z, prefix) [V] of one question, one full forward per document."""
    probs = 0
    for z in range(len(ids)):
        decoder = torch.tensor([[net.config.decoder_start_token_id, *prefix]])
        keep = mask[z].bool()
        hidden = net(input_ids=ids[z][keep][None], decoder_input_ids=decoder).last_hidden_state
        probs = probs + doc_logp[z].exp() * torch.softmax(net.logits(hidden[0, -1]), -1)
    return probs.log()


def test_rag_token_greedy_follows_the_brute_force_marginal(net, documents, tokenizer):
    ids, mask, doc_logp = documents
    cfg = GenerationConfig(max_new_tokens=6)
    out = generate_rag_token(net, ids, mask, doc_logp, cfg)
    pad = tokenizer.special.pad
    for b in range(2):
        prefix = []
        for _ in range(6):
            token = int(brute_next_logp(net, ids[3 * b:3 * b + 3], mask[3 * b:3 * b + 3],
                                        doc_logp[b], prefix).argmax())
            prefix.append(token)
            if token == EOS:
                break
        row = [t for t in out[b].tolist() if t != pad]
        assert row == prefix


def test_rag_token_beam_search_reorders_every_documents_cache(net, documents):
    ids, mask, doc_logp = documents
    settings = dict(num_beams=3, max_new_tokens=7, length_penalty=1.0)
    cached = generate_rag_token(net, ids, mask, doc_logp, GenerationConfig(**settings))
    recomputed = generate_rag_token(net, ids, mask, doc_logp,
                                    GenerationConfig(**settings, use_cache=False))
    assert torch.equal(cached, recomputed)
    one = generate_rag_token(net, ids[:2], mask[:2], torch.zeros(2, 1),
                             GenerationConfig(**settings))
    assert torch.equal(one, generate(BART, net, ids[:2], mask[:2], GenerationConfig(**settings)))


def test_thorough_is_the_exact_marginal_and_fast_a_lower_bound(net, documents, tokenizer):
    ids, mask, doc_logp = documents
    pad = tokenizer.special.pad
    generated = generate(BART, net, ids, mask, GenerationConfig(max_new_tokens=5))
    hypotheses = generated.view(2, 3, -1)
    hypotheses[1, 2] = hypotheses[1, 0]  # one hypothesis produced by two documents
    scores = hypothesis_scores(net, ids, mask, hypotheses, 3, pad)
    thorough = thorough_marginals(doc_logp, scores)
    for b in range(2):
        for h in range(3):
            y = [t for t in hypotheses[b, h].tolist() if t != pad]
            total = 0.0
            for z in range(3):
                row = 3 * b + z
                source = ids[row][mask[row].bool()][None]
                logp = sequence_log_probs(net, source, torch.ones_like(source),
                                          torch.tensor([y]), pad).sum()
                total += math.exp(doc_logp[b, z] + logp)
            assert thorough[b, h].item() == pytest.approx(math.log(total), abs=1e-5)
    own = scores.diagonal(dim1=1, dim2=2)  # each hypothesis under the document that made it
    fast = fast_marginals(doc_logp, own, hypotheses)
    assert (fast <= thorough + 1e-6).all()
    expected = (doc_logp[1, [0, 2]] + own[1, [0, 2]]).logsumexp(0)
    assert fast[1, 0].item() == pytest.approx(expected.item()) == fast[1, 2].item()
    assert fast[0, 1].item() == pytest.approx((doc_logp[0, 1] + own[0, 1]).item())
