"""Is one row of a board better than another? ``plmbench significance ROW_A ROW_B`` and
``plmbench leaderboard --compare DIR_A DIR_B``.

For every task both rows have, and for the board's aggregate over those tasks (weighted as the
board weighs them, ``bench/boards/score.py``), the comparison reports B - A with

- the paired bootstrap over evaluation examples and seeds (``bench/boards/bootstrap.py``): its 95%
  percentile interval and two-sided p-value, read from the runs' prediction files;
- the almost stochastic order test (Dror et al. 2019, by ``deepsig``) on the rows' per-seed
  scores: eps_min, how far "B is stochastically better than A" is from holding (0: it holds;
  0.5: undecided; 1: A is the better one); below 0.2 we read B as almost stochastically better,
  above 0.8 A (Ulmer et al. 2022's threshold, applied in both directions).

Where a row's runs left no per-example predictions (older records, a task family without them)
the task falls back to Welch's t-test over seeds (``bench/boards/stats.py``) and says so.

The verdict follows the p-value at the stated level ALPHA (two-sided, 0.05), never the look of
the interval: p < ALPHA reads "B better" or "A better", anything else "no significant
difference" (p = 0.065 is no difference at 5%). With several tasks, their p-values are adjusted
for each other (Holm by default, ``bench/boards/corrections.py``) and the tasks' verdicts read the
adjusted ones; the aggregate is one test and reads its own. Two rows whose predictions are the
same read "identical predictions" (B - A exactly 0, p = 1). Each line shows its minimum
detectable effect (``bench/boards/stats.py``): the difference it would find with 80% power, so a "no
significant difference" at an MDE of 6 points is told from one at 0.5.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.boards.bootstrap import RESAMPLES, ColumnSpec, TaskArms, paired_bootstrap
from bench.boards.config import Board, Column
from bench.boards.corrections import DEFAULT, NAMES, adjust
from bench.boards.rows import Row
from bench.boards.score import scoring_weights, task_seed_scores
from bench.boards.stats import (
    ALPHA,
    ASO_THRESHOLD,
    POWER,
    Difference,
    Estimate,
    aso,
    difference,
    weighted_sum,
)
from bench.boards.table import Table
from bench.example_outputs import read_outputs
from bench.record import Record
from datamodules.errors import PlmbenchError

#: a column the bootstrap can recompute: metrics.<split>.<metric>
METRIC_PATH = re.compile(r"^metrics\.(?P<split>[^.]+)\.(?P<metric>[^.]+)$")
AGGREGATE = "aggregate"
#: the verdicts of a line
IDENTICAL, NO_DIFFERENCE = "identical predictions", "no significant difference"


@dataclass
class Line:
    """One task (or the aggregate) of a comparison."""

    name: str
    a: float
    b: float
    test: Difference | None  # None: no test possible (one seed and no predictions)
    method: str  # "bootstrap" | "Welch" | ""
    aso: float | None = None
    note: str = ""
    p_adjusted: float | None = None  # p adjusted for the other tasks tested with it

    @property
    def p(self) -> float | None:
        """The p-value the verdict reads: adjusted where several tasks were tested."""
        if self.test is None:
            return None
        return self.test.p if self.p_adjusted is None else self.p_adjusted


def find_row(table: Table, label: str) -> Row:
    """The row labelled ``label`` (its short name, or its full name: ``Row.full_name``), or the
    one row whose label is ``label`` followed by its text columns' values ("rag-token
    (rag_token, dense, Flat)")."""
    row = next((r for r in table.rows if r.label == label), None) or next(
        (r for r in table.rows if r.full_name == label), None)
    texted = [r for r in table.rows if r.label.startswith(f"{label} (")]
    if row is None and len(texted) == 1:
        row = texted[0]
    if row is None:
        rows = (f"its rows: {', '.join(r.label for r in table.rows)}" if table.rows else
                "it has no rows: no run of its tasks finished there (check RESULTS_DIR, --board)")
        raise PlmbenchError(f"no row {label!r} on board {table.board.name!r}; {rows}")
    return row


def find_rows(tables: Sequence[Table], label_a: str, label_b: str) -> tuple[Table, Row, Row]:
    """(the table, row A, row B) of the one table (evaluation set, ``bench/boards/sections.py``)
    that has both rows; rows scored on different examples are never compared."""
    found = []
    for table in tables:
        try:
            found.append((table, find_row(table, label_a), find_row(table, label_b)))
        except PlmbenchError:
            continue
    if found:
        return found[0]
    if len(tables) == 1:
        for label in (label_a, label_b):
            find_row(tables[0], label)  # the line naming the missing row
    where = {label: [t.section for t in tables if _has_row(t, label)]
             for label in (label_a, label_b)}
    if all(where.values()):
        raise PlmbenchError(
            f"rows {label_a!r} ({', '.join(where[label_a])}) and {label_b!r} "
            f"({', '.join(where[label_b])}) were scored on different examples: no test can "
            "compare them; run both on the same evaluation set")
    missing = next(label for label, at in where.items() if not at)
    rows = "; ".join(f"{t.section}: {', '.join(r.label for r in t.rows)}" for t in tables)
    raise PlmbenchError(f"no row {missing!r} on board {tables[0].board.name!r}; its rows: {rows}")


