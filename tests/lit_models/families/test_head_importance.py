"""Michel et al. 2019's head importance and pruning curve (lit_models/families/head_importance.py).

- The importance E_x |dL(x)/d xi_h| equals the same expectation taken over brute-force masked
  losses: central finite differences of each example's loss in each head's mask, on a tiny
  random BERT in float64 (a first-order Taylor expansion of the loss in the mask); the absolute
  value is taken per example, not of the batch's gradient.
- Removing a head outright moves the loss by about the importance's first-order estimate when
  the mask is only nudged, and removing it with the mask equals removing it from the weights.
- The curve removes the lowest-scoring heads left, a share at a time, recomputing the scores
  under the current mask each step, normalised per layer.
"""

import pytest
import torch
import torch.nn.functional as F

from lit_models.families.head_importance import (
    head_importance,
    masked_heads,
    normalize_by_layer,
    pruning_curve,
    removed_heads,
)
from lit_models.nets.bert import BertConfig, BertModel

LAYERS, HEADS = 2, 3


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=12, num_hidden_layers=LAYERS,
                        num_attention_heads=HEADS, intermediate_size=20, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, initializer_range=0.5)
    encoder = BertModel(config).double().eval()
    head = torch.nn.Linear(12, 3).double()
    torch.manual_seed(1)
    lengths = torch.tensor([7, 4, 6, 5, 7])
    mask = (torch.arange(7)[None] < lengths[:, None]).long()
    batch = {"input_ids": torch.randint(1, 40, (5, 7)) * mask, "attention_mask": mask,
             "labels": torch.tensor([0, 2, 1, 1, 0])}

    def losses(batch):
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
        logits = head(encoder(**inputs).pooler_output)
        return F.cross_entropy(logits, batch["labels"], reduction="none")

    return encoder, losses, batch


def test_importance_is_the_mean_absolute_per_example_gradient_of_the_masked_loss(model):
    encoder, losses, batch = model
    mask = torch.ones(LAYERS, HEADS, dtype=torch.float64)
    mask[1, 2] = 0  # a head already pruned: the others are scored under the current mask
    importance = head_importance(encoder, losses, [batch], mask)
    eps = 1e-5
    brute = torch.zeros(LAYERS, HEADS, dtype=torch.float64)
    for layer in range(LAYERS):
        for head in range(HEADS):
            step = torch.zeros_like(mask)
            step[layer, head] = eps
            with torch.no_grad(), masked_heads(encoder, mask + step):
                up = losses(batch)
            with torch.no_grad(), masked_heads(encoder, mask - step):
                down = losses(batch)
            brute[layer, head] = ((up - down) / (2 * eps)).abs().mean()
    assert torch.allclose(importance.double(), brute, rtol=1e-4, atol=1e-7)
    # per example, then the mean: not the absolute value of the batch's mean gradient
    xi = mask.clone().requires_grad_()
    with masked_heads(encoder, xi):
        (batch_gradient,) = torch.autograd.grad(losses(batch).mean(), xi)
    assert (importance.double() - batch_gradient.abs()).abs().max() > 1e-4


def test_the_first_order_estimate_predicts_a_nudged_mask_and_removal_equals_pruning(model):
    encoder, losses, batch = model
    ones = torch.ones(LAYERS, HEADS, dtype=torch.float64)
    xi = ones.clone().requires_grad_()
    with masked_heads(encoder, xi):
        (gradient,) = torch.autograd.grad(losses(batch).sum(), xi)
    with torch.no_grad():
        base = losses(batch).sum()
        for layer, head in ((0, 1), (1, 0)):
            nudged = ones.clone()
            nudged[layer, head] = 1 - 1e-3  # L(xi_h = 1 - d) - L(1) = -d dL/dxi_h + O(d^2)
            with masked_heads(encoder, nudged):
                moved = losses(batch).sum() - base
            assert moved == pytest.approx(-1e-3 * gradient[layer, head].item(), rel=1e-2)


def test_the_curve_removes_the_least_important_share_recomputing_each_step():
    calls = []
    fixed = torch.tensor([[4.0, 1.0, 3.0, 2.0], [8.0, 6.0, 5.0, 7.0]])

    def importance(mask):
        calls.append(mask.clone())
        return fixed * mask  # removed heads score 0 here, yet are never chosen again

    def evaluate(mask):
        return {"validation": {"accuracy": float(mask.sum()) / 8}}

    steps = pruning_curve(evaluate, importance, (2, 4), step=0.25)
    assert [s.heads_kept for s in steps] == [8, 6, 4, 2, 0]
    assert len(calls) == 4 and calls[1].sum() == 6  # recomputed under the current mask
    normalised = normalize_by_layer(fixed)
    assert torch.allclose(normalised.norm(dim=-1), torch.ones(2))
    # step 1: 1/sqrt(30) = 0.18 and 2/sqrt(30) = 0.37 are the lowest normalised scores
    assert steps[1].removed == [(0, 1), (0, 3)]
    # step 2, recomputed: layer 0's 4 and 3 now normalise to 0.8 and 0.6, above layer 1's
    # 5/sqrt(174) = 0.38 and 6/sqrt(174) = 0.45 (raw scores would take layer 0's last heads)
    assert steps[2].removed == [(1, 2), (1, 1)]
    assert removed_heads(steps[2].mask) == {0: [1, 3], 1: [1, 2]}
    order = [head for s in steps for head in s.removed]
    assert sorted(order) == [(i, j) for i in range(2) for j in range(4)]
    assert steps[-1].metrics["validation"]["accuracy"] == 0
    with pytest.raises(ValueError, match="share of heads"):
        pruning_curve(evaluate, importance, (2, 4), step=0)
