"""Board configuration: what a leaderboard shows and how it scores (DESIGN.md contract 8).

This module knows no task by name. A board is a YAML file, ``conf/board/<name>.yaml``, that
says how columns are ordered, scaled and scored; the columns themselves come from the records:
each record carries its resolved task config (``config.task``), whose ``columns`` list says
which values of the record to show (dotted paths such as ``metrics.validation.f1`` or
``throughput.train_tokens_per_s``). A task without ``columns`` gets one column per (eval split,
metric in ``task.metrics``). So a new task YAML reaches its board with no change here.

A board may also define columns of its own (``columns:``, each with a ``tasks`` pattern): the
records of a task matching a pattern show the board's columns instead of their task's, and a
board column is one column across every task it matches (the domain board's adaptation cost,
whichever pretraining task the adaptation ran). A board column with ``adds: true`` is shown
beside its tasks' own columns instead (the GLUE board's model size and pretraining cost beside
each task's scores).

A column with ``text: true`` (a retriever's name, an index type) is no cell: its values follow the
row's label, "minilm-l6 (dense, HNSW32)", and records that differ in them are different rows;
with ``text: column`` its values are a column of text beside the numbers (the pretraining recipe
behind a row). A column with ``varies: false`` holds a value that does not change with the seed
(parameters, FLOPs): its cell shows the value alone, not a spread over seeds.

A board scores rows by its ``aggregate`` (the default, e.g. the GLUE leaderboard's) or by one of
its named ``aggregates`` (``plmbench leaderboard --aggregate NAME``: BERT's Table 1 average),
which may name the ``columns`` it averages. ``references`` names a file of published results
(``conf/references/<name>.yaml``, ``bench/boards/references.py``) shown apart from the measured
rows.

The tables built from a board and records are ``bench/boards/table.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatch
from pathlib import Path

from bench.boards.cells import Cell
from bench.record import Record
from datamodules.errors import PlmbenchError
from datamodules.keys import check_keys, nearest

#: where the board YAMLs live: <repo>/conf/board/<name>.yaml
BOARD_DIR = Path(__file__).resolve().parents[2] / "conf" / "board"
AGGREGATES = ("task_macro", "mean", "none")
#: the name of a board's own ``aggregate`` when it gives none
DEFAULT_AGGREGATE = "default"
#: how a board groups records into rows: by (label, protocol hash), or by label alone
ROWS = ("protocol", "label")
#: what a board's ``size`` may name: the model's parameters, or those its fine-tuning trained
SIZES = ("parameters", "trained_parameters")
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


def _choice(config: Mapping, key: str, allowed: tuple[str, ...], where: str) -> str:
    """``config[key]`` (the first of ``allowed`` when absent), one of ``allowed``."""
    value = config.get(key, allowed[0])
    if value not in allowed:
        raise PlmbenchError(f"{where}: {key} {value!r} is not one of {', '.join(allowed)}")
    return value


def _strings(values: object, where: str, what: str) -> list[str]:
    """``values`` (None: none) as a list of strings; else one line: a list of ``what``."""
    values = values or []
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise PlmbenchError(f"{where} must be a list of {what}")
    return list(values)


def _check_bool(value: object, key: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise PlmbenchError(f"{where}: {key} must be true or false, not {value!r}")
    return value


def _check_path(value: object, key: str, where: str) -> str | None:
    if value is not None and not (isinstance(value, str) and value):
        raise PlmbenchError(f"{where}: {key} must be a dotted path into the record (e.g. "
                            f"analysis), not {value!r}")
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
    #: which aggregate scores the rows (``aggregate.name``, or a key of ``aggregates``), and
    #: what it is, for the title: "the GLUE leaderboard's aggregate"
    aggregate_name: str = DEFAULT_AGGREGATE
    aggregate_description: str = ""
    #: the labels of the columns the aggregate averages; empty: every scoring column
    score_columns: tuple[str, ...] = ()
    #: the other aggregates a board offers, by name: their YAML mappings, checked
    aggregates: tuple[tuple[str, Mapping], ...] = ()
    #: published results shown apart from the rows (conf/references/<name>.yaml)
    references: str = ""
    note: str = ""  # appended to the Markdown footnote (e.g. a citation)
    rows: str = "protocol"  # one of ROWS
    #: the row (label) every other row's score and parameters are given as a share of: a
    #: distilled student's share of its teacher's (Sanh et al. 2019, §4: 97% with 40% fewer)
    reference: str = ""
    #: what a row's size is (the plots' cost axis, the parameter share): ``parameters``, the
    #: model's (without a task head), or ``trained_parameters``, what its fine-tuning method
    #: trained (``conf/finetune``: a frozen encoder's head alone, adapters ...)
    size: str = "parameters"
    #: fine-tuning methods (``conf/finetune``) whose records show in columns of their own beside
    #: fine-tuning's, labelled "<column> (<method>)" and scoring nothing: SciBERT's Table 1
    #: "Frozen" beside "Finetune" (Beltagy et al. 2019)
    finetune_columns: tuple[str, ...] = ()
    #: the board's own columns; ``Column.task`` is the fnmatch pattern of the tasks they replace
    columns: tuple[Column, ...] = ()
    #: a label prefix: each task's columns labelled "<curves><number>" are drawn, on the HTML
    #: page, as one curve per row over the number (the probing board's accuracy by layer); ""
    #: draws none
    curves: str = ""
    #: a second view of another board's records, (that board, the fnmatch pattern of the tasks
    #: it shows): the head-pruning curves of the compression board's pruning runs; ("", "*"):
    #: the records written for this board
    reads: tuple[str, str] = ("", "*")

    @property
    def records_of(self) -> str:
        """The ``board`` a record names to be shown on this board."""
        return self.reads[0] or self.name

    def holds(self, record: Record) -> bool:
        """Whether ``record`` (of any status) shows on this board."""
        return (record.board == self.records_of and isinstance(record.task, str)
                and fnmatch(record.task, self.reads[1]))

    @classmethod
    def from_config(cls, config: Mapping, where: str = "board") -> Board:
        """A board from its YAML's mapping, checked; PlmbenchError naming the bad key."""
        known = {"name", "title", "task_order", "defaults", "aggregate", "note", "rows", "columns",
                 "reference", "aggregates", "references", "size",
                 "finetune_columns", "curves", "reads"}
        check_keys(config, known, where)
        name = config.get("name")
        if not isinstance(name, str) or not name:
            raise PlmbenchError(f"{where}: name must be a non-empty string")
        order = config.get("task_order") or []
        if isinstance(order, str) or not all(isinstance(task, str) for task in order):
            raise PlmbenchError(f"{where}: task_order must be a list of task names")
        defaults = config.get("defaults") or {}
        check_keys(defaults, {"scale", "higher_is_better", "format"}, where, "defaults.")
        aggregate = _check_aggregate(config.get("aggregate") or {}, f"{where}: aggregate")
        method = aggregate.get("method", "none")
        others = config.get("aggregates") or {}
        if not isinstance(others, Mapping):
            raise PlmbenchError(f"{where}: aggregates must map names to aggregates")
        others = {name: _check_aggregate(spec, f"{where}: aggregates.{name}")
                  for name, spec in others.items()}
        rows = _choice(config, "rows", ROWS, where)
        reference = config.get("reference") or ""
        if not isinstance(reference, str) or (reference and method == "none"):
            raise PlmbenchError(f"{where}: reference must be a row label, on a board whose "
                                "aggregate.method gives a score")
        size = _choice(config, "size", SIZES, where)
        methods = _strings(config.get("finetune_columns"), f"{where}: finetune_columns",
                           "conf/finetune names")
        board = cls(
            name=name,
            rows=rows,
            size=size,
            finetune_columns=tuple(methods),
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
            aggregate_name=str(aggregate.get("name") or DEFAULT_AGGREGATE),
            aggregate_description=str(aggregate.get("description") or ""),
            score_columns=tuple(aggregate.get("columns") or ()),
            aggregates=tuple(sorted(others.items())),
            references=str(config.get("references") or ""),
            note=str(config.get("note") or ""),
            reference=reference,
            curves=str(config.get("curves") or ""),
            reads=_reads(config.get("reads"), where),
        )
        return replace(board, columns=tuple(_board_columns_of(config.get("columns"), board, where)))

    @property
    def aggregate_names(self) -> list[str]:
        """The aggregates this board can score by: its own first, then the named ones."""
        return [self.aggregate_name, *(name for name, _ in self.aggregates)]

    def with_aggregate(self, name: str | None) -> Board:
        """This board scored by aggregate ``name`` (None or its own: the board as it is)."""
        if name is None or name == self.aggregate_name:
            return self
        spec = dict(self.aggregates).get(name)
        if spec is None:
            raise PlmbenchError(f"board {self.name!r} has no aggregate {name!r}; use one of "
                                f"{', '.join(self.aggregate_names)}")
        return replace(
            self, aggregate=spec.get("method", self.aggregate), aggregate_name=name,
            score_label=str(spec.get("label") or name),
            score_format=spec.get("format", self.score_format),
            aggregate_description=str(spec.get("description") or ""),
            score_columns=tuple(spec.get("columns") or ()),
            note=str(spec.get("note") or ""))

    def task_rank(self, task: str) -> tuple[int, str]:
        """Sort key of a task: its place in ``task_order``, unlisted tasks after, by name."""
        order = self.task_order
        return (order.index(task), "") if task in order else (len(order), task)