def _has_row(table: Table, label: str) -> bool:
    try:
        find_row(table, label)
    except PlmbenchError:
        return False
    return True


def _seed_records(row: Row, task: str) -> list[Record]:
    """The row's records of ``task``, one per seed, in seed order."""
    records = row.records.get(task, [])
    return sorted(records, key=lambda r: repr((r.protocol_hash, r.seed)))


def column_specs(columns: Sequence[Column]) -> list[ColumnSpec]:
    specs = []
    for column in columns:
        match = METRIC_PATH.match(column.value)
        if match is None:
            raise PlmbenchError(f"column {column.label} ({column.value}) is no metric of a split")
        specs.append(ColumnSpec(column.label, match["split"], match["metric"], column.scale))
    return specs


def seed_outputs(row: Row, task: str, specs: Sequence[ColumnSpec]) -> list[dict]:
    """The row's outputs of ``task``, per seed, of every split the columns read."""
    splits = sorted({spec.split for spec in specs})
    return [{split: read_outputs(record, split) for split in splits}
            for record in _seed_records(row, task)]


def _arms(task: str, columns: list[Column], row_a: Row, row_b: Row) -> TaskArms:
    specs = column_specs(columns)
    return TaskArms(task, specs, *(seed_outputs(row, task, specs) for row in (row_a, row_b)))


def _aso(a: Mapping[str, float] | None, b: Mapping[str, float] | None,
         iterations: int) -> float | None:
    if not a or not b or not iterations:
        return None
    return aso(list(a.values()), list(b.values()), iterations=iterations)


def compare(row_a: Row, row_b: Row, columns: Sequence[Column], board: Board,
            resamples: int = RESAMPLES, seed: int = 0, aso_iterations: int = 1000,
            correction: str = DEFAULT) -> list[Line]:
    """Per task both rows have, then the aggregate: B - A, tested, the tasks' p-values adjusted
    for each other by ``correction`` (module docstring)."""
    weights_a = scoring_weights(row_a.cells, columns, board)
    weights_b = scoring_weights(row_b.cells, columns, board)
    tasks = [task for task in weights_a if task in weights_b]
    if not tasks:
        raise PlmbenchError(f"rows {row_a.label!r} and {row_b.label!r} share no scored task")
    lines, arms, fallback = [], [], []
    seed_scores = {}
    for task in tasks:
        cols = [c for c in weights_a[task][1] if c in weights_b[task][1]]
        scores = [task_seed_scores(row.cells, cols) for row in (row_a, row_b)]
        seed_scores[task] = scores
        means = [math.fsum(c.scale * row.cells[c.label].mean for c in cols) / len(cols)
                 for row in (row_a, row_b)]
        line = Line(task, *means, None, "", _aso(*scores, aso_iterations))
        try:
            arms.append(_arms(task, cols, row_a, row_b))
        except PlmbenchError as err:
            estimates = [Estimate.of(list(s.values())) if s else None for s in scores]
            line.test = None if None in estimates else difference(*estimates)
            line.method, line.note = ("Welch" if line.test else ""), str(err)
            fallback.append(task)
        lines.append(line)
    weights = [1 / len(tasks) if board.aggregate == "task_macro" else
               len(weights_a[t][1]) / sum(len(weights_a[u][1]) for u in tasks) for t in tasks]
    if arms:
        per_task, overall = paired_bootstrap(arms, [w for w, t in zip(weights, tasks, strict=True)
                                                    if t not in fallback], resamples, seed)
        for line in lines:
            if line.name in per_task:
                line.test, line.method = per_task[line.name], "bootstrap"
    means = [math.fsum(w * line.a for w, line in zip(weights, lines, strict=True)),
             math.fsum(w * line.b for w, line in zip(weights, lines, strict=True))]
    aggregate = Line(AGGREGATE, *means, None, "")
    if not fallback:
        aggregate.test, aggregate.method = overall, "bootstrap"
    else:  # Welch on the weighted sums of the tasks' seed estimates
        parts = [[(w, Estimate.of(list(seed_scores[t][i].values())))
                  for w, t in zip(weights, tasks, strict=True) if seed_scores[t][i]]
                 for i in (0, 1)]
        if all(len(p) == len(tasks) for p in parts):
            aggregate.test = difference(weighted_sum(parts[0]), weighted_sum(parts[1]))
            aggregate.method = "Welch" if aggregate.test else ""
        aggregate.note = f"no per-example predictions for {', '.join(fallback)}"
    aggregate.aso = _aso(*_aggregate_seeds(seed_scores, tasks, weights), aso_iterations)
    tested = [line for line in lines if line.test is not None]
    if len(tested) > 1:
        for line, p in zip(tested, adjust([line.test.p for line in tested], correction),
                           strict=True):
            line.p_adjusted = p
    return [*lines, aggregate]


