"""Leaderboards: a pure function of run records (DESIGN.md contract 8); nothing is re-run.

This module knows no task by name. A board is a YAML file, ``conf/board/<name>.yaml``, that
says how columns are ordered, scaled and scored; the columns themselves come from the records:
each record carries its resolved task config (``config.task``), whose ``columns`` list says
which values of the record to show (dotted paths such as ``metrics.validation.f1`` or
``throughput.train_tokens_per_s``). A task without ``columns`` gets one column per (eval split,
metric in ``task.metrics``). So a new task YAML reaches its board with no change here.

A board may also define columns of its own (``columns:``, each with a ``tasks`` pattern): the
records of a task matching a pattern show the board's columns instead of their task's, and a
board column is one column across every task it matches (the domain board's adaptation cost,
whichever pretraining task the adaptation ran).

A column with ``text: true`` (a retriever's name, an index type) is no cell: its values follow the
row's label, "minilm-l6 (dense, HNSW32)", and records that differ in them are different rows.

Records of one board are grouped into rows by (label, protocol_hash), or by label alone with
``rows: label`` (a study's fine-tuning, adaptation and evaluation runs of one model differ in
protocol but are one row); a cell aggregates the records of one row on one column, the seeds of
a run or the runs a board column spans: mean ± sample std (0 for one value), median and n. A
row's score follows the board's ``aggregate.method``: ``task_macro`` is GLUE's official
aggregate (Wang et al. 2019, evaluation paragraph): a task with several scoring columns scores
their unweighted mean, and the board score is the macro-average of the task scores, taken over
the tasks a row has and reported with their count, so a partial sweep still gets a number;
``mean`` is the plain mean of the scoring columns a row has; ``none`` gives no score.

Failed runs of a board are listed apart from its rows, each with its error line; rows computed
from the data alone (``bench/baselines.py``, a record with ``baseline: true``) are marked as
such. The same records give the same bytes in every format (sorted rows, fixed float text).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from datamodules.errors import PlmbenchError

MISSING = "–"
#: where the board YAMLs live: <repo>/conf/board/<name>.yaml
BOARD_DIR = Path(__file__).resolve().parent.parent / "conf" / "board"
AGGREGATES = ("task_macro", "mean", "none")
#: how a board groups records into rows: by (label, protocol hash), or by label alone
ROWS = ("protocol", "label")
#: the statistic over seeds that fills a cell and makes the score: the mean (with the sample std),
#: or the median (with the range), which cramming (Geiping & Goldstein 2022, §4) reports for GLUE
STATS = ("mean", "median")
DEFAULT_FORMAT = ".4g"


def _check_format(spec: object, where: str) -> str:
    """``spec`` if it is a str format spec for a float (".1f", ",.0f", ".2e"), else an error."""
    if not isinstance(spec, str):
        raise PlmbenchError(f"{where}: format must be a format spec string such as '.1f'")
    try:
        format(1.0, spec)
    except (ValueError, TypeError) as err:
        raise PlmbenchError(f"{where}: format {spec!r} is not a float format spec: {err}") from None
    return spec


def _check_scale(scale: object, where: str) -> float:
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
        raise PlmbenchError(f"{where}: scale must be a positive number, not {scale!r}")
    return float(scale)


def _check_bool(value: object, key: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise PlmbenchError(f"{where}: {key} must be true or false, not {value!r}")
    return value


@dataclass(frozen=True)
class Board:
    """How a benchmark's columns are ordered, scaled and scored (``conf/board/<name>.yaml``)."""

    name: str
    title: str = ""
    task_order: tuple[str, ...] = ()
    scale: float = 1.0  # column defaults, each overridable by a column
    higher_is_better: bool = True
    format: str = DEFAULT_FORMAT
    aggregate: str = "none"  # task_macro | mean | none
    score_label: str = "Score"
    score_format: str = ""  # "" = the columns' default format
    note: str = ""  # appended to the Markdown footnote (e.g. a citation)
    rows: str = "protocol"  # one of ROWS
    #: the board's own columns; ``Column.task`` is the fnmatch pattern of the tasks they replace
    columns: tuple[Column, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping, where: str = "board") -> Board:
        """A board from its YAML's mapping, checked; PlmbenchError naming the bad key."""
        known = {"name", "title", "task_order", "defaults", "aggregate", "note", "rows", "columns"}
        if unknown := sorted(set(config) - known):
            raise PlmbenchError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
        name = config.get("name")
        if not isinstance(name, str) or not name:
            raise PlmbenchError(f"{where}: name must be a non-empty string")
        order = config.get("task_order") or []
        if isinstance(order, str) or not all(isinstance(task, str) for task in order):
            raise PlmbenchError(f"{where}: task_order must be a list of task names")
        defaults = config.get("defaults") or {}
        if unknown := sorted(set(defaults) - {"scale", "higher_is_better", "format"}):
            raise PlmbenchError(f"{where}: unknown defaults {unknown}")
        aggregate = config.get("aggregate") or {}
        if unknown := sorted(set(aggregate) - {"method", "label", "format"}):
            raise PlmbenchError(f"{where}: unknown aggregate keys {unknown}")
        method = aggregate.get("method", "none")
        if method not in AGGREGATES:
            raise PlmbenchError(
                f"{where}: aggregate.method {method!r} is not one of {', '.join(AGGREGATES)}"
            )
        rows = config.get("rows", "protocol")
        if rows not in ROWS:
            raise PlmbenchError(f"{where}: rows {rows!r} is not one of {', '.join(ROWS)}")
        board = cls(
            name=name,
            rows=rows,
            title=str(config.get("title") or name),
            task_order=tuple(order),
            scale=_check_scale(defaults.get("scale", 1), f"{where} defaults"),
            higher_is_better=_check_bool(
                defaults.get("higher_is_better", True), "higher_is_better", f"{where} defaults"
            ),
            format=_check_format(defaults.get("format", DEFAULT_FORMAT), f"{where} defaults"),
            aggregate=method,
            score_label=str(aggregate.get("label") or "Score"),
            score_format=_check_format(aggregate.get("format", ""), f"{where} aggregate"),
            note=str(config.get("note") or ""),
        )
        return replace(board, columns=tuple(_board_columns_of(config.get("columns"), board, where)))

    def task_rank(self, task: str) -> tuple[int, str]:
        """Sort key of a task: its place in ``task_order``, unlisted tasks after, by name."""
        order = self.task_order
        return (order.index(task), "") if task in order else (len(order), task)


