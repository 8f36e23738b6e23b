"""Multiple-comparison corrections: several claims (or several tasks of one comparison) tested at
once, each p-value adjusted for the others so that reading them at ALPHA keeps the promise a
single test makes.

- ``holm`` (the default): Holm 1979, "A simple sequentially rejective multiple test procedure",
  Scand. J. Statist. 6(2). The m p-values sorted ascending, p_(i) becomes
  max_{j <= i} min(1, (m - j + 1) p_(j)); rejecting where the adjusted value is below ALPHA
  controls the family-wise error rate (the chance of any false "significant") at ALPHA under any
  dependence. statsmodels' ``multipletests(method="holm")`` computes the same.
- ``bh``: Benjamini & Hochberg 1995, "Controlling the false discovery rate", JRSS B 57(1), by
  scipy's ``false_discovery_control(method="bh")``: controls the expected share of false
  discoveries among the significant ones (for independent or positively dependent tests), a
  weaker promise that rejects more.
- ``none``: the p-values as they are.

Dror et al. 2017 ("Replicability analysis for NLP", TACL 5) ask for such a correction whenever
one study reports several comparisons (tasks, datasets) at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from datamodules.errors import PlmbenchError

#: the corrections by their setting's name, and how reports name them
NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}
DEFAULT = "holm"


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted.tolist()


def adjust(p: Sequence[float], method: str = DEFAULT) -> list[float]:
    """``p`` adjusted by ``method`` (one of NAMES), in the order given."""
    if method not in NAMES:
        raise PlmbenchError(f"unknown multiple-comparison correction {method!r}; use one of "
                            f"{', '.join(NAMES)}")
    if not p or method == "none":
        return [float(x) for x in p]
    if method == "holm":
        return holm(p)
    from scipy.stats import false_discovery_control

    return np.asarray(false_discovery_control(np.asarray(p, dtype=float), method="bh")
                      ).tolist()
