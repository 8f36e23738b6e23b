"""Leaderboard tables as text: Markdown for reading, CSV for spreadsheets, JSON for programs.

Each renders a ``bench.leaderboard.Table`` and nothing else, so the same records give the same
bytes: rows come sorted, Markdown uses the columns' fixed formats, CSV and JSON Python's shortest
round-tripping float text. Failed runs are listed apart from the rows, with their error line, and
so are the records the board could not use, with their path and why (CSV, a table of rows only,
leaves both to the command's warnings); baseline rows (computed from the data alone) are marked.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path

from bench.board_config import Column
from bench.board_points import point_text
from bench.leaderboard import MISSING, Row, Table
from bench.selection import selection_lines

BASELINE_MARK = " †"


def _score_text(row: Row, table: Table) -> str:
    if row.score is None:
        return MISSING
    board = table.board
    what = "tasks" if board.aggregate == "task_macro" else "columns"
    value = format(row.score, board.score_format or board.format)
    return f"{value} ({row.n_scored}/{table.n_scorable} {what})"


def share_headers(table: Table) -> list[str]:
    """The headers of the shares of the board's reference row, when it names one."""
    reference = table.board.reference
    return [f"% of {reference}", f"parameters % of {reference}"] if reference else []


def share_texts(row: Row, table: Table) -> list[str]:
    """A row's score and parameters as percentages of the reference row's (share_headers)."""
    if not table.board.reference:
        return []
    return [MISSING if share is None else f"{100 * share:.1f}"
            for share in (row.share, row.parameter_share)]


def _scale_text(columns: list[Column]) -> str:
    """How the cells are scaled: "×100", "raw values", or per group of columns."""
    by_scale: dict[float, list[str]] = defaultdict(list)
    for column in columns:
        by_scale[column.scale].append(column.label)

    def factor(scale: float) -> str:
        return "raw values" if scale == 1 else f"×{scale:g}"

    if len(by_scale) == 1:
        return factor(next(iter(by_scale)))
    # groups in column order
    return "; ".join(f"{factor(s)}: {', '.join(labels)}" for s, labels in by_scale.items())


def _footnote(table: Table) -> str:
    board = table.board
    spread = ("median [min, max] over seeds (n)" if table.stat == "median" else
              "mean ± std over seeds (n), sample std (0 for one seed)")
    parts = [f"Cells: {spread}, {_scale_text(table.columns)}."]
    lower = [c.label for c in table.columns if not c.higher_is_better]
    if lower:
        parts.append(f"Lower is better: {', '.join(lower)}.")
    scoring = [c.label for c in table.columns if c.score]
    direction = "" if table.score_higher_is_better else " (lower is better)"
    if board.aggregate == "task_macro":
        parts.append(
            f"{board.score_label}{direction}: mean over the tasks a row has of each task's mean "
            f"over its scoring columns' {table.stat}s, with the number of tasks it covers "
            f"of the {table.n_scorable} on this board."
        )
    elif board.aggregate == "mean":
        parts.append(
            f"{board.score_label}{direction}: mean of the {table.stat}s of the scoring columns "
            f"a row has "
            f"({', '.join(scoring)}), with the number it covers."
        )
    if board.reference:
        parts.append(f"% of {board.reference}: a row's {board.score_label} and parameter count "
                     f"as percentages of the {board.reference} row's.")
    if any(row.baseline for row in table.rows):
        parts.append(f"{BASELINE_MARK.strip()} Baseline: computed from the data alone, no training "
                     "(majority class; mean prediction for regression, whose correlations are 0).")
    if board.note:
        parts.append(board.note)
    return " ".join(parts)


def _failures_markdown(table: Table) -> list[str]:
    """The failed runs, apart from the table: one line each, with the run's error."""
    if not table.failures:
        return []
    lines = [f"### Failed runs ({len(table.failures)}), not in the table", ""]
    for failure in table.failures:
        lines.append(f"- {failure.task} {failure.label} seed {failure.seed}: {failure.error} "
                     f"({failure.run_dir})")
    return [*lines, ""]


def _selected_markdown(table: Table) -> list[str]:
    """The grid points best-on-dev selection chose, one line per row and task."""
    lines = selection_lines(table)
    return ["### Selected on dev", "", *(f"- {line}" for line in lines), ""] if lines else []


def _selected_text(row: Row) -> str:
    """A row's selected points in one CSV cell: "glue/rte: optim.lr=3e-05; glue/sst2: ..."."""
    return "; ".join(f"{task}: {point_text(chosen['point']) or 'the only point'}"
                     for task, chosen in sorted(row.selected.items()))


def _unused_markdown(table: Table) -> list[str]:
    """The records the board could not use, apart from the table: path and why, one a line."""
    if not table.unused:
        return []
    lines = [f"### Records not used ({len(table.unused)})", ""]
    lines += [f"- {unused.source}: {unused.why}" for unused in table.unused]
    return [*lines, ""]


