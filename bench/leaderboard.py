"""Leaderboards: a pure function of run records (DESIGN.md contract 8); nothing is re-run.

Records of one board are grouped into rows by (label, protocol_hash); a cell aggregates the
seeds of one row on one task column: mean ± sample std (0 for one seed), median and n. The
row's score is GLUE's official aggregate (Wang et al. 2019, "GLUE: A Multi-Task Benchmark and
Analysis Platform for Natural Language Understanding", evaluation paragraph): a task with
several metrics (MRPC, STS-B, QQP; MNLI's two splits) scores the unweighted mean of those
metrics, and the benchmark score is the macro-average of the task scores. Here it is taken over
the tasks a row has, and reported with their count, so a partial sweep still gets a number.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from datamodules.errors import PlmbenchError

MISSING = "–"


@dataclass(frozen=True)
class Board:
    """A benchmark: task name -> its columns as (column label, split, metric)."""

    name: str
    tasks: dict[str, list[tuple[str, str, str]]]
    score_label: str = "Score"

    @property
    def columns(self) -> list[tuple[str, str, str, str]]:
        """Every column as (task, column label, split, metric), in board order."""
        return [(task, *column) for task, columns in self.tasks.items() for column in columns]


GLUE = Board(
    "glue",
    {  # column order = the GLUE paper's task order
        "glue/cola": [("CoLA (MCC)", "validation", "matthews")],
        "glue/sst2": [("SST-2 (acc)", "validation", "accuracy")],
        "glue/mrpc": [("MRPC (F1)", "validation", "f1"), ("MRPC (acc)", "validation", "accuracy")],
        "glue/stsb": [
            ("STS-B (P)", "validation", "pearson"),
            ("STS-B (S)", "validation", "spearman"),
        ],
        "glue/qqp": [("QQP (F1)", "validation", "f1"), ("QQP (acc)", "validation", "accuracy")],
        "glue/mnli": [
            ("MNLI-m", "validation_matched", "accuracy"),
            ("MNLI-mm", "validation_mismatched", "accuracy"),
        ],
        "glue/qnli": [("QNLI (acc)", "validation", "accuracy")],
        "glue/rte": [("RTE (acc)", "validation", "accuracy")],
        "glue/wnli": [("WNLI (acc)", "validation", "accuracy")],
    },
    score_label="GLUE score",
)
BOARDS = {"glue": GLUE}


def get_board(name: str) -> Board:
    """The board called ``name``; PlmbenchError listing the known boards otherwise."""
    if name not in BOARDS:
        raise PlmbenchError(f"unknown board {name!r}; known boards: {', '.join(sorted(BOARDS))}")
    return BOARDS[name]


@dataclass(frozen=True)
class Cell:
    """One (row, column): a metric over seeds, on the 0..1 scale the records use."""

    mean: float
    std: float  # sample standard deviation, 0 for a single seed
    median: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Cell:
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(statistics.mean(values), std, statistics.median(values), len(values))

    def __str__(self) -> str:  # ×100, one decimal: the GLUE convention
        return f"{100 * self.mean:.1f} ± {100 * self.std:.1f} (n={self.n})"


@dataclass
class Row:
    """One model under one protocol; ``cells`` maps column labels to their aggregates."""

    label: str
    protocol_hash: str
    cells: dict[str, Cell]
    score: float  # macro-average over ``n_tasks`` task scores, 0..1
    n_tasks: int


@dataclass
class Table:
    """A rendered-to-be leaderboard; ``n_records`` counts the records that gave a value."""

    board: Board
    rows: list[Row] = field(default_factory=list)
    n_records: int = 0

    @property
    def columns(self) -> list[str]:
        """Column labels that hold a value in at least one row, in board order."""
        return [c[1] for c in self.board.columns if any(c[1] in row.cells for row in self.rows)]


def _metric(record: Mapping, split: str, metric: str) -> float | None:
    """metrics[split][metric] as a finite float, None when absent or not a number."""
    by_split = record.get("metrics")
    by_metric = by_split.get(split) if isinstance(by_split, Mapping) else None
    value = by_metric.get(metric) if isinstance(by_metric, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _select(records: Iterable[Mapping], board: Board) -> dict[tuple, Mapping]:
    """ok records of the board, one per (label, protocol, task, seed): the latest finished."""
    chosen: dict[tuple, Mapping] = {}
    for record in records:
        if record.get("status") != "ok" or record.get("board") != board.name:
            continue
        if record.get("task") not in board.tasks:
            continue
        label = record.get("label") or record.get("model") or "?"
        seed = record.get("seed", record.get("run_id"))
        key = (label, record.get("protocol_hash", ""), record["task"], seed)
        # A re-run of the same seed replaces, not adds to, the earlier result.
        if key not in chosen or (record.get("finished_at") or "") >= (
            chosen[key].get("finished_at") or ""
        ):
            chosen[key] = record
    return chosen


def _score(cells: dict[str, Cell], board: Board) -> tuple[float, int]:
    """(macro-average of task scores, number of tasks): a task scores its metrics' mean."""
    task_scores = []
    for columns in board.tasks.values():
        means = [cells[label].mean for label, _, _ in columns if label in cells]
        if means:
            task_scores.append(statistics.mean(means))
    return statistics.mean(task_scores), len(task_scores)


