"""Leaderboards: a pure function of run records (DESIGN.md contract 8); nothing is re-run.

A board (``bench/boards/config.py``: ``conf/board/<name>.yaml``) says which columns a record
shows and how they are scaled and scored; this module turns records into its table.

Records of one board are grouped into rows by (label, protocol_hash), or by label alone with
``rows: label`` (a study's fine-tuning, adaptation and evaluation runs of one model differ in
protocol but are one row); a cell aggregates the records of one row on one column, the seeds of
a run or the runs a board column spans: mean, sample std (0 for one value), median, n and the
95% t-interval of the mean (``bench/boards/stats.py``). A row's score follows the board's aggregate
(``aggregate.method``): ``task_macro`` is GLUE's official aggregate (Wang et al. 2019,
evaluation paragraph): a task with several scoring columns scores their unweighted mean, and the
board score is the macro-average of the task scores, taken over the tasks a row has and reported
with their count, so a partial sweep still gets a number; ``mean`` is the plain mean of the
scoring columns a row has (those the aggregate names: BERT's Table 1 average); ``none`` gives no
score. The score's interval combines its tasks' seed variances (Welch-Satterthwaite).

Every column's best row is marked, and so is every row whose cell Welch's t-test over seeds
cannot tell from the best one at the 5% level (``marks``): differences a reader should not
read as a ranking. The paired bootstrap over examples (``plmbench significance``) tests a pair of
rows more sharply.

Failed runs of a board are listed apart from its rows, each with its error line, and so are the
records it could not use (unreadable, or a value that is no number: ``Unused``), each with its
path and why: no record is dropped in silence, and none can stop a board. Rows computed
from the data alone (``bench/run/baselines.py``, a record with ``baseline: true``) are marked as
such. The same records give the same bytes in every format (sorted rows, fixed float text).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace

from bench.boards.cells import Cell
from bench.boards.config import Board, Column, get_board, task_columns
from bench.boards.constant import constant_floors, constant_score
from bench.boards.points import resolved, row_names, row_points, settings
from bench.boards.rows import Row
from bench.boards.score import mark_rows, score, score_bounds
from bench.record import Part, Record, as_records
from bench.records import Unused
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom

MISSING = "–"
#: the statistic over seeds that fills a cell and makes the score: the mean (with the sample std),
#: or the median (with the range), which cramming (Geiping & Goldstein 2022, §4) reports for GLUE
STATS = ("mean", "median")


def lookup_text(record: Record, path: str) -> str | None:
    """The record's value at a dotted ``path`` as text; None when absent or not a scalar."""
    value = record.at(path)
    return None if value is None or isinstance(value, Mapping | list | tuple | Part) \
        else str(value)


def first_at(record: Record, column: Column) -> object:
    """The record's value at the first of the column's paths it has (``Column.paths``)."""
    return next((value for path in column.paths if (value := record.at(path)) is not None),
                None)


def number(value: object) -> float | None:
    """``value`` as a finite float; None when it is no number (absent, text, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def lookup(record: Record, path: str) -> float | None:
    """The record's value at a dotted ``path`` as a finite float; None when absent or no number."""
    return number(record.at(path))


@dataclass(frozen=True)
class Failure:
    """A failed run of the board that no finished run of the same point has replaced."""

    label: str
    task: str
    seed: object
    run_dir: str
    error: str


@dataclass
class Table:
    """A rendered-to-be leaderboard; ``n_records`` counts the records that gave a value."""

    board: Board
    columns: list[Column] = field(default_factory=list)  # those with a value, in board order
    rows: list[Row] = field(default_factory=list)
    n_records: int = 0
    n_scorable: int = 0  # the "N" of "(k/N tasks)": tasks (or columns) a score can cover
    failures: list[Failure] = field(default_factory=list)
    stat: str = "mean"  # the statistic over seeds in cells and score, one of STATS
    text_columns: list[str] = field(default_factory=list)  # ``text: column`` labels, in order
    #: published rows shown apart (``bench/boards/references.py``), when asked for
    references: list = field(default_factory=list)
    unused: list[Unused] = field(default_factory=list)  # records it could not use, and why
    #: which of a board's evaluation sets this table is ("" for a board of one: the usual case)
    #: and what a reader must know about its rows (bench/boards/sections.py)
    section: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return [column.label for column in self.columns]

    @property
    def score_higher_is_better(self) -> bool:
        directions = {c.higher_is_better for c in self.columns if c.score}
        return directions != {False}


