"""A leaderboard as one self-contained HTML page: nothing is fetched, so it opens offline.

The table sorts by any column when its header is clicked (a few lines of inline JavaScript over
each cell's ``data-value``); the plots are inline SVG drawn here: the score against the parameter
count and against the pretraining compute (log scales), and the spread over seeds of every
column (one dot per seed, one line per row). Baseline rows are marked; failed runs are listed
apart from the table. The page is a function of the table alone, so the same records give the
same bytes.
"""

from __future__ import annotations

import json
import re

from bench.board_text import (
    BASELINE_MARK,
    _footnote,
    _score_text,
    share_headers,
    share_texts,
    table_json,
)
from bench.leaderboard import MISSING, Row, Table
from lit_models.core import svg
from lit_models.core.svg import esc as _esc
from lit_models.core.svg import scatter

STYLE = svg.STYLE + """th { cursor: pointer; user-select: none; }
tr.baseline td { font-style: italic; color: #666; }
"""
SORT_SCRIPT = """
document.querySelectorAll("#board th").forEach((th, i) => th.addEventListener("click", () => {
  const body = document.querySelector("#board tbody");
  const up = th.dataset.order !== "asc";
  th.dataset.order = up ? "asc" : "desc";
  const key = r => r.children[i].dataset.value;
  const rows = Array.from(body.rows).sort((a, b) => {
    const x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
    const c = (isNaN(nx) || isNaN(ny)) ? String(x).localeCompare(String(y)) : nx - ny;
    return up ? c : -c;
  });
  rows.forEach(r => body.appendChild(r));
}));
"""


def _row_score(row: Row, table: Table) -> float | None:
    """The row's board score, else (boards without one) its first column's scaled value."""
    if row.score is not None:
        return row.score
    for column in table.columns:
        if column.label in row.cells:
            return column.scale * row.cells[column.label].center(table.stat)
    return None


def seed_spread(table: Table) -> str:
    """Per column, each row's value for every seed: how far one seed is from another."""
    figures = []
    for index, column in enumerate(table.columns):
        points = [(float(i + 1), column.scale * v, row.label)
                  for i, row in enumerate(table.rows) if column.label in row.cells
                  for v in row.cells[column.label].values]
        figures.append(scatter(f"spread over seeds: {column.label} (x: row in table order)",
                               f"seeds-{index}", points, "row", column.label, log_x=False))
    return "".join(figures)


def curves(table: Table) -> str:
    """Per task, its columns labelled "<board.curves><number>" as one curve per row over the
    number (a probing run's accuracy by layer)."""
    prefix = table.board.curves
    if not prefix:
        return ""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)(?: \[.*\])?$")
    by_task: dict[str, list[tuple[int, str, float]]] = {}
    for column in table.columns:
        match = pattern.match(column.label)
        if match:
            by_task.setdefault(column.task, []).append(
                (int(match.group(1)), column.label, column.scale))
    figures = []
    for index, (task, columns) in enumerate(sorted(by_task.items())):
        series = [svg.Series(row.label, [(float(x), scale * row.cells[label].center(table.stat),
                                          row.label)
                                         for x, label, scale in columns if label in row.cells],
                             line=True) for row in table.rows if not row.baseline]
        figures.append(svg.plot(f"{task}: by {prefix.strip()}", f"curves-{index}",
                                [s for s in series if s.points], prefix.strip(), task,
                                label_points=False))
    return "".join(figures)


def _cell(row: Row, table: Table, label: str) -> str:
    column = next(c for c in table.columns if c.label == label)
    cell = row.cells.get(label)
    if cell is None:
        return f'<td class="num" data-value="">{MISSING}</td>'
    return (f'<td class="num" data-value="{column.scale * cell.center(table.stat)!r}" '
            f'title="mean {column.show(cell.mean)}, median {column.show(cell.median)}">'
            f'{_esc(column.text(cell, table.stat))}</td>')


def render_html(table: Table) -> str:
    """The whole page: title, sortable table, footnote, failures, plots."""
    board = table.board
    scored = board.aggregate != "none"
    header = ["Model", *([board.score_label] if scored else []), *share_headers(table),
              *table.labels]
    ths = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = []
    for row in table.rows:
        label = row.label + (BASELINE_MARK if row.baseline else "")
        cells = [f'<td data-value="{_esc(label)}">{_esc(label)}</td>']
        if scored:
            value = "" if row.score is None else repr(row.score)
            text = _esc(_score_text(row, table))
            cells.append(f'<td class="num" data-value="{value}">{text}</td>')
        cells += [f'<td class="num" data-value="{_esc(text)}">{_esc(text)}</td>'
                  for text in share_texts(row, table)]
        cells += [_cell(row, table, label_) for label_ in table.labels]
        kind = "baseline" if row.baseline else "model"
        body.append(f'<tr class="{kind}">{"".join(cells)}</tr>')
    failures = "".join(f"<li>{_esc(f.task)} {_esc(f.label)} seed {_esc(f.seed)}: {_esc(f.error)} "
                       f"<code>{_esc(f.run_dir)}</code></li>" for f in table.failures)
    trained = [row for row in table.rows if not row.baseline]
    y_label = board.score_label if scored else (table.labels[0] if table.labels else "score")
    params = [(r.parameters, s, r.label) for r in trained
              if r.parameters and (s := _row_score(r, table)) is not None]
    compute = [(r.compute, s, r.label) for r in trained
               if r.compute and (s := _row_score(r, table)) is not None]
    empty = "" if table.rows else "<p>No finished runs on this board yet.</p>"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_esc(board.title)} leaderboard</title><style>{STYLE}</style></head><body>",
        f"<h1>{_esc(board.title)}: board {_esc(board.name)}</h1>", empty,
        f'<table id="board"><thead><tr>{ths}</tr></thead><tbody>{"".join(body)}</tbody></table>',
        f'<p class="note">{_esc(_footnote(table)) if table.rows else ""}</p>',
        (f'<h2>Failed runs ({len(table.failures)}), not in the table</h2>'
         f'<ul id="failures">{failures}</ul>') if table.failures else "",
        '<h2>Plots</h2><div class="plots">', curves(table),
        scatter("score against parameters", "parameters", params, "parameters", y_label),
        scatter("score against pretraining compute", "compute", compute, "training FLOPs",
                y_label),
        seed_spread(table), "</div>",
        f'<script type="application/json" id="data">{_esc(_json_text(table))}</script>',
        f"<script>{SORT_SCRIPT}</script></body></html>", "",
    ])


def _json_text(table: Table) -> str:
    return json.dumps(table_json(table), sort_keys=True, separators=(",", ":"))
