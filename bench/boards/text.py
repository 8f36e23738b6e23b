"""Leaderboard tables as text: Markdown for reading, CSV for spreadsheets, JSON for programs.

Each renders a ``bench.boards.table.Table`` and nothing else, so the same records give the same
bytes: rows come sorted, Markdown uses the columns' fixed formats, CSV and JSON Python's shortest
round-tripping float text. A cell reads "mean ± h (n=k)", h the half-width of the 95% t-interval
of the mean over seeds (CSV and JSON carry the interval's ends, the std and the median too); a
value that does not vary with the seed stands alone. Marks: ★ the column's best row, ≈ a row
Welch's test cannot tell from it (``bench/boards/score.py``). Failed runs are listed apart from
the rows, with their error line, and so are the records the board could not use, with their path
and why (CSV, a table of rows only, leaves both to the command's warnings); baseline rows
(computed from the data alone) are marked; the published reference rows, when asked for, are a
table of their own (``bench/boards/references.py``).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path

from bench.boards.config import Column
from bench.boards.points import point_text
from bench.boards.protocols import PROTOCOL_COLUMN
from bench.boards.protocols import describe as describe_protocol
from bench.boards.protocols import note as protocol_note
from bench.boards.rows import Row
from bench.boards.score import BEST, SCORE, TIED
from bench.boards.selection import selection_lines
from bench.boards.table import MISSING, Table
from datamodules import strict_json

BASELINE_MARK = " †"
REFERENCE_MARK = "‡"
MARKS = {BEST: " ★", TIED: " ≈"}


def partial(table: Table) -> bool:
    """Whether some row's score covers fewer tasks (columns) than the board scores."""
    return any(row.score is not None and row.n_scored < table.n_scorable for row in table.rows)


def _scored_what(table: Table) -> str:
    return "tasks" if table.board.aggregate == "task_macro" else "columns"


def heading(table: Table) -> str:
    """The table's title and what scores it: "GLUE (score: BERT's Table 1 average)"."""
    board = table.board
    section = f", {table.section}" if table.section else ""
    if board.aggregate == "none":
        return board.title + section
    what = board.aggregate_description or board.score_label
    if partial(table):
        what = f"{board.score_label} over the {_scored_what(table)} a row has, partial"
    return f"{board.title} (score: {what}){section}"


def score_text(row: Row, table: Table) -> str:
    if row.score is None:
        return MISSING
    board = table.board
    what = "tasks" if board.aggregate == "task_macro" else "columns"
    spec = board.score_format or board.format
    interval = row.score_interval()
    spread = "" if interval is None else f" ± {format(row.score - interval[0], spec)}"
    if interval is not None and interval != row.score_estimate.interval():  # cut at a bound
        spread = f" [{format(interval[0], spec)}, {format(interval[1], spec)}]"
    text = f"{format(row.score, spec)}{spread} ({row.n_scored}/{table.n_scorable} {what})"
    return text + MARKS.get(row.marks.get(SCORE), "")


def cell_text(row: Row, column: Column, table: Table) -> str:
    cell = row.cells.get(column.label)
    if cell is None:
        return MISSING
    return column.text(cell, table.stat) + MARKS.get(row.marks.get(column.label), "")


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


def header_cells(table: Table) -> list[str]:
    """Model, the text columns, the score, the shares, the columns: what every row shows."""
    scored = table.board.aggregate != "none"
    return ["Model", *table.text_columns, *([table.board.score_label] if scored else []),
            *share_headers(table), *table.labels]


def row_label(row: Row) -> str:
    return row.label + (BASELINE_MARK if row.baseline else "")


def row_cells(row: Row, table: Table) -> list[str]:
    """The row's texts under ``header_cells``."""
    scored = table.board.aggregate != "none"
    return [row_label(row), *(row.texts.get(t, MISSING) for t in table.text_columns),
            *([score_text(row, table)] if scored else []), *share_texts(row, table),
            *(cell_text(row, c, table) for c in table.columns)]


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


def _cut_text(table: Table) -> str:
    """"; [low, high]: ..." where some interval is cut at its metric's range, else ""."""
    cut = any(row.score_interval() != row.score_estimate.interval()
              for row in table.rows if row.score_estimate is not None) or any(
        column.interval(cell) != cell.interval() for row in table.rows
        for column in table.columns if (cell := row.cells.get(column.label)) is not None)
    return ("; [low, high]: an interval cut where it passed the range the metric can take (an "
            "accuracy's 0 to 100)") if cut else ""