def _row_label(record: Record, board: Board) -> str:
    """The record's label, followed by the values of its task's text columns:
    "minilm-l6 (dense, HNSW32)"."""
    label = str(record.label or record.model or "?")
    try:
        columns = _record_columns(record, board)
    except (PlmbenchError, TypeError, ValueError, AttributeError):
        columns = []  # build_table lists the record as unused, with the reason
    texts = [text for column in columns if column.in_label
             and (text := lookup_text(record, column.value)) is not None]
    return f"{label} ({', '.join(texts)})" if texts else label


def _select(records: Iterable[Record], board: Board, status: str = "ok") -> dict[tuple, Record]:
    """Records of the board with ``status``, one per (label, protocol, task, seed): the latest."""
    chosen: dict[tuple, Record] = {}
    for record in records:
        if record.status != status or not board.holds(record):
            continue
        if not isinstance(record.task, str):  # read_records lists such files as unused
            continue
        label = _row_label(record, board)
        seed = record.seed if record.has("seed") else record.run_id
        protocol = record.protocol_hash if record.has("protocol_hash") else ""
        key = (label, protocol, record.task, seed)
        # A re-run of the same seed replaces, not adds to, the earlier result.
        if key not in chosen or (record.finished_at or "") >= (chosen[key].finished_at or ""):
            chosen[key] = record
    return chosen


def _failures(records: list[Record], board: Board, finished: dict[tuple, Record]):
    """The board's failed points that no ok record replaced, sorted by task, label, seed."""
    failed = _select(records, board, status="failed")
    return sorted(
        (Failure(key[0], key[2], key[3], str(record.run_dir or ""),
                 str(record.error or "unknown error"))
         for key, record in failed.items() if key not in finished),
        key=lambda f: (board.task_rank(f.task), f.label, repr(f.seed), f.run_dir),
    )


def _pretraining_flops(record: Record) -> float | None:
    """The training FLOPs behind a record's model: its own for a run from scratch; for a run from
    a ``ckpt:`` checkpoint the cost its record carries (``pretraining``: summed along the chain
    of checkpoints), or for an older record without it, the chain's first run's; None for a
    checkpoint of unknown cost."""
    from bench.records import read_record

    try:
        start = InitFrom.parse(record.init_from)
    except PlmbenchError:  # no or no known init_from: a checkpoint of unknown cost
        return None
    if start.scratch:
        return lookup(record, "throughput.train_flops")
    if record.pretraining is not None:
        return record.pretraining.flops
    source = read_record(start.run_dir()) if start.kind == "ckpt" else None
    return _pretraining_flops(Record.from_json(source)) if source else None


def _record_columns(record: Record, board: Board) -> list[Column]:
    """The board's columns whose pattern matches the record's task, else the columns the record's
    own task config asks for (none without a task config) followed by the matching board
    columns that add to them; a record of one of the board's ``finetune_columns`` methods
    shows them as columns of its own, "<label> (<method>)", scoring nothing."""
    columns = _task_and_board_columns(record, board)
    method = (record.config.get("finetune") or {}).get("name")
    if method in board.finetune_columns:
        return [replace(c, label=f"{c.label} ({method})", score=False) for c in columns]
    return columns


def _task_and_board_columns(record: Record, board: Board) -> list[Column]:
    own = [c for c in board.columns if fnmatch.fnmatchcase(record.task, c.task)]
    if any(not c.adds for c in own):
        return own
    task = record.config.get("task")
    if not isinstance(task, Mapping):
        return own
    where = f"record {record.run_dir or record.run_id or record.task}"
    columns = task_columns(task, board, where)
    # the record's task is what its columns belong to, whatever config.task.name says
    return [replace(column, task=record.task) for column in columns] + own


