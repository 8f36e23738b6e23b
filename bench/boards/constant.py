"""The best constant predictor of the evaluation set: the floor under a board's marks.

A board's baseline row (``bench/boards/baselines.py``) answers the majority class of the (capped)
training data everywhere. On an evaluation set whose own majority is another class it scores
below what a constant answer can: RTE's training majority reads 47.3 dev accuracy where always
answering the dev set's majority class reads 52.7. A row between the two has learned nothing a
constant does not know, so no row is marked on a column (``bench/boards/score.py``) unless it is
also above the best constant answer on the very examples it was scored on: every class, the one
the column's metric scores best (the majority class for accuracy; class 1 for the F1 of class 1;
Matthews' correlation is 0 for any), or for scores the mean gold score (correlations 0).

The gold labels come from the predictions file of one of the table's runs of the column's task
(``bench/example_outputs.py``; a table's runs share one evaluation set,
``bench/boards/sections.py``). A column whose runs wrote no such file (predictions of another kind,
a record from before predictions files) has no such floor, only the baseline rows'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from bench.boards.config import Column
from bench.boards.rows import Row
from bench.record import Record
from datamodules.errors import PlmbenchError


def constant_answers(outputs) -> list[float] | None:
    """Per constant answer of an evaluation split's gold labels, the outputs with that answer
    everywhere (None where the outputs hold no class ids or scores)."""
    from bench.example_outputs import Outputs

    data = outputs.data
    if "prediction" not in data or "label" not in data:
        return None
    label = data["label"]
    if "pearson" in outputs.metrics:  # scores: the mean gold score everywhere
        answers = [np.full(len(label), float(np.mean(label)))]
    else:
        answers = [np.full(len(label), c, dtype=label.dtype) for c in np.unique(label)]
    return [Outputs(outputs.ids, {"prediction": a, "label": label}, outputs.metrics)
            for a in answers]


def _split_metric(column: Column, record: Record) -> tuple[str, str] | None:
    """The eval split and metric behind the column's values: ``metrics.<split>.<metric>``, or
    those the record part ``column.scored_as`` names (a pruning curve's point)."""
    if column.scored_as:
        part = record.at(column.scored_as)
        if isinstance(part, Mapping) and isinstance(part.get("split"), str) \
                and isinstance(part.get("metric"), str):
            return part["split"], part["metric"]
        return None
    parts = column.value.split(".")
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "metrics" else None


def constant_floors(rows: Sequence[Row], columns: Sequence[Column]) -> dict[str, float]:
    """Per ranked column with class ids or scores behind it: the best value a constant answer
    reaches on the evaluation set (unscaled, as cells hold values); module docstring."""
    from bench.example_outputs import read_outputs

    read: dict[tuple[int, str], object] = {}
    floors = {}
    for column in columns:
        if not column.ranked or not column.varies or column.is_setting:
            continue
        record = _a_run(rows, column.task)
        where = None if record is None else _split_metric(column, record)
        if where is None:
            continue
        split, metric = where
        key = (id(record), split)
        if key not in read:
            try:
                read[key] = constant_answers(read_outputs(record, split))
            except (PlmbenchError, OSError, ValueError, KeyError, IndexError):
                read[key] = None  # no file to read the gold labels from: no such floor
        answers = read[key]
        if not answers or metric not in answers[0].metrics:
            continue
        every = np.arange(len(answers[0].ids))[None, :]
        values = [float(answer.metric(metric, every)[0]) for answer in answers]
        floors[column.label] = max(values) if column.higher_is_better else min(values)
    return floors


def constant_score(row: Row, columns: Sequence[Column], board, floors: dict[str, float]
                   ) -> float | None:
    """The row's score (``bench/boards/score.py``) were each of its scoring columns at its
    ``floors`` value: above what any one constant answer scores (each column's best may be
    another answer); None where a scoring column of the row has no floor."""
    from bench.boards.score import scoring_weights

    weights = scoring_weights(row.cells, columns, board)
    if not weights or any(c.label not in floors for _, cols in weights.values() for c in cols):
        return None
    return sum(w * float(np.mean([c.scale * floors[c.label] for c in cols]))
               for w, cols in weights.values())


def _a_run(rows: Sequence[Row], task: str) -> Record | None:
    """One finished run of ``task`` among the rows (they share its evaluation set)."""
    return next((record for row in rows if not row.baseline
                 for record in row.records.get(task, []) if record.predictions), None)
