"""What a task family's run reports for the record, as one value (``FamilyResult``).

The run (``bench/run/execute.py``) measures throughput, parameters, steps and wall time itself; what
only the family knows is its last evaluation's metrics (per split; the scorer's signature where
one names its computation, sacreBLEU's), the prediction files it wrote (DESIGN.md contract 10),
what the evaluation found besides metrics (``outputs``) and the notes on how it was set up. A
family's LightningModule (``lit_models.core.module.PlmModule.result``) hands them over together,
and the run stores them in the record's keys of the same names (``bench/record.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FamilyResult:
    """A family's result of one run: ``metrics`` split -> name -> value; ``metric_signatures``
    split -> name -> how it was computed; ``predictions`` split -> file relative to the run
    directory; ``outputs`` split -> what the evaluation found besides metrics (JSON);
    ``notes`` what the log and the record must say about the run's setup."""

    metrics: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    metric_signatures: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    predictions: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
