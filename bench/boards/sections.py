"""A board over runs scored on different examples: one table per evaluation set, never one.

``bench/eval_sets.py`` names what each run was scored on; where a board's runs of a task were
scored on different sets (``task.max_eval_samples`` 16 and 128, data changed between runs),
``build_tables`` makes one table per section of rows that agree on every task, each with a
note saying which examples it holds, so no row is ranked, starred or given a baseline against
rows scored on other examples. A baseline (``bench/boards/baselines.py``) joins the tables whose
runs were scored on the labels it was computed from; one that matches no run's labels (the data
changed since the runs) is left out, and the table says so. One evaluation set (the usual case)
gives one table, as ``bench.boards.table.build_table`` alone would, less such a baseline.

Rendered, the tables follow one another (Markdown, HTML), or are one CSV with an
``evaluation_set`` column, or a JSON object with a ``sections`` list.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping

from bench.boards.config import Board, get_board
from bench.boards.selection import protocol_selection
from bench.boards.table import Table, _row_label, build_table
from bench.boards.text import render_csv, render_json, render_markdown, table_json
from bench.eval_sets import Section, eval_set, place, sections
from bench.record import Record
from bench.records import Unused

SPLIT_NOTE = ("The runs of this board were scored on {n} different evaluation sets: each set is "
              "a table of its own, with its own baseline, and no row is ranked against a row of "
              "another.")


def _row_of(board: Board):
    def row_of(record: Record) -> tuple[str, str]:
        protocol = record.protocol_hash if record.has("protocol_hash") else ""
        return _row_label(record, board), str(protocol if board.rows == "protocol" else "")
    return row_of


def _is_run(record: Record) -> bool:
    return record.status == "ok" and not record.baseline


def _baseline_notes(baseline: Record, found: list[Section]) -> list[tuple[Section, str]]:
    """(section, note) for each section of the baseline's task that it does not match."""
    task, own = baseline.task, eval_set(baseline)
    return [(s, f"No {baseline.label} row for {task}: the gold labels it is computed "
                f"from as the data reads now ({own.gold[:8] if own.gold else 'unknown'}) are "
                f"not those the runs were scored on ({s.evals[task].gold[:8]}, from their "
                "predictions files): the data changed since the runs; re-run them, or restore "
                "the data they read.")
            for s in found if task in s.evals and s.evals[task].config == own.config
            and not s.evals[task].agrees(own)]


def _describe(found: list[Section]) -> list[str]:
    """Per section, the evaluation sets of the tasks on which sections differ."""
    tasks = sorted({t for s in found for t in s.evals
                    if len({s2.evals[t] for s2 in found if t in s2.evals}) > 1})
    return ["; ".join(f"{t}: {s.evals[t].describe()}" for t in tasks if t in s.evals)
            for s in found]


def build_tables(records: Iterable[Record | Mapping], board: Board | str, stat: str = "mean",
                 unused: Iterable[Unused] = ()) -> list[Table]:
    """The board's tables, one per evaluation set of its runs (module docstring)."""
    board = get_board(board) if isinstance(board, str) else board
    records, unused = protocol_selection(records, board), list(unused)
    mine = [r for r in records if board.holds(r)]
    found = sections(mine, _row_of(board), _is_run)
    if not found:
        return [build_table(records, board, stat, unused)]
    notes: dict[int, list[str]] = {id(s): [] for s in found}
    for record in (r for r in mine if not _is_run(r)):
        at = place(record, found)
        if record.baseline:
            for section in at:
                section.records.append(record)
            if not at:
                for section, note in _baseline_notes(record, found):
                    if note not in notes[id(section)]:
                        notes[id(section)].append(note)
        else:  # a failure: listed once, with the set it was meant for
            (at or found)[0].records.append(record)
    tables = []
    for i, (section, text) in enumerate(zip(found, _describe(found), strict=True)):
        table = build_table(section.records, board, stat, unused if i == 0 else ())
        if len(found) > 1:
            table.section = f"evaluation set {i + 1} of {len(found)}"
            table.notes.append(f"{SPLIT_NOTE.format(n=len(found))} This one: {text}.")
        table.notes += notes[id(section)]
        tables.append(table)
    return tables


def render_tables(tables: list[Table], fmt: str, results_dir: str | None = None) -> str:
    """The tables in ``fmt`` (md, csv, json, html); one table renders as it always has."""
    from bench.boards.html import render_html  # imports the plots: only for a page

    if fmt == "html":
        return render_html(tables)
    if len(tables) == 1:
        table = tables[0]
        return {"md": lambda: render_markdown(table, results_dir),
                "csv": lambda: render_csv(table), "json": lambda: render_json(table)}[fmt]()
    if fmt == "md":
        return "\n".join(render_markdown(table, results_dir) for table in tables)
    if fmt == "json":
        return json.dumps({"sections": [table_json(t) for t in tables]}, indent=2,
                          sort_keys=True, ensure_ascii=False) + "\n"
    return _joined_csv(tables)


def _joined_csv(tables: list[Table]) -> str:
    """One CSV of several tables: an ``evaluation_set`` column first, the union of the tables'
    headers in order of appearance, empty where a table has no such column."""
    parts = [list(csv.DictReader(io.StringIO(render_csv(t)))) for t in tables]
    header = ["evaluation_set"]
    for table in tables:
        header += [h for h in next(csv.reader(io.StringIO(render_csv(table)))) if h not in header]
    out = io.StringIO()
    writer = csv.DictWriter(out, header, restval="", lineterminator="\n")
    writer.writeheader()
    for i, rows in enumerate(parts, 1):
        for row in rows:
            writer.writerow({"evaluation_set": i, **row})
    return out.getvalue()