def known_boards() -> list[str]:
    """The names of the boards under ``conf/board``, sorted."""
    return sorted(path.stem for path in BOARD_DIR.glob("*.yaml"))


def get_board(name: str) -> Board:
    """The board ``conf/board/<name>.yaml``; PlmbenchError listing the known boards otherwise."""
    from omegaconf import OmegaConf

    known = known_boards()
    if name not in known:
        raise PlmbenchError(f"unknown board {name!r}; known boards: {', '.join(known)}")
    path = BOARD_DIR / f"{name}.yaml"
    config = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(config, Mapping):
        raise PlmbenchError(f"{path}: a board is a mapping of name, title, task_order, ...")
    board = Board.from_config(config, str(path))
    if board.name != name:
        raise PlmbenchError(f"{path}: name {board.name!r} differs from the file name {name!r}")
    return board


@dataclass(frozen=True)
class Column:
    """One leaderboard column: a value of a task's records, shown as ``format(value * scale)``."""

    task: str
    label: str  # unique on a rendered table: a label two tasks share gets " [task]"
    value: str  # dotted path into the record: metrics.validation.f1, wall_time_s, ...
    scale: float
    higher_is_better: bool
    score: bool  # counts in the board's aggregate
    format: str
    in_label: bool = False  # ``text: true``: a text (a retriever's name) shown in the row label

    def show(self, x: float) -> str:
        return format(x * self.scale, self.format)

    def text(self, cell: Cell, stat: str = "mean") -> str:
        if stat == "median":
            low, high = cell.values[0], cell.values[-1]
            return f"{self.show(cell.median)} [{self.show(low)}, {self.show(high)}] (n={cell.n})"
        return f"{self.show(cell.mean)} ± {self.show(cell.std)} (n={cell.n})"


