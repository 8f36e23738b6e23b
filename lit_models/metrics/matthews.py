"""Matthews correlation coefficient (Matthews 1975), for two or more classes (Gorodkin 2004's
R_K), computed from the confusion matrix as scikit-learn's ``matthews_corrcoef`` computes it.

With C the confusion matrix (rows true, columns predicted), n examples, c = trace(C) correct,
t_k / p_k the true / predicted counts of class k:

    MCC = (c n - sum_k p_k t_k) / sqrt((n^2 - sum_k p_k^2) (n^2 - sum_k t_k^2))

When either factor under the root is 0 (every prediction, or every label, is one class) the
coefficient is undefined and is 0, as scikit-learn reports it: a constant predictor earns
nothing. torchmetrics' ``MatthewsCorrCoef`` gives such a predictor a non-zero score (an epsilon
substitute for the missing counts) and +-1 to a one-class set, so CoLA's majority-class row read
0.0256 instead of 0; the counts here are torchmetrics' confusion matrix, the arithmetic float64.
"""

import torch
from torchmetrics.classification import MulticlassConfusionMatrix

from datamodules.errors import PlmbenchError


class MatthewsCorrCoef(MulticlassConfusionMatrix):
    """Accumulates the confusion matrix of class ids over batches (and processes); ``compute``
    gives the MCC on -1..1, 0 where it is undefined."""

    def compute(self) -> torch.Tensor:
        counts = super().compute().double()  # [true, predicted]
        n = counts.sum()
        if n == 0:
            raise PlmbenchError("Matthews correlation of no examples: the eval split is empty; "
                                "check the task's eval splits and max_eval_samples")
        true, predicted = counts.sum(1), counts.sum(0)
        covariance = counts.trace() * n - predicted @ true
        variances = (n * n - predicted @ predicted) * (n * n - true @ true)
        if variances == 0:
            return torch.zeros((), dtype=torch.float64)
        return covariance / variances.sqrt()