def _check_aggregate(spec: object, where: str) -> dict:
    """An aggregate's mapping (method, label, format, name, description, columns, note),
    checked."""
    if not isinstance(spec, Mapping):
        raise PlmbenchError(f"{where} must be a mapping of method, label, ...")
    check_keys(spec, {"method", "label", "format", "name", "description", "columns", "note"},
               where)
    method = spec.get("method", "none")
    if method not in AGGREGATES:
        raise PlmbenchError(f"{where}.method {method!r} is not one of {', '.join(AGGREGATES)}")
    _strings(spec.get("columns"), f"{where}: columns", "column labels")
    if "format" in spec:
        _check_format(spec["format"], where)
    return dict(spec)


def known_boards() -> list[str]:
    """The names of the boards under ``conf/board``, sorted."""
    return sorted(path.stem for path in BOARD_DIR.glob("*.yaml"))


def _board_mapping(name: str, seen: tuple[str, ...] = ()) -> dict:
    """The YAML mapping of board ``name``, over that of the board it ``extends`` (its keys
    replace the other's, whole)."""
    from omegaconf import OmegaConf

    known = known_boards()
    if name not in known:
        near = nearest(name, known)
        hint = f"did you mean {near}? " if near else ""
        raise PlmbenchError(f"unknown board {name!r}; {hint}known boards: {', '.join(known)}")
    path = BOARD_DIR / f"{name}.yaml"
    config = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(config, dict):
        raise PlmbenchError(f"{path}: a board is a mapping of name, title, task_order, ...")
    base = config.pop("extends", None)
    if base is None:
        return config
    if base in (*seen, name):
        raise PlmbenchError(f"{path}: extends {base!r}, which extends it back; break the cycle")
    return {**_board_mapping(base, (*seen, name)), **config}