def task_columns(task: Mapping, board: Board, where: str = "task") -> list[Column]:
    """The columns a resolved task config asks for, the board's defaults filled in.

    ``task.columns`` when present (an empty list: none); else one column per (eval split,
    metric in ``task.metrics``), labelled "<task name> <metric>" (+ " [<split>]" when the task
    has several eval splits).
    """
    name = task.get("name")
    if not isinstance(name, str):
        raise PlmbenchError(f"{where}: the task config has no name")
    specs = task.get("columns")
    if specs is None:
        splits = (task.get("splits") or {}).get("eval") or []
        splits = [splits] if isinstance(splits, str) else list(splits)
        specs = [
            {
                "label": f"{name} {metric}" + (f" [{split}]" if len(splits) > 1 else ""),
                "value": f"metrics.{split}.{metric}",
            }
            for split in splits
            for metric in task.get("metrics") or []
        ]
    return _parse_columns(specs, board, f"{where}: task {name}", lambda spec: name)


def _parse_columns(specs: object, board: Board, where: str, task_of, extra: frozenset = frozenset()
                   ) -> list[Column]:
    """Column specs (mappings of label, value, ...), checked, the board's defaults filled in;
    ``task_of(spec)`` is the column's task, ``extra`` the keys besides a column's own."""
    if isinstance(specs, str | Mapping) or not isinstance(specs, Iterable):
        raise PlmbenchError(f"{where} columns must be a list")
    columns, labels = [], set()
    for i, spec in enumerate(specs):
        at = f"{where} columns[{i}]"
        if not isinstance(spec, Mapping):
            raise PlmbenchError(f"{at} must be a mapping with label and value")
        known = {"label", "value", "scale", "higher_is_better", "score", "format", "text"} | extra
        if unknown := sorted(set(spec) - known):
            raise PlmbenchError(f"{at}: unknown keys {unknown}; known: {sorted(known)}")
        label, value = spec.get("label"), spec.get("value")
        if not isinstance(label, str) or not label or not isinstance(value, str) or not value:
            raise PlmbenchError(f"{at} needs a label and a value (a dotted path into the record)")
        if label in labels:
            raise PlmbenchError(f"{at}: label {label!r} appears twice")
        labels.add(label)
        columns.append(Column(
            task=task_of(spec),
            label=label,
            value=value,
            scale=_check_scale(spec.get("scale", board.scale), at),
            higher_is_better=_check_bool(
                spec.get("higher_is_better", board.higher_is_better), "higher_is_better", at
            ),
            format=_check_format(spec.get("format", board.format), at),
            in_label=(text := _check_bool(spec.get("text", False), "text", at)),
            score=not text and _check_bool(spec.get("score", True), "score", at),
        ))
    return columns


def _board_columns_of(specs: object, board: Board, where: str) -> list[Column]:
    """A board's own columns: each names the ``tasks`` (an fnmatch pattern) whose records show
    it instead of their task's columns."""
    if specs is None:
        return []
    for i, spec in enumerate(specs if isinstance(specs, list) else []):
        tasks = spec.get("tasks") if isinstance(spec, Mapping) else None
        if not isinstance(tasks, str) or not tasks:
            raise PlmbenchError(f"{where}: columns[{i}] needs tasks, a pattern of task names "
                                "such as 'pretrain/*'")
    return _parse_columns(specs, board, where, lambda spec: spec["tasks"], frozenset({"tasks"}))


def _at(record: Mapping, path: str) -> object:
    value: object = record
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def lookup_text(record: Mapping, path: str) -> str | None:
    """The record's value at a dotted ``path`` as text; None when absent or not a scalar."""
    value = _at(record, path)
    return None if value is None or isinstance(value, Mapping | list) else str(value)