def _row_label(row: Row) -> str:
    return row.label + (BASELINE_MARK if row.baseline else "")


def render_markdown(table: Table, results_dir: str | Path | None = None) -> str:
    """The table as GitHub-flavoured Markdown: a title, aligned columns and a footnote."""
    board = table.board
    if not table.rows:
        where = f"under {results_dir}" if results_dir is not None else "in the given records"
        after = _failures_markdown(table) + _unused_markdown(table)
        return "\n".join([f"No finished runs of board {board.name!r} {where}.",
                          *([""] if after else []), *after]).rstrip("\n") + "\n"
    scored = board.aggregate != "none"
    header = ["Model", *([board.score_label] if scored else []), *share_headers(table),
              *table.labels]
    body = [
        [_row_label(row).replace("|", "\\|"), *([_score_text(row, table)] if scored else []),
         *share_texts(row, table)]
        + [c.text(row.cells[c.label], table.stat) if c.label in row.cells else MISSING
           for c in table.columns]
        for row in table.rows
    ]
    header = [text.replace("|", "\\|") for text in header]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) for c, w in zip(cells, widths, strict=True)]
        padded[0] = cells[0].ljust(widths[0])
        return "| " + " | ".join(padded) + " |"

    # Model left-aligned, numbers right-aligned; a rule cell spans its text plus two spaces.
    rule = "|".join([":" + "-" * (widths[0] + 1)] + ["-" * (w + 1) + ":" for w in widths[1:]])
    plural = "s" if table.n_records != 1 else ""
    return "\n".join([
        f"## {board.title}: board {board.name!r} ({table.n_records} record{plural} used)",
        "",
        line(header),
        f"|{rule}|",
        *(line(cells) for cells in body),
        "",
        _footnote(table),
        "",
        *_selected_markdown(table),
        *_failures_markdown(table),
        *_unused_markdown(table),
    ]).rstrip("\n") + "\n"


def render_csv(table: Table) -> str:
    """The table as CSV: score and its coverage, per column mean, std, median, n (scaled).

    Numbers are Python's shortest round-tripping float text, so the CSV loses nothing.
    """
    board = table.board
    stats = ("mean", "std", "median", "n")
    score_header = {
        "task_macro": ["score", "n_tasks"], "mean": ["score", "n_columns"], "none": []
    }[board.aggregate]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    shares = ["share", "parameter_share"] if board.reference else []
    selected = ["selected"] if any(row.selected for row in table.rows) else []
    writer.writerow(
        ["model", "protocol_hash", *selected, *score_header, *shares]
        + [f"{label} {stat}" for label in table.labels for stat in stats]
    )
    for row in table.rows:
        fields = [_row_label(row), row.protocol_hash, *([_selected_text(row)] if selected else [])]
        if score_header:
            fields += ["", ""] if row.score is None else [repr(float(row.score)), row.n_scored]
        fields += ["" if share is None else repr(share) for share in
                   (row.share, row.parameter_share)][:len(shares)]
        for column in table.columns:
            cell = row.cells.get(column.label)
            if cell is None:
                fields += [""] * len(stats)
            else:
                scaled = [repr(column.scale * x) for x in (cell.mean, cell.std, cell.median)]
                fields += [*scaled, cell.n]
        writer.writerow(fields)
    return out.getvalue()


def _cell_json(column: Column, row: Row) -> dict | None:
    cell = row.cells.get(column.label)
    if cell is None:
        return None
    return {"mean": column.scale * cell.mean, "std": column.scale * cell.std,
            "median": column.scale * cell.median, "n": cell.n,
            "values": [column.scale * v for v in cell.values]}


def table_json(table: Table) -> dict:
    """The table as plain data: board, columns, rows (cells scaled, per seed too), failures."""
    board = table.board
    return {
        "board": {"name": board.name, "title": board.title, "aggregate": board.aggregate,
                  "score_label": board.score_label, "n_scorable": table.n_scorable,
                  "reference": board.reference or None,
                  "stat": table.stat},
        "n_records": table.n_records,
        "columns": [{"label": c.label, "task": c.task, "value": c.value, "scale": c.scale,
                     "higher_is_better": c.higher_is_better, "score": c.score,
                     "format": c.format} for c in table.columns],
        "rows": [{"label": row.label, "protocol_hash": row.protocol_hash, "score": row.score,
                  "n_scored": row.n_scored, "baseline": row.baseline,
                  "parameters": row.parameters, "compute": row.compute,
                  "share": row.share, "parameter_share": row.parameter_share,
                  "selected": row.selected,
                  "cells": {c.label: _cell_json(c, row) for c in table.columns}}
                 for row in table.rows],
        "failures": [{"task": f.task, "label": f.label, "seed": f.seed, "run_dir": f.run_dir,
                      "error": f.error} for f in table.failures],
        "unused": [{"source": u.source, "why": u.why} for u in table.unused],
    }


def render_json(table: Table) -> str:
    """``table_json`` as sorted, indented JSON text."""
    return json.dumps(table_json(table), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
