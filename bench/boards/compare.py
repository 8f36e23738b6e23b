"""``plmbench leaderboard --compare DIR_A DIR_B``: what changed between two sets of results (two
code versions, two protocols), cell by cell, on one board, and whether it is more than noise.

Rows are matched by what identifies them on either side (``Row.key``: their records' label and
protocol), whatever else each side holds, so a configuration is one line even where its row
name differs (a side with several points of a sweep names each by its values); columns are
matched by their labels. A cell shows A's value, B's value and the difference B - A in the
column's format, marked "~" where the difference is not significant (Welch's test over seeds,
``bench/boards/stats.py``). Rows or cells only one side has say so. Below the table, every row both
sides have is tested per task and on the aggregate by the paired bootstrap over examples and
seeds and by ASO (``bench/boards/significance.py``).
"""

from __future__ import annotations

from bench.boards.bootstrap import RESAMPLES
from bench.boards.points import row_names
from bench.boards.rows import Row
from bench.boards.significance import compare, render
from bench.boards.stats import Estimate, difference
from bench.boards.table import MISSING, Table
from datamodules.errors import PlmbenchError

NOT_SIGNIFICANT = " ~"


def one_table(tables: list[Table], where: str) -> Table:
    """The one table of a side; a side whose runs were scored on several evaluation sets
    (``bench/boards/sections.py``) has no single table to compare cell by cell."""
    if len(tables) == 1:
        return tables[0]
    raise PlmbenchError(f"{where} holds runs of board {tables[0].board.name!r} scored on "
                        f"{len(tables)} different evaluation sets; compare directories whose "
                        "runs share one (move the others aside)")


def _cell(table: Table, row: Row | None, column_label: str):
    column = next((c for c in table.columns if c.label == column_label), None)
    if row is None or column is None or column_label not in row.cells:
        return None, None
    return column.scale * row.cells[column_label].center(table.stat), row.cells[column_label]


def _scaled(cell, scale: float) -> Estimate:
    estimate = cell.estimate
    return Estimate(scale * estimate.value, scale * scale * estimate.variance, estimate.df)


def render_comparison(a: Table, b: Table, name_a: str, name_b: str, resamples: int = RESAMPLES,
                      aso_iterations: int = 1000) -> str:
    """Markdown: one row per configuration of either side, one column per column of either side;
    then the significance of each configuration both sides have."""
    columns = {c.label: c for c in b.columns} | {c.label: c for c in a.columns}
    rows_a, rows_b = ({r.key(t.board): r for r in t.rows} for t in (a, b))
    rows = rows_b | rows_a
    names = row_names(list(rows), {key: row.settings for key, row in rows.items()})
    keys = sorted(names, key=lambda key: (names[key], key))
    if not keys:
        return f"No finished runs of board {a.board.name!r} under {name_a} or {name_b}.\n"
    lines = [f"## {a.board.title}: {name_b} against {name_a} (B - A)", "",
             "| Model | " + " | ".join(columns) + " |",
             "|:--" + "|--:" * len(columns) + "|"]
    for key in keys:
        cells = []
        for column in columns.values():
            (x, cell_a), (y, cell_b) = (_cell(t, side.get(key), column.label)
                                        for t, side in ((a, rows_a), (b, rows_b)))
            if x is None and y is None:
                cells.append(MISSING)
            elif x is None or y is None:
                side = "B" if x is None else "A"
                cells.append(f"only {side}: {format(x if y is None else y, column.format)}")
            else:
                test = difference(_scaled(cell_a, column.scale), _scaled(cell_b, column.scale))
                mark = NOT_SIGNIFICANT if test is not None and not test.significant else ""
                diff = format(y - x, "+" + column.format.lstrip("+"))
                cells.append(f"{format(x, column.format)} → {format(y, column.format)} "
                             f"({diff}){mark}")
        lines.append(f"| {names[key]} | " + " | ".join(cells) + " |")
    lines += ["", f"A: {name_a}; B: {name_b}. Cells: {a.stat} over seeds; ~ not significant "
              "(Welch's t-test over seeds, 5%).", ""]
    for key in keys:
        if key in rows_a and key in rows_b and a.board.aggregate != "none":
            tested = compare(rows_a[key], rows_b[key], a.columns, a.board, resamples,
                             aso_iterations=aso_iterations)
            lines.append(render(tested, name_a, name_b, names[key], resamples,
                                a.score_higher_is_better))
    return "\n".join(lines)
