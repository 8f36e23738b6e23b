"""A board row's score and its interval, and the marks of differences a board cannot tell apart.

The score (``bench/boards/table.py``'s module docstring says which aggregate does what) is a
weighted mean of task scores: ``task_macro`` weighs each task 1/T (GLUE: a task's score is the
mean of its scoring columns), ``mean`` each column 1/N (so a task its share of the columns).
Its interval: a task's runs are independent of another task's, so with each task's score per
seed (the mean of its columns on that seed) the score's variance is the weighted sum of the
tasks' variances of the mean, with Welch-Satterthwaite degrees of freedom
(``bench/boards/stats.py``). A task whose columns were not all measured on the same seeds, or
measured on one, gives the score no interval.

Marks: on every column (and the score) the best row's value is ``BEST``; a row whose value
Welch's t-test over seeds cannot tell from the best one (two-sided, 5%) is ``TIED``. Rows with
one seed, and baseline rows, are not tested. A row that is not above the board's baseline rows
(``bench/boards/baselines.py``), and the best constant answer on its evaluation set
(``bench/boards/constant.py``), by more than its interval (its value, with one seed) has not
learned the task and gets no mark: a column where no row beats the baseline has no best row, so
noise is never starred. A column of a value that does not vary with the seed (parameters,
FLOPs), of a config setting (``config.task.max_length``, beams) or with no better direction (a
probe's best layer, ``higher_is_better: null``) has no best row and no marks.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence

from bench.boards.cells import Cell
from bench.boards.config import Board, Column
from bench.boards.rows import Row
from bench.boards.stats import Estimate, difference, weighted_sum

#: a row's mark on a column: its best value, or one not significantly different from it
BEST, TIED = "best", "tied"
#: the key of a row's score in ``Row.marks``
SCORE = ""


def scoring_weights(cells: Mapping[str, Cell], columns: Sequence[Column], board: Board
                    ) -> dict[str, tuple[float, list[Column]]]:
    """Per task a row has: (its weight in the score, its scoring columns)."""
    scoring = [c for c in columns if c.score and c.label in cells]
    by_task: dict[str, list[Column]] = defaultdict(list)
    for column in scoring:
        by_task[column.task].append(column)
    if board.aggregate == "task_macro":
        return {task: (1 / len(by_task), cols) for task, cols in by_task.items()}
    return {task: (len(cols) / len(scoring), cols) for task, cols in by_task.items()}


def task_seed_scores(cells: Mapping[str, Cell], columns: list[Column]
                     ) -> dict[str, float] | None:
    """The task's score on each seed (the mean of its scaled columns on that seed), by seed;
    None where its columns were measured on different seeds."""
    seeds = {tuple(key for key, _ in cells[c.label].seeds) for c in columns}
    if len(seeds) != 1:
        return None
    per_seed = zip(*([c.scale * value for _, value in cells[c.label].seeds] for c in columns),
                   strict=True)
    return dict(zip(next(iter(seeds)), (statistics.fmean(v) for v in per_seed), strict=True))


def _task_estimate(cells: Mapping[str, Cell], columns: list[Column]) -> Estimate | None:
    """The task's score per seed as an estimate over seeds (``task_seed_scores``)."""
    scores = task_seed_scores(cells, columns)
    return None if scores is None else Estimate.of(list(scores.values()))


def task_scores(cells: Mapping[str, Cell], columns: Sequence[Column], board: Board, stat: str
                ) -> dict[str, tuple[float, Estimate | None]]:
    """Per task a row has: its score (the mean of its scoring columns, scaled) and that score as
    an estimate over seeds (None where ``_task_estimate`` has none)."""
    weights = scoring_weights(cells, columns, board)
    return {task: (statistics.fmean(c.scale * cells[c.label].center(stat) for c in cols),
                   _task_estimate(cells, cols))
            for task, (_, cols) in weights.items()}


