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
from the data alone (``bench/boards/baselines.py``, a record with ``baseline: true``) are marked as
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
from bench.boards.protocols import PROTOCOL_COLUMN, named, row_text
from bench.boards.rows import Row
from bench.boards.score import mark_rows, score, score_bounds
from bench.record import Part, Record, Unused, as_records
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
    except PlmbenchError:
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


def _pretraining_flops(record: Record, seen: frozenset[str] = frozenset()) -> float | None:
    """The training FLOPs behind a record's model: its own for a run from scratch; for a run from
    a ``ckpt:`` checkpoint the cost its record carries (``pretraining``: summed along the chain
    of checkpoints), or for an older record without it, the chain's first run's; None for a
    checkpoint of unknown cost. A chain that returns to a run it passed (``seen``: the run
    directories so far) is a PlmbenchError naming the run."""
    from bench.record import read_record

    try:
        start = InitFrom.parse(record.init_from)
    except PlmbenchError:  # no or no known init_from: a checkpoint of unknown cost
        return None
    if start.scratch:
        return lookup(record, "throughput.train_flops")
    if record.pretraining is not None:
        return record.pretraining.flops
    if start.kind != "ckpt":
        return None
    run_dir = str(start.run_dir())
    if run_dir in seen:
        raise PlmbenchError(f"its chain of init_from checkpoints returns to {run_dir}: a run "
                            "cannot start from itself or from a run that started from it")
    source = read_record(run_dir)
    return _pretraining_flops(Record.from_json(source), seen | {run_dir}) if source else None


def _record_columns(record: Record, board: Board) -> list[Column]:
    """The board's columns whose pattern matches the record's task, else the columns the record's
    own task config asks for (none without a task config) followed by the matching board
    columns that add to them; a record of one of the board's ``finetune_columns`` methods
    shows them as columns of its own, "<label> (<method>)", scoring nothing."""
    columns = _task_and_board_columns(record, board)
    finetune = record.config.get("finetune")
    method = finetune.get("name") if isinstance(finetune, Mapping) else None
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
    looks: dict[tuple[Column, ...], str] = {}  # a list of columns as text, made once per list

    def text(columns: list[Column]) -> str:
        key = tuple(columns)
        if key not in looks:
            looks[key] = json.dumps([asdict(c) for c in columns], sort_keys=True)
        return looks[key]

    for task in sorted(by_task, key=board.task_rank):
        newest_first = sorted(by_task[task], key=lambda pair: (pair[0].finished_at or "",
                                                               text(pair[1])), reverse=True)
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


@dataclass
class _Reading:
    """What a board reads of one record: its columns, (column, value) for those it has a value
    of, and the training FLOPs behind its model (``_pretraining_flops``)."""

    columns: list[Column]
    found: list[tuple[Column, float]]
    flops: float | None


def _read(record: Record, board: Board) -> _Reading | str:
    """The record as the board reads it, or why the board cannot use it (a value that is no
    finite number, task columns that cannot be read, a chain of checkpoints that loops, a
    checkpoint's record that is no record)."""
    try:
        columns, found = _record_values(record, board)
        return _Reading(columns, found, _pretraining_flops(record))
    except PlmbenchError as err:
        return str(err)


@dataclass
class _RowGathered:
    """What ``build_table`` gathers of one row, (label, protocol), from its records."""

    #: (column task, column label) -> (seed key, value) per record
    values: dict[tuple[str, str], list[tuple[str, float]]] = field(
        default_factory=lambda: defaultdict(list))
    protocols: set[str] = field(default_factory=set)  # of its records (rows: label)
    #: the protocols its runs name (conf/protocol/; None: a record of before they had names)
    made_by: set[str | None] = field(default_factory=set)
    settings: dict[str, str] | None = None  # its first record's (bench/boards/points.py)
    config: Mapping = field(default_factory=dict)  # its first record's resolved config
    texts: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    records: dict[str, list[Record]] = field(default_factory=lambda: defaultdict(list))
    baseline: bool = False
    selected: dict[str, dict] = field(default_factory=dict)  # bench.boards.selection's
    parameters: float | None = None  # the largest over its records
    compute: float | None = None

    def add(self, record: Record, reading: _Reading, seed_key: str, board: Board) -> None:
        """One record of the row: its values, texts, settings, size and compute."""
        for column, value in reading.found:
            self.values[column.task, column.label].append((seed_key, value))
        for column in reading.columns:
            if column.is_text and (text := lookup_text(record, column.value)) is not None:
                self.texts[column.label].add(text)
        if self.settings is None:
            self.settings, self.config = settings(record), record.config
        self.records[record.task].append(record)
        self.baseline = record.baseline
        if not record.baseline:
            self.made_by.add(record.protocol)
        if record.selected is not None:
            self.selected[record.task] = dict(record.selected)
        size = record.trained_parameters if board.size == "trained_parameters" else (
            record.encoder_parameters or record.parameters)  # without a task head
        if isinstance(size, int | float):
            self.parameters = max(size, self.parameters if self.parameters is not None else size)
        if isinstance(reading.flops, int | float):
            self.compute = max(reading.flops,
                               self.compute if self.compute is not None else reading.flops)

    def row(self, name: str, protocol: str, cells: dict[str, Cell], board: Board, stat: str,
            shown: list[Column], label: str, point: dict[str, str]) -> Row:
        if board.rows == "label":  # a row of several protocols: a hash of them all
            joined = ",".join(sorted(self.protocols))
            protocol = hashlib.sha256(joined.encode()).hexdigest()[:16]
        value, covered, estimate = score(cells, shown, board, stat)
        return Row(name, protocol, cells, value, covered, score_estimate=estimate,
                   texts={text: " / ".join(sorted(found)) for text, found in self.texts.items()},
                   record_label=label, settings=self.settings or {}, point=point,
                   records=dict(self.records), baseline=self.baseline, selected=self.selected,
                   parameters=self.parameters, compute=self.compute,
                   protocols=tuple(named(self.made_by)),
                   score_bounds=score_bounds(cells, shown, board))