def _board_columns(by_task: dict[str, list[tuple[Record, list[Column]]]], board: Board):
    """Every (task, label) column in board order; a column's looks from its newest record."""
    ordered = []
    for task in sorted(by_task, key=board.task_rank):
        newest_first = sorted(
            by_task[task],
            key=lambda pair: (
                pair[0].finished_at or "",
                json.dumps([asdict(c) for c in pair[1]], sort_keys=True),
            ),
            reverse=True,
        )
        seen: dict[str, Column] = {}
        for _, columns in newest_first:
            for column in columns:
                seen.setdefault(column.label, column)
        ordered += seen.values()
    return ordered


def _unique_labels(columns: list[Column]) -> list[Column]:
    """Columns whose label another task's column shares get " [task]" appended."""
    tasks_of = defaultdict(set)
    for column in columns:
        tasks_of[column.label].add(column.task)
    return [
        replace(column, label=f"{column.label} [{column.task}]")
        if len(tasks_of[column.label]) > 1 else column
        for column in columns
    ]


def _record_values(record: Record, board: Board) -> tuple[list[Column], list[tuple]]:
    """(the record's columns, (column, value) for those it has a value of); PlmbenchError when a
    value is there but no finite number (a metric written as a string, NaN); text columns
    (``text: true``) are read apart."""
    columns = [c for c in _record_columns(record, board) if not c.in_label]
    found = []
    for column in (c for c in columns if not c.is_text):
        raw = first_at(record, column)
        value = number(raw)
        if value is None and raw is not None:
            raise PlmbenchError(f"{column.value} is {raw!r}, not a finite number")
        if value is not None:
            found.append((column, value))
    return columns, found