def _aggregate_seeds(seed_scores: Mapping, tasks: Sequence[str], weights: Sequence[float]):
    """Per row, the aggregate on each seed every task has (None where a task has none)."""
    out = []
    for i in (0, 1):
        per_task = [seed_scores[t][i] for t in tasks]
        if any(s is None for s in per_task):
            out.append(None)
            continue
        common = set.intersection(*(set(s) for s in per_task))
        out.append({seed: math.fsum(w * s[seed] for w, s in zip(weights, per_task, strict=True))
                    for seed in sorted(common)})
    return out


def verdict(line: Line, higher_is_better: bool = True, alpha: float = ALPHA) -> str:
    """"B better" or "A better" where the line's p (adjusted where several tasks were tested)
    is below ``alpha``, by the direction of B - A; else NO_DIFFERENCE; IDENTICAL where the
    rows' predictions are the same."""
    if line.test is None:
        return "untested"
    if (exact := line.test.exact_zero_text()) is not None:
        return exact
    if not line.p < alpha:
        return NO_DIFFERENCE
    return "B better" if (line.test.value > 0) == higher_is_better else "A better"


def _p(p: float, resamples: int, method: str) -> str:
    return f"<{1 / resamples:.0g}" if p == 0 and method == "bootstrap" else f"{p:.3f}"


def mde_text(test: Difference | None, spec: str = ".2f") -> str:
    """The test's minimum detectable effect, "–" where it has none."""
    mde = None if test is None else test.mde
    return "–" if mde is None else format(mde, spec)


def _aso_text(value: float | None) -> str:
    if value is None:
        return "–"
    reading = (" (B almost better)" if value < ASO_THRESHOLD else
               " (A almost better)" if value > 1 - ASO_THRESHOLD else "")
    return f"{value:.2f}{reading}"


def render(lines: Sequence[Line], name_a: str, name_b: str, title: str, resamples: int,
           higher_is_better: bool = True, spec: str = ".2f", correction: str = DEFAULT) -> str:
    """A comparison as a Markdown table: per task and the aggregate, A, B, B - A [95% CI], the
    p-value (and adjusted for the other tasks) and its test, the MDE, ASO's eps_min, the
    verdict; the level, the correction and notes of fallbacks below."""
    out = [f"### {title}: B = {name_b} against A = {name_a}", "",
           f"| task | A | B | B - A [95% CI] | p | p ({NAMES[correction]}) | test | MDE | "
           "ASO eps_min | verdict |",
           "|:--|--:|--:|--:|--:|--:|:--|--:|--:|:--|"]
    for line in lines:
        if line.test is None:
            shown, p, adjusted = format(line.b - line.a, "+" + spec), "–", "–"
        else:
            t = line.test
            shown = (f"{format(t.value, '+' + spec)} [{format(t.low, '+' + spec)}, "
                     f"{format(t.high, '+' + spec)}]")
            p = _p(t.p, resamples, line.method)
            adjusted = "–" if line.p_adjusted is None else _p(line.p_adjusted, resamples,
                                                               line.method)
        name = f"**{line.name}**" if line.name == AGGREGATE else line.name
        out.append(f"| {name} | {format(line.a, spec)} | {format(line.b, spec)} | {shown} | {p} "
                   f"| {adjusted} | {line.method or '–'} | {mde_text(line.test, spec)} | "
                   f"{_aso_text(line.aso)} | {verdict(line, higher_is_better)} |")
    notes = [f"- {line.name}: {line.note}" for line in lines if line.note]
    errors = [e for line in lines if line.test is not None
              and (e := line.test.monte_carlo()) is not None]
    mc = "" if not errors else (
        f" Monte-Carlo error of these {resamples} replicates: at most "
        f"±{format(max(e[0] for e in errors), spec)} on an interval's ends and "
        f"±{max(e[1] for e in errors):.3f} on a p-value (more replicates: --resamples).")
    out += ["", f"Level: α = {ALPHA:.2f}, two-sided; a verdict reads p (the tasks' p adjusted "
            f"for each other by {NAMES[correction]}, where there are several), never the "
            f"interval alone. MDE: the smallest B - A the test finds with {POWER:.0%} power at "
            "that level, (z(1 - α/2) + z(power)) x its standard error (t quantiles for Welch). "
            f"Paired bootstrap: {resamples} replicates resampling the dev examples (the "
            "same rows for both) and each row's seeds; percentile interval, two-sided p by the "
            f"shift method.{mc} Welch: over seeds, where no per-example predictions were "
            "found. ASO: almost stochastic order over seeds (deepsig), eps_min < 0.2: B almost "
            "stochastically better; > 0.8: A.", *([""] + notes if notes else []), ""]
    return "\n".join(out)