def lookup(record: Mapping, path: str) -> float | None:
    """The record's value at a dotted ``path`` as a finite float; None when absent or no number."""
    value = _at(record, path)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class Cell:
    """One (row, column): a value over seeds, unscaled (as the records hold it)."""

    mean: float
    std: float  # sample standard deviation, 0 for a single seed
    median: float
    n: int
    values: tuple[float, ...] = ()  # one per seed, sorted (the spread plotted on the HTML page)

    @classmethod
    def of(cls, values: list[float]) -> Cell:
        values = sorted(values)  # the same seeds give the same floats in any record order
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(statistics.mean(values), std, statistics.median(values), len(values),
                   tuple(values))

    def center(self, stat: str) -> float:
        """The cell's value under ``stat`` (one of STATS)."""
        return self.median if stat == "median" else self.mean


@dataclass
class Row:
    """One model under one protocol; ``cells`` maps column labels to their aggregates."""

    label: str
    protocol_hash: str
    cells: dict[str, Cell]
    score: float | None  # scaled as the columns are; None when the board has no aggregate
    n_scored: int  # tasks (task_macro) or columns (mean) the score covers
    baseline: bool = False  # computed from the data alone, with no training
    parameters: int | None = None  # the model's parameter count (largest over its records)
    compute: float | None = None  # pretraining FLOPs: its own, or those of its init_from run


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

    @property
    def labels(self) -> list[str]:
        return [column.label for column in self.columns]

    @property
    def score_higher_is_better(self) -> bool:
        directions = {c.higher_is_better for c in self.columns if c.score}
        return directions != {False}


def _row_label(record: Mapping, board: Board) -> str:
    """The record's label, followed by the values of its task's text columns:
    "minilm-l6 (dense, HNSW32)"."""
    label = record.get("label") or record.get("model") or "?"
    texts = [text for column in _record_columns(record, board) if column.in_label
             and (text := lookup_text(record, column.value)) is not None]
    return f"{label} ({', '.join(texts)})" if texts else label


def _select(records: Iterable[Mapping], board: Board, status: str = "ok") -> dict[tuple, Mapping]:
    """Records of the board with ``status``, one per (label, protocol, task, seed): the latest."""
    chosen: dict[tuple, Mapping] = {}
    for record in records:
        if record.get("status") != status or record.get("board") != board.name:
            continue
        if not isinstance(record.get("task"), str):
            continue
        label = _row_label(record, board)
        seed = record.get("seed", record.get("run_id"))
        key = (label, record.get("protocol_hash", ""), record["task"], seed)
        # A re-run of the same seed replaces, not adds to, the earlier result.
        if key not in chosen or (record.get("finished_at") or "") >= (
            chosen[key].get("finished_at") or ""
        ):
            chosen[key] = record
    return chosen


def _failures(records: list[Mapping], board: Board, finished: dict[tuple, Mapping]):
    """The board's failed points that no ok record replaced, sorted by task, label, seed."""
    failed = _select(records, board, status="failed")
    return sorted(
        (Failure(key[0], key[2], key[3], str(record.get("run_dir") or ""),
                 str(record.get("error") or "unknown error"))
         for key, record in failed.items() if key not in finished),
        key=lambda f: (board.task_rank(f.task), f.label, repr(f.seed), f.run_dir),
    )


def _pretraining_flops(record: Mapping) -> float | None:
    """The training FLOPs behind a record's model: its own for a run from scratch, those of the
    ``ckpt:`` run it started from (recursively), None for a checkpoint of unknown cost."""
    from bench.records import read_record

    init_from = str(record.get("init_from") or "")
    if init_from == "scratch":
        return lookup(record, "throughput.train_flops")
    if init_from.startswith("ckpt:"):
        source = read_record(init_from.partition(":")[2])
        return _pretraining_flops(source) if source else None
    return None


def _record_columns(record: Mapping, board: Board) -> list[Column]:
    """The board's columns whose pattern matches the record's task, else the columns the record's
    own task config asks for; none without a task config."""
    own = [c for c in board.columns if fnmatch.fnmatchcase(record["task"], c.task)]
    if own:
        return own
    config = record.get("config")
    task = config.get("task") if isinstance(config, Mapping) else None
    if not isinstance(task, Mapping):
        return []
    where = f"record {record.get('run_dir') or record.get('run_id') or record['task']}"
    columns = task_columns(task, board, where)
    # the record's task is what its columns belong to, whatever config.task.name says
    return [replace(column, task=record["task"]) for column in columns]