def _reads(value: object, where: str) -> tuple[str, str]:
    """``reads: {board: <name>, tasks: <pattern>}`` checked (absent: the board's own records)."""
    if value is None:
        return "", "*"
    if not isinstance(value, Mapping) or not isinstance(value.get("board"), str):
        raise PlmbenchError(f"{where}: reads must be {{board: <name>, tasks: <pattern>}}")
    check_keys(value, {"board", "tasks"}, where, "reads.")
    return value["board"], str(value.get("tasks") or "*")


def get_board(name: str) -> Board:
    """The board ``conf/board/<name>.yaml``; PlmbenchError listing the known boards otherwise."""
    path = BOARD_DIR / f"{name}.yaml"
    board = Board.from_config(_board_mapping(name), str(path))
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
    adds: bool = False  # a board column shown beside its tasks' own columns, not instead of them
    is_text: bool = False  # ``text: column``: a text shown in a column of its own (a recipe)
    varies: bool = True  # ``varies: false``: the same for every seed (parameters, FLOPs)
    #: where a record has no ``value``, the paths read instead, in order (``value`` given as a
    #: list: a model's parameters without its heads, else with them where the family keeps
    #: them, as a T5's text-to-text GLUE run does)
    fallback: tuple[str, ...] = ()
    #: ``higher_is_better: null``: a value with no better direction (a probe's best layer, a
    #: scalar mix's centre of gravity): described, never ranked, never marked best
    ranked: bool = True
    #: the (low, high) the value can take, in the record's units (``range: [0, 1]``); (None,
    #: None) where unbounded. Defaults from the metric's name (``metric_range``)
    bounds: tuple[float | None, float | None] = (None, None)
    #: ``scored_as: analysis``: the record part naming the eval split and metric behind a value
    #: that is not at ``metrics.<split>.<metric>`` (a pruning curve's point: its ``analysis``
    #: holds ``split`` and ``metric``), so the best constant answer floors it too
    scored_as: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.value, *self.fallback)

    def interval(self, cell: Cell) -> tuple[float, float] | None:
        """The cell's 95% t-interval of the mean over seeds, unscaled, cut to the value's
        ``bounds``: an accuracy's interval never reaches past 1 (None for one seed)."""
        interval = cell.interval()
        if interval is None:
            return None
        low, high = self.bounds
        return (interval[0] if low is None else max(low, interval[0]),
                interval[1] if high is None else min(high, interval[1]))

    @property
    def is_setting(self) -> bool:
        """Whether the column shows a config setting (``config.task.max_length``): a choice
        made before the run, with no best value, so it is never marked best."""
        return self.value.startswith("config.")

    def show(self, x: float) -> str:
        return format(x * self.scale, self.format)

    def text(self, cell: Cell, stat: str = "mean") -> str:
        """The cell as a board shows it: the value alone where it does not vary with the seed
        (or is a config setting);
        the median and range (``stat`` median); else the mean ± the half-width of its 95%
        t-interval over seeds (one seed: no interval). A value that does not vary with the seed
        but differs between the tasks a column spans (a task head's size) shows its range."""
        low, high = cell.values[0], cell.values[-1]
        if not self.varies or self.is_setting:
            ends = dict.fromkeys((self.show(low), self.show(high)))  # equal as shown: one
            return "–".join(ends)
        if stat == "median":
            return f"{self.show(cell.median)} [{self.show(low)}, {self.show(high)}] (n={cell.n})"
        interval = self.interval(cell)
        if interval is None:
            return f"{self.show(cell.mean)} (n={cell.n})"
        if interval != cell.interval():  # cut at a bound: no longer symmetric, its ends shown
            return (f"{self.show(cell.mean)} [{self.show(interval[0])}, "
                    f"{self.show(interval[1])}] (n={cell.n})")
        return f"{self.show(cell.mean)} ± {self.show(cell.mean - interval[0])} (n={cell.n})"


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
        splits = task.get("splits") or {}
        if not isinstance(splits, Mapping):
            raise PlmbenchError(f"{where}: task {name} splits is {splits!r}, not a mapping "
                                "of train and eval splits")
        splits = splits.get("eval") or []
        splits = [splits] if isinstance(splits, str) else splits
        metrics = task.get("metrics") or []
        if not _names(splits) or not _names(metrics):
            raise PlmbenchError(f"{where}: task {name} names its eval splits {splits!r} and "
                                f"metrics {metrics!r}: each must be a list of names")
        specs = [
            {
                "label": f"{name} {metric}" + (f" [{split}]" if len(splits) > 1 else ""),
                "value": f"metrics.{split}.{metric}",
            }
            for split in splits
            for metric in metrics
        ]
    return _parse_columns(specs, board, f"{where}: task {name}", lambda spec: name)


