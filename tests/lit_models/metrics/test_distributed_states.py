"""Metric states as DDP leaves them: Pearson and Spearman read the tensor torchmetrics gathers
(a list no more) and give one value whatever order the processes' shares come in; a whole-split
metric holding lists of Python objects stays hashable (Lightning's teardown walks the modules
after an error); sums and means in float64 do not depend on the order of their terms."""

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn
from torchmetrics import MeanMetric

from lit_models.metrics import build_metrics, exact_total
from lit_models.metrics.correlation import Correlation


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_a_gathered_state_correlates_as_scipy_in_any_order(method):
    generator = torch.Generator().manual_seed(0)
    preds = torch.rand(101, generator=generator).float()
    target = torch.randint(0, 6, (101,), generator=generator).float()  # ties
    values = []
    for order in (torch.arange(101), torch.randperm(101, generator=generator)):
        metric = Correlation(method)
        metric.update(preds[order], target[order])
        metric.preds, metric.target = metric.preds[0], metric.target[0]  # a tensor, as gathered
        values.append(metric.compute().item())
    assert values[0] == values[1]  # to the last bit
    scipy = (stats.pearsonr if method == "pearson" else stats.spearmanr)(
        preds.double().numpy(), target.double().numpy())[0]
    assert values[0] == pytest.approx(scipy, abs=1e-12)


def test_batches_in_two_shares_correlate_as_one():
    preds, target = torch.linspace(0, 1, 9) ** 2, torch.linspace(0, 5, 9).flip(0)
    one, two = Correlation("pearson"), Correlation("pearson")
    one.update(preds, target)
    for share in ([0, 2, 4, 6, 8], [1, 3, 5, 7]):  # what rank order gathers
        two.update(preds[share], target[share])
    assert one.compute().item() == two.compute().item()


def test_a_whole_split_metric_of_lists_is_hashable():
    metrics = build_metrics(["recall@1", "mrr"], "rankings")
    metrics.update([["Paris"]], rankings=[["Paris is in France", "Lyon"]])
    module = nn.Module()
    module.metrics = metrics
    assert len(list(module.modules())) > 1  # named_modules hashes every module
    module.cpu()


def test_exact_totals_ignore_the_order_of_their_terms():
    terms = torch.from_numpy(np.random.default_rng(0).lognormal(0, 2, 500).astype(np.float32))
    means = []
    for order in (torch.arange(500), torch.arange(499, -1, -1)):
        mean = exact_total(MeanMetric())
        for chunk in terms[order].split(7):
            mean.update(chunk)
        means.append(mean.compute().item())
    assert means[0] == means[1]