def build_table(records: Iterable[Record | Mapping], board: Board | str, stat: str = "mean",
                unused: Iterable[Unused] = ()) -> Table:
    """Aggregate the board's ok records into rows sorted by score (best first), then label;
    ``stat`` (one of STATS) is the statistic over seeds that cells show and scores average.
    ``unused``: records already found unusable (``bench.record.read_records``), listed with
    those of the board that it cannot read (``_read``: each with its reason)."""
    board = get_board(board) if isinstance(board, str) else board
    if stat not in STATS:
        raise PlmbenchError(f"unknown statistic {stat!r}; use one of {', '.join(STATS)}")
    records, unused = as_records(records), list(unused)
    finished = _select(records, board)
    by_task: dict[str, list[tuple[Record, list[Column]]]] = defaultdict(list)
    gathered: dict[tuple[str, str], _RowGathered] = {}
    n_records = 0
    text_labels: dict[str, None] = {}
    for (label, protocol, _, seed), record in sorted(finished.items(),
                                                     key=lambda item: repr(item[0])):
        reading = _read(record, board)
        if isinstance(reading, str):
            unused.append(Unused(record.source, reading))
            continue
        if not reading.found:
            continue
        row = gathered.setdefault((label, "" if board.rows == "label" else protocol),
                                  _RowGathered())
        row.protocols.add(protocol)
        for task in {c.task for c in reading.columns}:
            by_task[task].append((record, [c for c in reading.columns if c.task == task]))
        # a seed's runs, matched across columns
        row.add(record, reading, repr((protocol, seed)), board)
        text_labels.update((c.label, None) for c in reading.columns
                           if c.is_text and lookup_text(record, c.value) is not None)
        n_records += not record.baseline  # runs used; a baseline is no run

    columns = [
        c for c in _board_columns(by_task, board)
        if not c.is_text and any((c.task, c.label) in row.values for row in gathered.values())
    ]
    if board.score_columns:  # the aggregate averages the columns it names, and only those
        columns = [replace(c, score=c.label in board.score_columns) for c in columns]
    shown = _unique_labels(columns)
    _check_directions(shown, board)
    scoring = [c for c in shown if c.score]
    if board.aggregate == "task_macro":
        n_scorable = len(set(board.task_order) | {c.task for c in scoring})
    else:
        n_scorable = len(scoring) if board.aggregate == "mean" else 0

    # rows of several protocols: a column names each row's (bench/boards/protocols.py)
    if len(named(p for row in gathered.values() for p in row.made_by)) > 1:
        text_labels = {PROTOCOL_COLUMN: None, **text_labels}
        for row in gathered.values():
            if row.made_by:
                row.texts[PROTOCOL_COLUMN].add(row_text(row.made_by))
    settings_of = {key: dict(row.settings or {}) for key, row in gathered.items()}
    resolved(settings_of, {key: row.config for key, row in gathered.items()})
    names = row_names(list(gathered), settings_of)
    points = row_points(list(gathered), settings_of)
    rows = []
    for key, row in gathered.items():
        cells = {new.label: Cell.of(row.values[old.task, old.label])
                 for old, new in zip(columns, shown, strict=True)
                 if (old.task, old.label) in row.values}
        rows.append(row.row(names[key], key[1], cells, board, stat, shown, key[0], points[key]))
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


def _check_directions(shown: list[Column], board: Board) -> None:
    """A score averages columns of one direction: one line naming both kinds where it would not."""
    if board.aggregate == "none":
        return
    if len({c.higher_is_better for c in shown if c.score}) > 1:
        ups = [c.label for c in shown if c.score and c.higher_is_better]
        downs = [c.label for c in shown if c.score and not c.higher_is_better]
        raise PlmbenchError(
            f"board {board.name!r} averages columns where higher is better ({', '.join(ups)}) "
            f"with columns where lower is better ({', '.join(downs)}); "
            "set score: false on one kind"
        )


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