def _names(values: object) -> bool:
    """Whether ``values`` is a list of names (strings), as splits and metrics are."""
    return isinstance(values, list | tuple) and all(isinstance(v, str) for v in values)


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
        known = {"label", "value", "scale", "higher_is_better", "score", "format", "text",
                 "varies", "range", "scored_as"} | extra
        check_keys(spec, known, at)
        label, value = spec.get("label"), spec.get("value")
        paths = list(value) if isinstance(value, list | tuple) else [value]
        if not isinstance(label, str) or not label or not paths or not all(
                isinstance(path, str) and path for path in paths):
            raise PlmbenchError(f"{at} needs a label and a value (a dotted path into the record, "
                                "or a list of them: the first the record has)")
        if label in labels:
            raise PlmbenchError(f"{at}: label {label!r} appears twice")
        labels.add(label)
        scale = _check_scale(spec.get("scale", board.scale), at)
        direction = spec.get("higher_is_better", board.higher_is_better)
        columns.append(Column(
            task=task_of(spec),
            label=label,
            value=paths[0],
            fallback=tuple(paths[1:]),
            scale=scale,
            higher_is_better=direction is None or _check_bool(direction, "higher_is_better", at),
            ranked=direction is not None and not describes(paths[0]),
            bounds=_check_range(spec["range"], at) if "range" in spec
            else metric_range(paths[0], scale),
            format=_check_format(spec.get("format", board.format), at),
            in_label=(text := _check_text(spec.get("text", False), at)) == "label",
            is_text=text == "column",
            score=not text and _check_bool(spec.get("score", True), "score", at),
            adds=_check_bool(spec.get("adds", False), "adds", at),
            varies=_check_bool(spec.get("varies", True), "varies", at),
            scored_as=_check_path(spec.get("scored_as"), "scored_as", at),
        ))
    return columns