def score(cells: Mapping[str, Cell], columns: Sequence[Column], board: Board, stat: str
          ) -> tuple[float | None, int, Estimate | None]:
    """(score, how many tasks or columns it covers, its estimate over seeds) of one row;
    (None, 0, None) without a score. The estimate is of the mean (``stat`` mean) only."""
    if board.aggregate == "none":
        return None, 0, None
    weights = scoring_weights(cells, columns, board)
    if not weights:
        return None, 0, None
    value = sum(weight * statistics.fmean(c.scale * cells[c.label].center(stat) for c in cols)
                for weight, cols in weights.values())
    covered = len(weights) if board.aggregate == "task_macro" else sum(
        len(cols) for _, cols in weights.values())
    parts = [(weight, _task_estimate(cells, cols)) for weight, cols in weights.values()]
    if stat != "mean" or any(e is None for _, e in parts):
        return value, covered, None
    return value, covered, weighted_sum(parts)


def score_bounds(cells: Mapping[str, Cell], columns: Sequence[Column], board: Board
                 ) -> tuple[float | None, float | None]:
    """The range a row's score can take, scaled as the score is: the weighted mean of its
    scoring columns' ranges (``Column.bounds``); None on a side where a column is unbounded."""
    weights = scoring_weights(cells, columns, board)

    def side(i: int) -> float | None:
        ends = [[c.scale * c.bounds[i] if c.bounds[i] is not None else None for c in cols]
                for _, cols in weights.values()]
        if not ends or any(e is None for task in ends for e in task):
            return None
        return sum(w * statistics.fmean(task)
                   for (w, _), task in zip(weights.values(), ends, strict=True))

    return side(0), side(1)


def _mark(estimates: dict[int, Estimate], higher_is_better: bool) -> dict[int, str]:
    """Row index -> BEST / TIED among ``estimates`` (rows that have the value)."""
    if not estimates:
        return {}
    sign = 1 if higher_is_better else -1
    best = max(estimates, key=lambda i: (sign * estimates[i].value, -i))
    marks = {best: BEST}
    for i, estimate in estimates.items():
        if i != best and (test := difference(estimates[best], estimate)) is not None \
                and not test.significant:
            marks[i] = TIED
    return marks


def _above(estimate: Estimate, floor: float | None, higher_is_better: bool) -> bool:
    """Whether ``estimate`` is beyond the baseline's ``floor`` by more than its interval (by its
    value where it has none); True with no baseline."""
    if floor is None:
        return True
    low, high = estimate.interval() or (estimate.value, estimate.value)
    return low > floor if higher_is_better else high < floor


def _floor(values: Sequence[float], higher_is_better: bool) -> float | None:
    """The best of the baseline rows' values, None without one."""
    return (max if higher_is_better else min)(values) if values else None


def mark_rows(rows: Sequence[Row], columns: Sequence[Column], score_up: bool,
              constants: Mapping[str, float] | None = None,
              score_constants: Sequence[float | None] = ()) -> None:
    """Fill every row's ``marks`` (module docstring): per column, and for the score.
    ``constants``: per column label, the best constant answer's value on the evaluation set
    (``bench/boards/constant.py``), a floor beside the baseline rows'; ``score_constants``: per
    row, the score at those floors (None: none)."""
    constants = constants or {}
    ranked = [i for i, row in enumerate(rows) if not row.baseline]
    baselines = [row for row in rows if row.baseline]
    for column in columns:
        if not column.varies or column.is_setting or not column.ranked:  # nothing to be best at
            continue
        up = column.higher_is_better
        floor = _floor([row.cells[column.label].mean for row in baselines
                        if column.label in row.cells]
                       + ([constants[column.label]] if column.label in constants else []), up)
        estimates = {i: rows[i].cells[column.label].estimate for i in ranked
                     if column.label in rows[i].cells
                     and _above(rows[i].cells[column.label].estimate, floor, up)}
        for i, mark in _mark(estimates, up).items():
            rows[i].marks[column.label] = mark
    floor = _floor([row.score for row in baselines if row.score is not None], score_up)
    scores = {i: rows[i].score_estimate or Estimate(rows[i].score, float("nan"), 0)
              for i in ranked if rows[i].score is not None}
    own = dict(enumerate(score_constants))

    def score_floor(i: int) -> float | None:
        return _floor([v for v in (floor, own.get(i)) if v is not None], score_up)

    scores = {i: estimate for i, estimate in scores.items()
              if _above(estimate, score_floor(i), score_up)}
    for i, mark in _mark(scores, score_up).items():
        rows[i].marks[SCORE] = mark