def build_table(records: Iterable[Mapping], board: Board | str) -> Table:
    """Aggregate the board's ok records into rows sorted by score, best first."""
    board = get_board(board) if isinstance(board, str) else board
    values: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    n_records = 0
    for (label, protocol, task, _seed), record in _select(records, board).items():
        found = [
            (column, value)
            for column, split, metric in board.tasks[task]
            if (value := _metric(record, split, metric)) is not None
        ]
        for column, value in found:
            values[label, protocol][column].append(value)
        n_records += bool(found)

    protocols_per_label = defaultdict(set)
    for label, protocol in values:
        protocols_per_label[label].add(protocol)
    rows = []
    for (label, protocol), by_column in values.items():
        cells = {column: Cell.of(sorted(seeds)) for column, seeds in by_column.items()}
        shown = label if len(protocols_per_label[label]) == 1 else f"{label} [{protocol[:6]}]"
        rows.append(Row(shown, protocol, cells, *_score(cells, board)))
    rows.sort(key=lambda row: (-row.score, row.label, row.protocol_hash))
    return Table(board, rows, n_records)


def _score_text(row: Row, board: Board) -> str:
    return f"{100 * row.score:.1f} ({row.n_tasks}/{len(board.tasks)} tasks)"


def render_markdown(table: Table, results_dir: str | Path | None = None) -> str:
    """The table as GitHub-flavoured Markdown: a title, aligned columns and a footnote."""
    board = table.board
    if not table.rows:
        where = f"under {results_dir}" if results_dir is not None else "in the given records"
        return f"No finished runs of board {board.name!r} {where}.\n"
    header = ["Model", board.score_label, *table.columns]
    body = [
        [row.label.replace("|", "\\|"), _score_text(row, board)]
        + [str(row.cells[c]) if c in row.cells else MISSING for c in table.columns]
        for row in table.rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) for c, w in zip(cells, widths, strict=True)]
        padded[0] = cells[0].ljust(widths[0])
        return "| " + " | ".join(padded) + " |"

    # Model left-aligned, numbers right-aligned; a rule cell spans its text plus two spaces.
    rule = "|".join([":" + "-" * (widths[0] + 1)] + ["-" * (w + 1) + ":" for w in widths[1:]])
    plural = "s" if table.n_records != 1 else ""
    return "\n".join([
        f"## Leaderboard {board.name!r} ({table.n_records} record{plural} used)",
        "",
        line(header),
        f"|{rule}|",
        *(line(cells) for cells in body),
        "",
        "Cells: mean ± std over seeds (n), ×100, sample std (0 for one seed). "
        f"{board.score_label}: mean over the tasks present of each task's metric mean "
        f"(Wang et al. 2019), with the number of tasks it covers.",
        "",
    ])


def render_csv(table: Table) -> str:
    """The table as CSV: score, task count and per column mean, std, median, n (×100)."""
    stats = ("mean", "std", "median", "n")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["model", "protocol_hash", "score", "n_tasks"]
        + [f"{column} {stat}" for column in table.columns for stat in stats]
    )
    for row in table.rows:
        fields = [row.label, row.protocol_hash, f"{100 * row.score:.4f}", row.n_tasks]
        for column in table.columns:
            cell = row.cells.get(column)
            if cell is None:
                fields += [""] * len(stats)
            else:
                scaled = [f"{100 * x:.4f}" for x in (cell.mean, cell.std, cell.median)]
                fields += [*scaled, cell.n]
        writer.writerow(fields)
    return out.getvalue()
