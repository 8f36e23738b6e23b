"""Pearson's and Spearman's correlation of predicted and gold scores (STS-B; Cer et al. 2017),
as ``scipy.stats.pearsonr`` / ``spearmanr`` compute them.

Pearson's r = sum (x - mean x)(y - mean y) / sqrt(sum (x - mean x)^2 sum (y - mean y)^2), in
float64 over every example (two passes: the mean first), not from float32 running moments;
Spearman's rho is Pearson's r of the average ranks (tied values share the mean of the ranks they
span; Spearman 1904). torchmetrics' own metrics accumulate float32 moments (a near-constant
prediction then correlates by rounding noise) and add 1e-6 to Spearman's denominator.

A constant vector has no correlation: scipy returns NaN (with a ``ConstantInputWarning``); plmbench
reports 0, scikit-learn's convention for the undefined Matthews coefficient, so a model that
collapses to one score reads as no better than the mean-score baseline and a board's average stays
defined. Fewer than two examples cannot be correlated: an error, as in scipy.
"""

import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from datamodules.errors import PlmbenchError


def average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks of ``values``; tied values share the mean of the ranks they span."""
    order = values.argsort(stable=True)
    _, inverse, counts = torch.unique(values[order], return_inverse=True, return_counts=True)
    last = counts.cumsum(0).double()  # the rank of each distinct value's last copy
    ranks = torch.empty_like(values, dtype=torch.float64)
    ranks[order] = (last - (counts - 1) / 2)[inverse]
    return ranks


def pearson(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson's r of two float vectors, in float64; 0 when either is constant."""
    x, y = x.double(), y.double()
    if len(x) < 2:
        raise PlmbenchError(f"a correlation needs at least two examples, got {len(x)}: the eval "
                            "split is (nearly) empty; check the task's eval splits and "
                            "max_eval_samples")
    if (x == x[0]).all() or (y == y[0]).all():
        return torch.zeros((), dtype=torch.float64)
    dx, dy = x - x.mean(), y - y.mean()
    r = (dx @ dy) / (dx.norm() * dy.norm())
    return r.clamp(-1.0, 1.0)


def gathered(state: list[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    """A ``cat`` state as one float64 vector: the list of this process's batches, or the tensor
    torchmetrics leaves after gathering every process's (a list no more: ``if state`` would ask a
    tensor of several values for its truth)."""
    if isinstance(state, list) and not state:
        return torch.zeros(0, dtype=torch.float64)
    return dim_zero_cat(state).double()


def pairs_in_canonical_order(preds: torch.Tensor, target: torch.Tensor
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The (prediction, gold) pairs sorted by prediction, then gold: the sums of ``pearson`` then
    run in one order whatever order the processes' shares were gathered in, so any number of
    processes gives one process's value to the last bit (the correlation itself ignores order)."""
    by_target = target.argsort(stable=True)
    order = by_target[preds[by_target].argsort(stable=True)]
    return preds[order], target[order]


class Correlation(Metric):
    """Keeps every (prediction, gold) score pair (gathered across processes) and correlates them
    in ``compute``: ``method`` "pearson" or "spearman"."""

    full_state_update = False

    def __init__(self, method: str) -> None:
        super().__init__()
        if method not in ("pearson", "spearman"):
            raise ValueError(f"method {method!r}: use pearson or spearman")
        self.method = method
        self.add_state("preds", default=[], dist_reduce_fx="cat")
        self.add_state("target", default=[], dist_reduce_fx="cat")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        self.preds.append(preds.detach().flatten().double())
        self.target.append(target.detach().flatten().double())

    def compute(self) -> torch.Tensor:
        preds, target = pairs_in_canonical_order(gathered(self.preds), gathered(self.target))
        if self.method == "spearman":
            preds, target = average_ranks(preds), average_ranks(target)
        return pearson(preds, target)
