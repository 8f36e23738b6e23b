"""Has a row learned its task? Its score against the task's trivial baseline on the very examples
it was scored on, tested by the paired bootstrap (``bench/boards/bootstrap.py``).

A claim or comparison over a row that does no better than a constant answer says nothing about
the claim: two models that both predict RTE's majority class differ by exactly 0, and a
non-inferiority test would call that "supported". So before a verdict, each row is compared with
the best trivial predictor of each of its tasks, built from the row's own predictions files (the
examples and gold labels it was scored on; ``bench/boards/baselines.py`` gives the boards' baseline
rows, computed from the training data, which on the eval set does no better than the best constant):

- class ids (GLUE-style TSVs): every class predicted for every example, the one the board's
  columns score best kept (the majority class for accuracy; for the F1 of class 1, class 1
  everywhere beats a majority class of 0; Matthews' correlation is 0 for any of them);
- scores (STS-B): the mean gold score everywhere (Pearson and Spearman 0);
- outputs with no class ids (entities, extracted or generated answers, summaries): the empty
  output, no credit (every count and score 0, the gold kept).

The row has learned where B - baseline on its score (the board's weights over the row's tasks)
has a 95% interval above 0 (below 0 for a lower-is-better score): the row is above the baseline
by more than its interval. A row whose runs wrote no per-example predictions is not checked, and
the report says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bench.boards.bootstrap import RESAMPLES, TaskArms, paired_bootstrap
from bench.boards.config import Board, Column
from bench.boards.constant import constant_answers
from bench.boards.rows import Row
from bench.boards.score import scoring_weights
from bench.boards.significance import column_specs, seed_outputs
from bench.boards.stats import Difference
from bench.example_outputs import Outputs
from datamodules.errors import PlmbenchError

#: the keys of an output's arrays that hold the gold side, kept by the empty output
GOLD = ("label", "gold")


@dataclass
class Learned:
    """A row against its trivial baseline: ``learned`` None where it could not be checked (why
    in ``note``); ``test``: row - baseline on the row's score; ``tasks``: per task."""

    row: str
    learned: bool | None
    test: Difference | None = None
    tasks: dict[str, Difference] = field(default_factory=dict)
    note: str = ""

    def text(self, spec: str = ".2f") -> str:
        """One line: the row, what it is against the baseline and the difference."""
        if self.learned is None:
            return f"{self.row}: not checked against a trivial baseline ({self.note})"
        t = self.test
        shown = (f"{format(t.value, '+' + spec)} [{format(t.low, '+' + spec)}, "
                 f"{format(t.high, '+' + spec)}]")
        if (exact := t.exact_zero_text()) is not None:
            shown = exact
        state = "above it" if self.learned else "NOT above it: has not learned the task"
        return f"{self.row}: {shown} against the best trivial predictor, {state}"


def candidates(outputs: Outputs) -> list[Outputs]:
    """The trivial predictors of one split's outputs (module docstring)."""
    data, ids = outputs.data, outputs.ids
    constants = constant_answers(outputs)
    if constants is not None:
        return constants
    return [Outputs(ids, {key: value if key in GOLD else np.zeros_like(value)
                          for key, value in data.items()}, outputs.metrics)]


def best_trivial(arms: TaskArms, reference: dict[str, Outputs], higher_is_better: bool
                 ) -> dict[str, Outputs]:
    """Of every combination of the splits' trivial predictors, the one the task's columns score
    best on all rows."""
    splits = sorted(reference)
    every = np.zeros((1, 1), dtype=int)
    options = [dict(zip(splits, chosen, strict=True)) for chosen in
               itertools.product(*(candidates(reference[split]) for split in splits))]
    rows = {split: np.arange(len(reference[split].ids))[None, :] for split in splits}
    scores = [arms.score([option], rows, every)[0] for option in options]
    return options[int(np.argmax(scores) if higher_is_better else np.argmin(scores))]


def learned(row: Row, columns: Sequence[Column], board: Board, resamples: int = RESAMPLES,
            seed: int = 0, higher_is_better: bool = True) -> Learned:
    """``row`` against the trivial baseline of each of its scored tasks (module docstring)."""
    weights = scoring_weights(row.cells, columns, board)
    arms, shares = [], []
    for task, (weight, cols) in weights.items():
        specs = column_specs(cols)
        try:
            seeds = seed_outputs(row, task, specs)
        except PlmbenchError as err:
            return Learned(row.label, None, note=f"{task}: {err}")
        scored = TaskArms(task, specs, seeds, seeds)
        arms.append(TaskArms(task, specs, [best_trivial(scored, seeds[0], higher_is_better)],
                             seeds))
        shares.append(weight)
    if not arms:
        return Learned(row.label, None, note="no scored task")
    per_task, overall = paired_bootstrap(arms, shares, resamples, seed)
    above = overall.low > 0 if higher_is_better else overall.high < 0
    return Learned(row.label, bool(above and not overall.identical), overall, per_task)


def baseline_notes(rows: Sequence[Row], columns: Sequence[Column], board: Board,
                   resamples: int = RESAMPLES, higher_is_better: bool = True) -> str:
    """Markdown lines under a comparison: each row against its trivial baseline, and a warning
    where one has not learned its task (its difference from the other row is then no result)."""
    checks = [learned(row, columns, board, resamples, higher_is_better=higher_is_better)
              for row in rows]
    lines = ["Against the trivial baseline (the best constant predictor on the same examples, "
             "bench/boards/trivial.py):", "", *(f"- {check.text()}" for check in checks)]
    if any(check.learned is False for check in checks):
        lines += ["", "A row that has not learned its task makes this comparison no evidence "
                  "about the two models, whatever its verdict."]
    return "\n".join([*lines, ""])
