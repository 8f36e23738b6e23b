"""datamodules/strict_json.py: what plmbench writes is JSON a strict parser reads."""

import json
import math

import pytest

from datamodules import strict_json


def refuse(constant: str):
    raise ValueError(constant)


def test_non_finite_numbers_are_null_and_named_by_their_path():
    value = {"validation": {"auroc": math.nan, "accuracy": 0.5}, "curve": [1.0, math.inf],
             "nested": ({"x": -math.inf},), "count": 3, "name": "NaN"}
    assert strict_json.nonfinite(value) == ["validation.auroc", "curve.1", "nested.0.x"]
    text = strict_json.dumps(value, sort_keys=True)
    assert json.loads(text, parse_constant=refuse) == {
        "validation": {"auroc": None, "accuracy": 0.5}, "curve": [1.0, None],
        "nested": [{"x": None}], "count": 3, "name": "NaN"}
    assert value["validation"]["auroc"] != value["validation"]["auroc"]  # the input is untouched
    with pytest.raises(ValueError):  # what Python's json writes by default, and parsers refuse
        json.loads(json.dumps(value), parse_constant=refuse)


def test_every_json_writer_goes_through_strict_json():
    """No module writes a file with json.dump or json.dumps of its own (hash keys and messages
    may use json.dumps: they are not files)."""
    from pathlib import Path

    root = Path(__file__).parents[2]
    writers = []
    for package in ("bench", "lit_models", "datamodules", "retrieval"):
        for path in (root / package).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if "json.dump(" in line or ("json.dumps(" in line and "write" in line
                                            and "strict_json" not in line):
                    writers.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert writers == [], writers