def footnote(table: Table) -> str:
    board = table.board
    spread = ("median [min, max] over seeds (n)" if table.stat == "median" else
              "mean over seeds ± the half-width of its 95% t-interval (n seeds; one seed: no "
              f"interval{_cut_text(table)})")
    parts = [f"Cells: {spread}, {_scale_text(table.columns)}."]
    fixed = [c.label for c in table.columns if not c.varies or c.is_setting]
    if fixed:
        parts.append(f"{', '.join(fixed)}: the same for every seed, shown alone (its range "
                     "where the tasks a column spans differ).")
    lower = [c.label for c in table.columns if not c.higher_is_better and c.ranked]
    if lower:
        parts.append(f"Lower is better: {', '.join(lower)}.")
    scoring = [c.label for c in table.columns if c.score]
    direction = "" if table.score_higher_is_better else " (lower is better)"
    shown = any(row.score_interval() is not None for row in table.rows)
    if board.aggregate == "task_macro":
        parts.append(
            f"{board.score_label}{direction}: mean over the tasks a row has of each task's mean "
            f"over its scoring columns' {table.stat}s, with the number of tasks it covers "
            f"of the {table.n_scorable} on this board"
            + ("; ± its 95% interval from the tasks' seeds." if shown else ".")
        )
    elif board.aggregate == "mean":
        parts.append(
            f"{board.score_label}{direction}: mean of the {table.stat}s of the scoring columns "
            f"a row has ({', '.join(scoring)}), with the number it covers"
            + ("; ± its 95% interval." if shown else ".")
        )
    if partial(table):
        parts.append(f"A score over fewer than the {table.n_scorable} {_scored_what(table)} is "
                     f"partial: the mean over those a row has, not "
                     f"{board.aggregate_description or 'the board aggregate'} (which takes "
                     "every one), and comparable only with a score over the same ones.")
    parts.append("★ the column's best row; ≈ not significantly different from it (Welch's "
                 "t-test over seeds, 5%); no mark for a row not above the baseline rows and the "
                 "best constant answer on the evaluation set by more than its interval; plmbench "
                 "significance tests a pair of rows over examples and seeds.")
    if board.reference:
        parts.append(f"% of {board.reference}: a row's {board.score_label} and parameter count "
                     f"as percentages of the {board.reference} row's.")
    if any(row.baseline for row in table.rows):
        parts.append(f"{BASELINE_MARK.strip()} Baseline: computed from the data alone, no training "
                     "(majority class; mean prediction for regression, whose correlations are 0).")
    said = protocol_note((p for row in table.rows for p in row.protocols),
                         PROTOCOL_COLUMN in table.text_columns)
    if said:
        parts.append(said)
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


def _settings_markdown(table: Table) -> list[str]:
    """The settings each row's short name abbreviates: all that differ from the other rows of
    its model, one row a line."""
    lines = [f"- {row.label}: {point_text(row.point)}" for row in table.rows if row.point]
    return ["### Row settings (what differs between rows of one model)", "", *lines,
            ""] if lines else []


def _unused_markdown(table: Table) -> list[str]:
    """The records the board could not use, apart from the table: path and why, one a line."""
    if not table.unused:
        return []
    lines = [f"### Records not used ({len(table.unused)})", ""]
    lines += [f"- {unused.source}: {unused.why}" for unused in table.unused]
    return [*lines, ""]



def reference_cells(reference, table: Table) -> list[str]:
    """A published row under the board's columns: a figure where the source names the column's
    metric, "x?" in a task's first column where it does not say which."""
    first_of_task: dict[str, str] = {}
    for column in table.columns:
        first_of_task.setdefault(column.task, column.label)
    cells = []
    for column in table.columns:
        base = column.label.split(" [")[0]
        # a figure keyed by the column's label, or by "<label> [<task>]" for a label tasks share
        # (SQuAD v1.1's and v2.0's F1): never under another task's column of the same label
        key = next((k for k in (column.label, f"{base} [{column.task}]")
                    if k in reference.values), None)
        if column.value == "encoder_parameters" and reference.parameters:
            cells.append(column.show(reference.parameters))
        elif key is not None:
            cells.append(f"{reference.values[key]:.1f}")
        elif first_of_task[column.task] == column.label and column.task in reference.unstated:
            cells.append(f"{reference.unstated[column.task]:.1f}?")
        else:
            cells.append(MISSING)
    return cells


