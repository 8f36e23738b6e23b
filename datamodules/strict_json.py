"""JSON every parser reads: RFC 8259 (§6) has no NaN or Infinity, which Python's ``json`` writes
by default and strict parsers (JavaScript's ``JSON.parse``, jq, Go, Rust's serde_json) refuse.
Every JSON file plmbench writes goes through ``dumps``: a number that is not finite (a metric
undefined on an evaluation set, as AUROC over one class or the correlation of a constant) is
written as null, and ``allow_nan=False`` guards that nothing else slips through; ``nonfinite``
names where such numbers were, so a writer can say why a value is null."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def nonfinite(value: Any, path: str = "") -> list[str]:
    """The dotted paths (list items by index) of the floats in ``value`` that are NaN or
    infinite."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in nonfinite(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in nonfinite(v, f"{path}.{i}")]
    return []


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (mappings and lists copied)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``value`` with its non-finite numbers as null: strict JSON."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)
