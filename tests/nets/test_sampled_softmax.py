"""The biLM's sampled softmax (lit_models/nets/elmo.py; Jean et al. 2015, Jozefowicz et al. 2016):
the log-uniform sampler draws ids with the probabilities Q it corrects by, the sampled loss and
its gradient approach the full softmax's as the noise words grow (its normaliser is unbiased),
a draw of the target is removed, and evaluation scores with the full softmax."""

import math

import torch

from lit_models.nets.elmo import ElmoConfig, ElmoLanguageModel

VOCAB = 40


def net(samples: int, dropout: float = 0.0) -> ElmoLanguageModel:
    torch.manual_seed(0)
    model = ElmoLanguageModel(ElmoConfig(vocab_size=VOCAB, char_filters=((1, 4), (2, 4)),
                                         num_highway=1, projection_dim=8, cell_dim=16,
                                         dropout=dropout, softmax_samples=samples))
    torch.nn.init.normal_(model.softmax.weight, std=0.5)
    return model


def q(ids: torch.Tensor) -> torch.Tensor:
    """The log-uniform distribution's probabilities, written as its definition."""
    return (torch.log(ids + 2.0) - torch.log(ids + 1.0)) / math.log(VOCAB + 1)


def test_the_sampler_draws_the_log_uniform_distribution_it_corrects_by():
    model = net(10)
    torch.manual_seed(1)
    ids, log_q = model.noise(400_000, torch.device("cpu"))
    assert ids.min() >= 0 and ids.max() < VOCAB
    assert torch.allclose(log_q.exp(), q(ids.double()).float(), rtol=1e-5)
    assert abs(float(q(torch.arange(VOCAB).double()).sum()) - 1) < 1e-12
    counts = torch.bincount(ids, minlength=VOCAB).double() / len(ids)
    assert (counts - q(torch.arange(VOCAB).double())).abs().max() < 3e-3


def test_the_sampled_loss_and_its_gradient_approach_the_full_softmaxs():
    torch.manual_seed(2)
    states = torch.randn(6, 8, requires_grad=True)
    targets = torch.randint(0, VOCAB, (6,))
    errors = {}
    for samples in (4, 64, 20_000):
        model = net(samples)
        full = model.full_nll(states, targets)
        full_grad, = torch.autograd.grad(full, states)
        torch.manual_seed(3)
        draws = [model.sampled_nll(states, targets) for _ in range(20)]
        mean = torch.stack(draws).mean()
        grad, = torch.autograd.grad(mean, states)
        errors[samples] = (abs(float(mean - full)) / float(full),
                           float((grad - full_grad).norm() / full_grad.norm()))
    assert errors[20_000][0] < 0.005 and errors[20_000][1] < 0.02
    assert errors[4][0] > errors[64][0] > errors[20_000][0]  # the bias shrinks as S grows


def test_a_draw_of_the_target_is_removed():
    model = net(5)
    states, targets = torch.randn(3, 8), torch.tensor([7, 7, 7])
    model.noise = lambda count, device: (torch.full((count,), 7), torch.zeros(count))
    assert float(model.sampled_nll(states, targets)) == 0.0  # only the target is left


def test_training_samples_and_evaluation_scores_with_the_full_softmax():
    chars = torch.randint(1, 262, (2, 6, 50))
    words = torch.randint(4, VOCAB, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.bool)
    sampled, full = net(8), net(0)
    assert sampled.sampled and not full.sampled and not net(VOCAB).sampled
    sampled.eval(), full.eval()
    a, b = sampled.losses(chars, words, mask), full.losses(chars, words, mask)
    assert not sampled.sampled
    for key in ("forward_nll", "backward_nll"):
        assert torch.equal(a[key], b[key])  # the same weights, the full softmax
    sampled.train(), full.train()
    a, b = sampled.losses(chars, words, mask), full.losses(chars, words, mask)
    assert not torch.allclose(a["forward_nll"], b["forward_nll"])