def _aligned(header: list[str], body: list[list[str]]) -> list[str]:
    """Markdown lines: the first column left-aligned, numbers right-aligned."""
    header = [text.replace("|", "\\|") for text in header]
    body = [[text.replace("|", "\\|") for text in line] for line in body]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) for c, w in zip(cells, widths, strict=True)]
        padded[0] = cells[0].ljust(widths[0])
        return "| " + " | ".join(padded) + " |"

    # a rule cell spans its text plus two spaces
    rule = "|".join([":" + "-" * (widths[0] + 1)] + ["-" * (w + 1) + ":" for w in widths[1:]])
    return [line(header), f"|{rule}|", *(line(cells) for cells in body)]


#: the heading of the published rows, and the mark of a test-set figure presented as dev
REFERENCES_TITLE = "Published results (not measured here, not ranked)"
MISPLACED_MARK = "‼"
REFERENCE_HEADER = ["Model", "protocol", "split", "published score"]


def reference_name(reference) -> str:
    """A published row's name: its label and the reference mark."""
    return f"{reference.label} {REFERENCE_MARK}"


def split_text(reference) -> str:
    """The split a published row's figures are of: "dev", or "test, as dev ‼" for test-set
    figures its source presents as dev ones."""
    if reference.misplaced:
        return f"{reference.split}, as {reference.presented_as} {MISPLACED_MARK}"
    return reference.split


def reference_head(reference) -> list[str]:
    """A published row's cells under ``REFERENCE_HEADER``: name, protocol, split, score."""
    return [reference_name(reference), reference.protocol, split_text(reference),
            "" if reference.score is None else f"{reference.score:.1f}"]


def references_legend(table: Table) -> list[str]:
    """What the published table's marks mean, one sentence each."""
    lines = ["x? : the source gives one figure for the task without saying which metric."]
    if any(r.misplaced for r in table.references):
        shown_as = sorted({r.presented_as for r in table.references if r.misplaced})
        lines.append(f"{MISPLACED_MARK} : test-set figures the source presents as "
                     f"{'/'.join(shown_as)} figures: not comparable with the measured rows' dev "
                     "figures.")
    lines.append("protocol: how the source fine-tuned (conf/protocol/; unstated where it does not "
                 "say); a measured row of another protocol is no replication of it.")
    return lines


def _references_markdown(table: Table) -> list[str]:
    if not table.references or not table.columns:
        return []
    body = [[*reference_head(r), *reference_cells(r, table)] for r in table.references]
    lines = [f"### {REFERENCES_TITLE}", "",
             *_aligned([*REFERENCE_HEADER, *table.labels], body), ""]
    for r in table.references:
        what = f"; score: {r.score_definition}" if r.score_definition else ""
        notes = f" {r.notes}" if r.notes else ""
        lines.append(f"- {reference_name(r)}: {r.source}{what}.{notes}")
    lines += ["", *references_legend(table)]
    return [*lines, ""]


def render_markdown(table: Table, results_dir: str | Path | None = None) -> str:
    """The table as GitHub-flavoured Markdown: a title, aligned columns and a footnote."""
    board = table.board
    if not table.rows:
        where = f"under {results_dir}" if results_dir is not None else "in the given records"
        after = _failures_markdown(table) + _unused_markdown(table)
        return "\n".join([f"No finished runs of board {board.name!r} {where}.",
                          *([""] if after else []), *after]).rstrip("\n") + "\n"
    plural = "s" if table.n_records != 1 else ""
    return "\n".join([
        f"## {heading(table)}: board {board.name!r} ({table.n_records} record{plural} used)",
        "",
        *_aligned(header_cells(table), [row_cells(row, table) for row in table.rows]),
        "",
        footnote(table),
        "",
        *(f"Note: {note}\n" for note in table.notes),
        *_settings_markdown(table),
        *_references_markdown(table),
        *_selected_markdown(table),
        *_failures_markdown(table),
        *_unused_markdown(table),
    ]).rstrip("\n") + "\n"


def _interval(cell, column: Column) -> tuple[float, float] | None:
    interval = column.interval(cell)
    return None if interval is None else (column.scale * interval[0], column.scale * interval[1])


