"""Prediction files in the GLUE submission format: ``<run dir>/predictions/<split>.tsv`` with a
header ``index<TAB>prediction`` and one row per example, in the split's order (its ``idx``),
holding the label name (classification) or the score (regression, STS-B); generation tasks
write ``<split>.jsonl`` (one JSON object per example)."""

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import torch

from datamodules.files import atomic_write

PREDICTIONS_DIR = "predictions"


def write_predictions(
    run_dir: Path, split: str, predictions: torch.Tensor | Sequence[str],
    label_names: Sequence[str],
) -> Path:
    """Write one split's predictions atomically; returns the file's path. Texts (a text-to-text
    model's generated labels) are written as they are."""
    directory = run_dir / PREDICTIONS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    texts = not isinstance(predictions, torch.Tensor)
    regression = not texts and predictions.is_floating_point()
    path = directory / f"{split}.tsv"
    with atomic_write(path, newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["index", "prediction"])
        for index, value in enumerate(predictions if texts else predictions.tolist()):
            shown = value if texts else f"{value:.3f}" if regression else label_names[value]
            writer.writerow([index, shown])
    return path


def write_jsonl(run_dir: Path, split: str, rows: Sequence[dict]) -> Path:
    """``<run dir>/predictions/<split>.jsonl``, one JSON object a line, written atomically."""
    path = run_dir / PREDICTIONS_DIR / f"{split}.jsonl"
    with atomic_write(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
