"""Prediction files in the GLUE submission format: ``<run dir>/predictions/<split>.tsv`` with a
header ``index<TAB>prediction`` and one row per example, in the split's order (its ``idx``),
holding the label name (classification) or the score (regression, STS-B)."""

import csv
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

PREDICTIONS_DIR = "predictions"


def write_predictions(
    run_dir: Path, split: str, predictions: torch.Tensor, label_names: Sequence[str]
) -> Path:
    """Write one split's predictions atomically; returns the file's path."""
    directory = run_dir / PREDICTIONS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    regression = predictions.is_floating_point()
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, newline="") as tmp:
        writer = csv.writer(tmp, delimiter="\t", lineterminator="\n")
        writer.writerow(["index", "prediction"])
        for index, value in enumerate(predictions.tolist()):
            writer.writerow([index, f"{value:.3f}" if regression else label_names[value]])
    path = directory / f"{split}.tsv"
    os.replace(tmp.name, path)
    return path
