"""``plmbench leaderboard --compare DIR_A DIR_B``: what changed between two sets of results (two
code versions, two protocols), cell by cell, on one board.

Rows are matched by what identifies them on either side (``Row.key``: their records' label and
protocol), whatever else each side holds, so a configuration is one line even where its row
name differs (a side with several points of a sweep names each by its values); columns are
matched by their labels. A cell shows A's mean, B's mean and the difference B - A in the
column's format. Rows or cells only one side has say so.
"""

from __future__ import annotations

from bench.board_points import row_names
from bench.leaderboard import MISSING, Table


def _mean(table: Table, key: tuple[str, str], column_label: str) -> float | None:
    row = next((r for r in table.rows if r.key(table.board) == key), None)
    column = next((c for c in table.columns if c.label == column_label), None)
    if row is None or column is None or column_label not in row.cells:
        return None
    return column.scale * row.cells[column_label].center(table.stat)


def render_comparison(a: Table, b: Table, name_a: str, name_b: str) -> str:
    """Markdown: one row per label of either side, one column per column of either side."""
    columns = {c.label: c for c in b.columns} | {c.label: c for c in a.columns}
    rows = {r.key(b.board): r for r in b.rows} | {r.key(a.board): r for r in a.rows}
    names = row_names(list(rows), {key: row.recipe for key, row in rows.items()})
    keys = sorted(names, key=lambda key: (names[key], key))
    if not keys:
        return f"No finished runs of board {a.board.name!r} under {name_a} or {name_b}.\n"
    lines = [f"## {a.board.title}: {name_b} against {name_a} (B - A)", "",
             "| Model | " + " | ".join(columns) + " |",
             "|:--" + "|--:" * len(columns) + "|"]
    for key in keys:
        cells = []
        for column in columns.values():
            x, y = _mean(a, key, column.label), _mean(b, key, column.label)
            if x is None and y is None:
                cells.append(MISSING)
            elif x is None or y is None:
                side = "B" if x is None else "A"
                cells.append(f"only {side}: {format(x if y is None else y, column.format)}")
            else:
                diff = format(y - x, "+" + column.format.lstrip("+"))
                cells.append(f"{format(x, column.format)} → {format(y, column.format)} ({diff})")
        lines.append(f"| {names[key]} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", f"A: {name_a}; B: {name_b}. Cells: {a.stat} over seeds.", ""])
