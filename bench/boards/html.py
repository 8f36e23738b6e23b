"""A leaderboard as one self-contained HTML page: nothing is fetched, so it opens offline.

The table is the Markdown's (``bench/boards/text.py``: the same cells, marks and footnote) and
sorts by any column when its header is clicked (a few lines of inline JavaScript over each
cell's ``data-value``); a cell's tooltip gives its std, median and interval. Below it, what a
reader compares (``bench/boards/plots.py``): per task a forest plot of the rows' scores with their
95% intervals (baseline and published reference rows marked; on a board without a score, per
column), a rows x tasks heatmap, and the score against parameters and against pretraining
compute with the Pareto frontier. Published reference rows, when asked for, have a table of
their own and never enter the measured table. Failed runs are listed apart. The page is a
function of the table alone, so the same records give the same bytes.
"""

from __future__ import annotations

import html
import re

from bench.boards.plots import Item, forest, heatmap, scatter
from bench.boards.points import point_text
from bench.boards.rows import Row
from bench.boards.score import task_scores
from bench.boards.table import Table
from bench.boards.text import (
    REFERENCE_HEADER,
    REFERENCES_TITLE,
    footnote,
    header_cells,
    heading,
    reference_cells,
    reference_head,
    reference_name,
    references_legend,
    row_cells,
    row_label,
    table_json,
)
from datamodules import strict_json
from lit_models.core import svg

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; } th, td { padding: .3em .7em; border-bottom: 1px solid #ddd; }
table.board th { cursor: pointer; background: #f4f4f4; user-select: none; }
td.num { text-align: right; }
tr.baseline td { font-style: italic; color: #666; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
svg { border: 1px solid #ddd; background: #fff; }
.note { color: #555; max-width: 60em; } table.heatmap td { min-width: 3.5em; }
"""
SORT_SCRIPT = """
document.querySelectorAll("table.board th").forEach(th => th.addEventListener("click", () => {
  const body = th.closest("table").querySelector("tbody"), i = th.cellIndex;
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


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _sort_values(row: Row, table: Table) -> list[str]:
    """Each cell's sort key: its number (the score, a share, a cell's centre) or its text."""
    values = [row_label(row), *(row.texts.get(t, "") for t in table.text_columns)]
    if table.board.aggregate != "none":
        values.append("" if row.score is None else repr(row.score))
    values += [repr(s) if s is not None else "" for s in (row.share, row.parameter_share)
               ][:2 if table.board.reference else 0]
    for column in table.columns:
        cell = row.cells.get(column.label)
        values.append("" if cell is None else repr(column.scale * cell.center(table.stat)))
    return values


def _tooltip(row: Row, table: Table, index: int) -> str:
    """A cell's title: the model's settings that its short name abbreviates, a cell's spread."""
    offset = len(header_cells(table)) - len(table.columns)
    if index == 0 and row.point:
        return f' title="{_esc(point_text(row.point))}"'
    if index < offset:
        return ""
    column = table.columns[index - offset]
    cell = row.cells.get(column.label)
    if cell is None:
        return ""
    interval = cell.interval()
    ci = "" if interval is None else (f", 95% interval [{column.show(interval[0])}, "
                                      f"{column.show(interval[1])}]")
    return (f' title="mean {column.show(cell.mean)}, std {column.show(cell.std)}, median '
            f'{column.show(cell.median)}{ci}"')


def _board_table(table: Table, suffix: str = "") -> str:
    ths = "".join(f"<th>{_esc(h)}</th>" for h in header_cells(table))
    body = []
    for row in table.rows:
        cells = [f'<td{" class=num" if i else ""} data-value="{_esc(value)}"'
                 f'{_tooltip(row, table, i)}>{_esc(text)}</td>'
                 for i, (text, value) in enumerate(zip(row_cells(row, table),
                                                       _sort_values(row, table), strict=True))]
        kind = "baseline" if row.baseline else "model"
        body.append(f'<tr class="{kind}">{"".join(cells)}</tr>')
    return (f'<table id="board{suffix}" class="board"><thead><tr>{ths}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _references_table(table: Table, suffix: str = "") -> str:
    if not table.references:
        return ""
    header = "".join(f"<th>{_esc(h)}</th>" for h in [*REFERENCE_HEADER, *table.labels,
                                                       "source"])
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(text)}</td>" for text in [
            *reference_head(r), *reference_cells(r, table), r.source]) + "</tr>"
        for r in table.references)
    legend = "".join(f'<p class="note">{_esc(line)}</p>' for line in references_legend(table))
    return (f"<h2>{_esc(REFERENCES_TITLE)}</h2>"
            f'<table id="references{suffix}"><thead><tr>{header}</tr></thead><tbody>{body}</tbody>'
            f"</table>{legend}")


def _forests(table: Table, suffix: str = ""
             ) -> tuple[str, dict[tuple[str, str], float], dict[str, bool]]:
    """The forest plots, and the (row, task) -> score map and directions the heatmap shows."""
    board, figures = table.board, []
    values: dict[tuple[str, str], float] = {}
    directions: dict[str, bool] = {}
    items: dict[str, list[Item]] = {}
    for row in table.rows:
        kind = "baseline" if row.baseline else "model"
        if board.aggregate == "none":  # no score: a forest per varying column
            groups = {c.label: (c.scale * row.cells[c.label].center(table.stat),
                                row.cells[c.label].estimate, c.scale, c.higher_is_better)
                      for c in table.columns if c.varies and c.label in row.cells}
        else:
            groups = {task: (value, estimate, 1.0, table.score_higher_is_better)
                      for task, (value, estimate) in task_scores(
                          row.cells, table.columns, board, table.stat).items()}
        for group, (value, estimate, scale, up) in groups.items():
            interval = estimate.interval() if estimate is not None else None
            low, high = (None, None) if interval is None else (scale * interval[0],
                                                               scale * interval[1])
            items.setdefault(group, []).append(Item(row_label(row), value, low, high, kind))
            values[row_label(row), group] = value
            directions[group] = up
    for group in items:
        scoring = [c.label.split(" [")[0] for c in table.columns
                   if c.task == group and c.score] if board.aggregate != "none" else [group]
        for reference in table.references:
            figures_ = [reference.values.get(label) for label in scoring]
            if scoring and None not in figures_:
                items[group].append(Item(reference_name(reference),
                                         sum(figures_) / len(figures_), kind="reference"))
    for i, (group, group_items) in enumerate(items.items()):
        figures.append(forest(group, f"forest{suffix}-{i}", group_items, directions[group]))
    return "".join(figures), values, directions


def curves(table: Table, suffix: str = "") -> str:
    """Per task, its columns labelled "<board.curves><number>" as one curve per row over the
    number (a probing run's accuracy by layer); "" on boards without ``curves``."""
    prefix = table.board.curves
    if not prefix:
        return ""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)(?: \[.*\])?$")
    by_task: dict[str, list[tuple[int, str, float]]] = {}
    for column in table.columns:
        if match := pattern.match(column.label):
            by_task.setdefault(column.task, []).append(
                (int(match.group(1)), column.label, column.scale))
    figures = []
    for index, (task, columns) in enumerate(sorted(by_task.items())):
        series = [svg.Series(row.label, [(float(x), scale * row.cells[label].center(table.stat),
                                          row.label)
                                         for x, label, scale in columns if label in row.cells],
                             line=True) for row in table.rows if not row.baseline]
        figures.append(svg.plot(f"{task}: by {prefix.strip()}", f"curves{suffix}-{index}",
                                [s for s in series if s.points], prefix.strip(), task,
                                label_points=False))
    return "".join(figures)


def render_html(tables: Table | list[Table]) -> str:
    """The whole page: per table (one per evaluation set, ``bench/boards/sections.py``) its title,
    sortable table, footnote and notes, reference rows, failures and plots."""
    tables = [tables] if isinstance(tables, Table) else tables
    board = tables[0].board
    sections = "".join(_section(table, f"-{i + 1}" if i else "") for i, table in enumerate(tables))
    data = tables[0] if len(tables) == 1 else tables
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_esc(board.title)} leaderboard</title><style>{STYLE}</style></head><body>",
        sections,
        f'<script type="application/json" id="data">{_esc(_json_text(data))}</script>',
        f"<script>{SORT_SCRIPT}</script></body></html>", "",
    ])


def _section(table: Table, suffix: str) -> str:
    """One table of the page and its plots; ``suffix`` keeps its element ids apart."""
    board = table.board
    scored = board.aggregate != "none"
    failures = "".join(f"<li>{_esc(f.task)} {_esc(f.label)} seed {_esc(f.seed)}: {_esc(f.error)} "
                       f"<code>{_esc(f.run_dir)}</code></li>" for f in table.failures)
    unused = "".join(f"<li><code>{_esc(u.source)}</code>: {_esc(u.why)}</li>" for u in table.unused)
    trained = [row for row in table.rows if not row.baseline]
    y_label = board.score_label if scored else (table.labels[0] if table.labels else "score")

    def score_of(row: Row) -> float | None:
        if row.score is not None:
            return row.score
        first = next((c for c in table.columns if c.label in row.cells), None)
        return None if first is None else first.scale * row.cells[first.label].center(table.stat)

    up = table.score_higher_is_better if scored else (
        table.columns[0].higher_is_better if table.columns else True)
    params = [(r.parameters, s, r.label) for r in trained
              if r.parameters and (s := score_of(r)) is not None]
    compute = [(r.compute, s, r.label) for r in trained
               if r.compute and (s := score_of(r)) is not None]
    size = table.board.size.replace("_", " ")  # the parameters, or those trained
    forests, values, directions = _forests(table, suffix)
    grid = heatmap([row_label(r) for r in table.rows], list(dict.fromkeys(g for _, g in values)),
                   values, directions, f"heatmap{suffix}")
    empty = "" if table.rows else "<p>No finished runs on this board yet.</p>"
    notes = "".join(f'<p class="note board-note">{_esc(note)}</p>' for note in table.notes)
    return "\n".join([
        f"<h1>{_esc(heading(table))}: board {_esc(board.name)}</h1>", empty,
        _board_table(table, suffix),
        f'<p class="note">{_esc(footnote(table)) if table.rows else ""}</p>', notes,
        _references_table(table, suffix),
        (f'<h2>Failed runs ({len(table.failures)}), not in the table</h2>'
         f'<ul id="failures{suffix}">{failures}</ul>') if table.failures else "",
        (f'<h2>By {_esc(board.curves.strip())}</h2><div class="plots">{lines}</div>'
         if (lines := curves(table, suffix)) else ""),
        (f'<h2>Records not used ({len(table.unused)})</h2><ul id="unused{suffix}">{unused}</ul>'
         if table.unused else ""),
        "<h2>Per task: scores with their 95% intervals</h2>",
        f'<div class="plots">{forests}</div>',
        f"<h2>Rows x tasks</h2>{grid}" if grid else "",
        '<h2>Score against cost</h2><div class="plots">',
        scatter(f"score against {size} (Pareto frontier dashed)", f"parameters{suffix}", params,
                size, y_label, up),
        scatter("score against pretraining compute (Pareto frontier dashed)",
                f"compute{suffix}", compute, "training FLOPs", y_label, up),
        "</div>",
    ])


def _json_text(data: Table | list[Table]) -> str:
    value = table_json(data) if isinstance(data, Table) else {
        "sections": [table_json(t) for t in data]}
    return strict_json.dumps(value, sort_keys=True, separators=(",", ":"))