#: metrics recorded as fractions whatever the task: [0, 1] (correlations [-1, 1])
FRACTIONS = ("accuracy", "macro_f1", "micro_f1", "auroc", "mix")
CORRELATIONS = ("matthews", "pearson", "spearman")
#: metrics that are shares, recorded as fractions by some families and on 0..100 by others
#: (SQuAD's F1 and exact match, retrieval's recall@k and MRR): a board showing them ×100 holds
#: fractions
SHARES = ("f1", "precision", "recall", "exact_match", "f1a", "mrr", "recall@", "layer_",
          "control_", "HasAns_", "NoAns_")


#: metrics that describe a model rather than score it (where a probe peaks, how many questions a
#: split holds, a tuned threshold): no better direction, whatever an older record's column says
DESCRIPTIVE = ("best_layer", "centre_of_gravity", "null_threshold", "HasAns_total",
               "NoAns_total", "total")


def describes(path: str) -> bool:
    """Whether the value at ``path`` is a description with no better direction (DESCRIPTIVE)."""
    return path.startswith("metrics.") and path.rsplit(".", 1)[-1] in DESCRIPTIVE


def metric_range(path: str, scale: float) -> tuple[float | None, float | None]:
    """The range of the metric at a column's ``path`` (``metrics.validation.f1``), in the
    record's units, from its name; (None, None) for a value of no known range (a loss, a
    throughput). A share shown ×100 is a fraction, [0, 1]; shown as it is, on 0..100."""
    if not path.startswith("metrics."):
        return None, None
    name = path.rsplit(".", 1)[-1]
    if name in CORRELATIONS:
        return -1.0, 1.0
    if name in FRACTIONS or (name.startswith("layer_") and name[6:].isdigit()):
        return 0.0, 1.0
    if name in SHARES or name.startswith(SHARES):
        return 0.0, 1.0 if scale == 100 else 100.0
    return None, None


def _check_range(value: object, where: str) -> tuple[float | None, float | None]:
    """A column's ``range: [low, high]`` (either may be null: unbounded on that side)."""
    ends = list(value) if isinstance(value, list | tuple) else None
    if ends is None or len(ends) != 2 or not all(
            e is None or (isinstance(e, int | float) and not isinstance(e, bool)) for e in ends) \
            or (None not in ends and ends[0] >= ends[1]):
        raise PlmbenchError(f"{where}: range must be [low, high] (null: unbounded), low < high, "
                            f"not {value!r}")
    return tuple(None if e is None else float(e) for e in ends)


def _check_text(value: object, where: str) -> str:
    """A column's ``text``: "" (a number), "label" (``true``: in the row label) or "column"."""
    if value in (False, True):
        return "label" if value else ""
    if value == "column":
        return "column"
    raise PlmbenchError(f"{where}: text must be true (in the row label), column or false, "
                        f"not {value!r}")


def _board_columns_of(specs: object, board: Board, where: str) -> list[Column]:
    """A board's own columns: each names the ``tasks`` (an fnmatch pattern) whose records show
    it instead of their task's columns (beside them with ``adds: true``)."""
    if specs is None:
        return []
    for i, spec in enumerate(specs if isinstance(specs, list) else []):
        tasks = spec.get("tasks") if isinstance(spec, Mapping) else None
        if not isinstance(tasks, str) or not tasks:
            raise PlmbenchError(f"{where}: columns[{i}] needs tasks, a pattern of task names "
                                "such as 'pretrain/*'")
    return _parse_columns(specs, board, where, lambda spec: spec["tasks"],
                          frozenset({"tasks", "adds"}))