def build_table(records: Iterable[Record | Mapping], board: Board | str, stat: str = "mean",
                unused: Iterable[Unused] = ()) -> Table:
    """Aggregate the board's ok records into rows sorted by score (best first), then label;
    ``stat`` (one of STATS) is the statistic over seeds that cells show and scores average.
    ``unused``: records already found unusable (``bench.records.read_records``), listed with
    those of the board whose values cannot be read."""
    board = get_board(board) if isinstance(board, str) else board
    if stat not in STATS:
        raise PlmbenchError(f"unknown statistic {stat!r}; use one of {', '.join(STATS)}")
    records, unused = as_records(records), list(unused)
    finished = _select(records, board)
    selected = sorted(finished.items(), key=lambda item: repr(item[0]))
    extras: dict[tuple[str, str], dict] = defaultdict(dict)  # per row: baseline, size, compute
    by_task: dict[str, list[tuple[Record, list[Column]]]] = defaultdict(list)
    values: dict[tuple[str, str], dict[tuple[str, str], list[tuple[str, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    n_records = 0
    protocols: dict[tuple[str, str], set[str]] = defaultdict(set)  # the protocols of each row
    settings_of: dict[tuple[str, str], dict[str, str]] = {}  # per row (board_points)
    configs_of: dict[tuple[str, str], Mapping] = {}  # per row, a record's resolved config
    texts: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    text_labels: dict[str, None] = {}
    for (label, record_protocol, task, seed), record in selected:
        try:
            columns, found = _record_values(record, board)
            flops = _pretraining_flops(record)
        except (PlmbenchError, TypeError, ValueError, AttributeError, RecursionError) as err:
            unused.append(Unused(record.source, str(err)))
            continue
        if not found:
            continue
        protocol = record_protocol
        if board.rows == "label":
            protocols[label, ""].add(protocol)
            protocol = ""
        for column in {c.task for c in columns}:
            by_task[column].append((record, [c for c in columns if c.task == column]))
        seed_key = repr((record_protocol, seed))  # a seed's runs, matched across columns
        for column, value in found:
            values[label, protocol][column.task, column.label].append((seed_key, value))
        for column in columns:
            if column.is_text and (text := lookup_text(record, column.value)) is not None:
                texts[label, protocol][column.label].add(text)
                text_labels.setdefault(column.label)
        n_records += not record.baseline  # runs used; a baseline is no run
        settings_of.setdefault((label, protocol), settings(record))
        configs_of.setdefault((label, protocol), record.config)
        row = extras[label, protocol]
        row.setdefault("records", defaultdict(list))[task].append(record)
        row["baseline"] = record.baseline
        if record.selected is not None:  # bench.boards.selection's chosen point
            row.setdefault("selected", {})[record.task] = dict(record.selected)
        size = record.trained_parameters if board.size == "trained_parameters" else (
            record.encoder_parameters or record.parameters)  # without a task head
        for key, value in (("parameters", size),
                           ("compute", flops)):
            if isinstance(value, int | float):
                row[key] = max(value, row.get(key, value))

    columns = [
        c for c in _board_columns(by_task, board)
        if not c.is_text and any((c.task, c.label) in row for row in values.values())
    ]
    if board.score_columns:  # the aggregate averages the columns it names, and only those
        columns = [replace(c, score=c.label in board.score_columns) for c in columns]
    shown = _unique_labels(columns)
    if board.aggregate != "none":
        directions = {c.higher_is_better for c in shown if c.score}
        if len(directions) > 1:
            ups = [c.label for c in shown if c.score and c.higher_is_better]
            downs = [c.label for c in shown if c.score and not c.higher_is_better]
            raise PlmbenchError(
                f"board {board.name!r} averages columns where higher is better ({', '.join(ups)}) "
                f"with columns where lower is better ({', '.join(downs)}); "
                "set score: false on one kind"
            )
    scoring = [c for c in shown if c.score]
    if board.aggregate == "task_macro":
        n_scorable = len(set(board.task_order) | {c.task for c in scoring})
    else:
        n_scorable = len(scoring) if board.aggregate == "mean" else 0

    resolved(settings_of, configs_of)
    names = row_names(list(values), settings_of)
    points = row_points(list(values), settings_of)
    rows = []
    for key, by_column in values.items():
        label, protocol = key
        extra = extras[key]
        cells = {
            new.label: Cell.of(by_column[old.task, old.label])
            for old, new in zip(columns, shown, strict=True)
            if (old.task, old.label) in by_column
        }
        name = names[key]
        if board.rows == "label":  # a row of several protocols: a hash of them all
            joined = ",".join(sorted(protocols[key]))
            protocol = hashlib.sha256(joined.encode()).hexdigest()[:16]
        value, covered, estimate = score(cells, shown, board, stat)
        shown_texts = {text: " / ".join(sorted(found))
                       for text, found in texts[key].items()}
        rows.append(Row(name, protocol, cells, value, covered, score_estimate=estimate,
                        texts=shown_texts, record_label=label,
                        settings=settings_of.get(key, {}), point=points[key],
                        score_bounds=score_bounds(cells, shown, board),
                        **{k: dict(v) if k == "records" else v for k, v in extra.items()}))
    table = Table(board, shown, [], n_records, n_scorable, _failures(records, board, finished),
                  stat, list(text_labels), unused=sorted(unused, key=lambda u: (u.source, u.why)))
    sign = -1 if table.score_higher_is_better else 1
    rows.sort(key=lambda row: (
        row.score is None, 0.0 if row.score is None else sign * row.score,
        row.label, row.protocol_hash,
    ))
    table.rows = _with_shares(rows, board)
    floors = constant_floors(table.rows, shown)
    mark_rows(table.rows, shown, table.score_higher_is_better, floors,
              [constant_score(row, shown, board, floors) for row in table.rows])
    return table


def _with_shares(rows: list[Row], board: Board) -> list[Row]:
    """The rows, each with its score and parameters as shares of the board's reference row's
    (none where either is missing, or the board names no reference or the row is absent)."""
    reference = next((row for row in rows if row.label == board.reference), None)
    if reference is None:
        return rows

    def share(mine: float | None, theirs: float | None) -> float | None:
        return None if mine is None or not theirs else mine / theirs

    return [replace(row, share=share(row.score, reference.score),
                    parameter_share=share(row.parameters, reference.parameters)) for row in rows]