def render_csv(table: Table) -> str:
    """The table as CSV: score, its interval and coverage, the text columns, per column mean,
    std, median, n and 95% interval (scaled), each row's marks.

    Numbers are Python's shortest round-tripping float text, so the CSV loses nothing.
    """
    board = table.board
    stats = ("mean", "std", "median", "n", "ci_low", "ci_high")
    score_header = {
        "task_macro": ["score", "score_ci_low", "score_ci_high", "n_tasks"],
        "mean": ["score", "score_ci_low", "score_ci_high", "n_columns"], "none": []
    }[board.aggregate]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    shares = ["share", "parameter_share"] if board.reference else []
    selected = ["selected"] if any(row.selected for row in table.rows) else []
    points = ["settings"] if any(row.point for row in table.rows) else []
    writer.writerow(
        ["model", *points, "protocol_hash", *selected, *table.text_columns, *score_header,
         *shares]
        + [f"{label} {stat}" for label in table.labels for stat in stats] + ["marks"]
    )

    def number(x: float | None) -> str:
        return "" if x is None else repr(float(x))

    for row in table.rows:
        fields = [row_label(row), *([point_text(row.point)] if points else []),
                  row.protocol_hash, *([_selected_text(row)] if selected else []),
                  *(row.texts.get(t, "") for t in table.text_columns)]
        if score_header:
            interval = row.score_interval() or (None, None)
            fields += (["", "", "", ""] if row.score is None else
                       [number(row.score), *map(number, interval), row.n_scored])
        fields += ["" if share is None else repr(share) for share in
                   (row.share, row.parameter_share)][:len(shares)]
        for column in table.columns:
            cell = row.cells.get(column.label)
            if cell is None:
                fields += [""] * len(stats)
                continue
            interval = _interval(cell, column) or (None, None)
            scaled = [repr(column.scale * x) for x in (cell.mean, cell.std, cell.median)]
            fields += [*scaled, cell.n, *map(number, interval)]
        fields.append(";".join(f"{label or 'score'}:{mark}"
                               for label, mark in sorted(row.marks.items())))
        writer.writerow(fields)
    return out.getvalue()


def _cell_json(column: Column, row: Row) -> dict | None:
    cell = row.cells.get(column.label)
    if cell is None:
        return None
    interval = _interval(cell, column)
    return {"mean": column.scale * cell.mean, "std": column.scale * cell.std,
            "median": column.scale * cell.median, "n": cell.n,
            "ci": None if interval is None else list(interval),
            "values": [column.scale * v for v in cell.values],
            "mark": row.marks.get(column.label)}


def _protocols_json(table: Table) -> dict:
    """``{"protocols": {name: description}}`` of the rows' protocols; {} where none is named."""
    names = sorted({p for row in table.rows for p in row.protocols})
    return {"protocols": {name: describe_protocol(name) for name in names}} if names else {}


def table_json(table: Table) -> dict:
    """The table as plain data: board, columns, rows (cells scaled, per seed too), failures,
    and the published reference rows when asked for."""
    board = table.board
    return {
        "board": {"name": board.name, "title": board.title, "aggregate": board.aggregate,
                  "aggregate_name": board.aggregate_name,
                  "aggregate_description": board.aggregate_description,
                  "score_label": board.score_label, "n_scorable": table.n_scorable,
                  "reference": board.reference or None,
                  "stat": table.stat, "level": 0.95},
        "n_records": table.n_records,
        "section": table.section or None,
        "notes": table.notes,
        "text_columns": table.text_columns,
        "columns": [{"label": c.label, "task": c.task, "value": c.value, "scale": c.scale,
                     "higher_is_better": c.higher_is_better, "score": c.score,
                     "format": c.format, "varies": c.varies} for c in table.columns],
        "rows": [{"label": row.label, "full_name": row.full_name, "settings": row.point,
                  "protocol_hash": row.protocol_hash, "score": row.score,
                  "score_ci": (list(i) if (i := row.score_interval()) else None),
                  "score_mark": row.marks.get(SCORE),
                  "n_scored": row.n_scored, "baseline": row.baseline,
                  "parameters": row.parameters, "compute": row.compute,
                  "share": row.share, "parameter_share": row.parameter_share,
                  "selected": row.selected, "texts": row.texts,
                  "cells": {c.label: _cell_json(c, row) for c in table.columns}}
                 for row in table.rows],
        "references": [{"label": r.label, "source": r.source, "score": r.score,
                        "score_definition": r.score_definition, "parameters": r.parameters,
                        "values": r.values, "unstated": r.unstated, "notes": r.notes,
                        "protocol": r.protocol, "split": r.split,
                        "presented_as": r.presented_as or None}
                       for r in table.references],
        **_protocols_json(table),
        "failures": [{"task": f.task, "label": f.label, "seed": f.seed, "run_dir": f.run_dir,
                      "error": f.error} for f in table.failures],
        "unused": [{"source": u.source, "why": u.why} for u in table.unused],
    }


def render_json(table: Table) -> str:
    """``table_json`` as sorted, indented JSON text."""
    return strict_json.dumps(table_json(table), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
