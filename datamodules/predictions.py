"""Prediction files (Design contract 10), written atomically under ``<run dir>/predictions/``.

Classification and regression (GLUE and every GLUE-style task) write ``<split>.tsv`` in the GLUE
submission schema, plus the gold label where the split has labels:

    index<TAB>prediction<TAB>label
    0<TAB>1<TAB>1
    ...

- ``index``: the example's row in the split (GLUE's ``idx``: rows are kept in the split's order,
  a capped split keeps its first rows);
- ``prediction``: in the task's submission vocabulary (``task.submission_labels``, else its
  ``label_names``): ``0``/``1`` for CoLA, SST-2, MRPC, QQP and WNLI, the label's name for the
  inference tasks (``entailment`` ...), the score for STS-B (the shortest text that reads back
  as the same float32); a text-to-text model's generation outside the label set is written as
  it was generated;
- ``label``: the gold label in the same vocabulary; the column is absent for unlabelled splits
  (GLUE's test sets, AX), whose files are then exactly a GLUE submission file.

``plmbench significance`` resamples these files' rows (paired bootstrap); ``plmbench submit
glue`` collects the test-split files into the GLUE server's zip. Generation tasks write
``<split>.jsonl`` (one JSON object per example).
"""

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from datamodules import strict_json
from datamodules.files import atomic_write

PREDICTIONS_DIR = "predictions"
#: the TSV columns, in order (``label`` only where the split has gold labels)
COLUMNS = ("index", "prediction", "label")


def label_text(value: int | float | str, vocabulary: Sequence[str] | None) -> str:
    """One label as the submission writes it: a class id as its ``vocabulary`` entry, a score
    (``vocabulary`` None: regression) as the shortest text of its float32 value ("3.8"), a
    text as it is."""
    if isinstance(value, str):
        return value
    if vocabulary is None:
        return np.format_float_positional(np.float32(value), unique=True, trim="0")
    return vocabulary[int(value)]


def write_predictions(run_dir: Path, split: str, indices: Sequence[int],
                      predictions: Sequence[int | float | str], vocabulary: Sequence[str] | None,
                      gold: Sequence[int | float | str] | None = None) -> Path:
    """``<run dir>/predictions/<split>.tsv`` of one split (the module docstring's schema),
    written atomically; returns its path. ``vocabulary``: the submission labels of the class
    ids (None for regression); ``gold``: the split's labels, None for an unlabelled split."""
    columns = COLUMNS if gold is not None else COLUMNS[:2]
    rows = zip(indices, predictions, *([gold] if gold is not None else []), strict=True)
    path = run_dir / PREDICTIONS_DIR / f"{split}.tsv"
    with atomic_write(path, newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(columns)
        for index, *labels in rows:
            writer.writerow([int(index), *(label_text(v, vocabulary) for v in labels)])
    return path


def submission_vocabulary(task) -> list[str] | None:
    """The labels a task's prediction files use for its class ids (``submission_labels``, else
    ``label_names``, else the class ids themselves, as a multiple-choice task's answer index); None
    for a regression task (num_labels 1)."""
    if task["num_labels"] == 1:
        return None
    names = task.get("submission_labels") or task.get("label_names")
    return list(names) if names else [str(i) for i in range(task["num_labels"])]


def write_jsonl(run_dir: Path, split: str, rows: Sequence[dict]) -> Path:
    """``<run dir>/predictions/<split>.jsonl``, one JSON object a line, written atomically."""
    path = run_dir / PREDICTIONS_DIR / f"{split}.jsonl"
    with atomic_write(path) as handle:
        for row in rows:
            handle.write(strict_json.dumps(row, ensure_ascii=False) + "\n")
    return path