def _board_columns(by_task: dict[str, list[tuple[Mapping, list[Column]]]], board: Board):
    """Every (task, label) column in board order; a column's looks from its newest record."""
    ordered = []
    for task in sorted(by_task, key=board.task_rank):
        newest_first = sorted(
            by_task[task],
            key=lambda pair: (
                pair[0].get("finished_at") or "",
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


def _score(cells: dict[str, Cell], columns: list[Column], board: Board, stat: str):
    """(score, how many tasks or columns it covers) of one row; (None, 0) without a score."""
    scoring = [c for c in columns if c.score and c.label in cells]
    if board.aggregate == "none" or not scoring:
        return None, 0
    if board.aggregate == "mean":
        return statistics.mean(c.scale * cells[c.label].center(stat) for c in scoring), len(scoring)
    by_task = defaultdict(list)
    for column in scoring:
        by_task[column.task].append(column.scale * cells[column.label].center(stat))
    return statistics.mean(statistics.mean(v) for v in by_task.values()), len(by_task)


def build_table(records: Iterable[Mapping], board: Board | str, stat: str = "mean") -> Table:
    """Aggregate the board's ok records into rows sorted by score (best first), then label;
    ``stat`` (one of STATS) is the statistic over seeds that cells show and scores average."""
    board = get_board(board) if isinstance(board, str) else board
    if stat not in STATS:
        raise PlmbenchError(f"unknown statistic {stat!r}; use one of {', '.join(STATS)}")
    records = list(records)
    finished = _select(records, board)
    selected = sorted(finished.items(), key=lambda item: repr(item[0]))
    extras: dict[tuple[str, str], dict] = defaultdict(dict)  # per row: baseline, size, compute
    by_task: dict[str, list[tuple[Mapping, list[Column]]]] = defaultdict(list)
    values: dict[tuple[str, str], dict[tuple[str, str], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    n_records = 0
    protocols: dict[tuple[str, str], set[str]] = defaultdict(set)  # the protocols of each row
    for (label, protocol, _task, _seed), record in selected:
        columns = [c for c in _record_columns(record, board) if not c.in_label]
        found = [(c, value) for c in columns if (value := lookup(record, c.value)) is not None]
        if not found:
            continue
        if board.rows == "label":
            protocols[label, ""].add(protocol)
            protocol = ""
        for column in {c.task for c in columns}:
            by_task[column].append((record, [c for c in columns if c.task == column]))
        for column, value in found:
            values[label, protocol][column.task, column.label].append(value)
        n_records += not record.get("baseline")  # runs used; a baseline is no run
        row = extras[label, protocol]
        row["baseline"] = bool(record.get("baseline"))
        for key, value in (("parameters", record.get("parameters")),
                           ("compute", _pretraining_flops(record))):
            if isinstance(value, int | float):
                row[key] = max(value, row.get(key, value))

    columns = [
        c for c in _board_columns(by_task, board)
        if any((c.task, c.label) in row for row in values.values())
    ]
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

    protocols_per_label = defaultdict(set)
    for label, protocol in values:
        protocols_per_label[label].add(protocol)
    rows = []
    for (label, protocol), by_column in values.items():
        extra = extras[label, protocol]
        cells = {
            new.label: Cell.of(by_column[old.task, old.label])
            for old, new in zip(columns, shown, strict=True)
            if (old.task, old.label) in by_column
        }
        name = label if len(protocols_per_label[label]) == 1 else f"{label} [{protocol[:6]}]"
        if board.rows == "label":  # a row of several protocols: a hash of them all
            joined = ",".join(sorted(protocols[label, protocol]))
            protocol = hashlib.sha256(joined.encode()).hexdigest()[:16]
        rows.append(Row(name, protocol, cells, *_score(cells, shown, board, stat), **extra))
    table = Table(board, shown, [], n_records, n_scorable, _failures(records, board, finished),
                  stat)
    sign = -1 if table.score_higher_is_better else 1
    rows.sort(key=lambda row: (
        row.score is None, 0.0 if row.score is None else sign * row.score,
        row.label, row.protocol_hash,
    ))
    table.rows = rows
    return table
