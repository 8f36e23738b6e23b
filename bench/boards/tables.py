"""Records into a board's tables: the one way every caller makes them.

``plmbench leaderboard`` and ``plmbench significance`` (``bench/cli.py``), a study's board
(``bench/studies/study.py``) and the claims report (``bench/studies/claims.py``) all call
``tables_in`` on a results directory (or ``tables_of`` on records read already), so they agree on
which records a board holds and on its baseline rows. The steps, in order:

1. the records of the tasks asked for (``View.tasks``: fnmatch patterns), if any;
2. best-on-dev selection of a hyperparameter grid (``View.select``, ``bench/boards/selection.py``;
   the records of a protocol that selects on dev, ModernBERT's, are selected whatever the view);
3. the baseline rows of the tasks the board's runs used (``View.baselines``,
   ``bench/boards/baselines.py``), made from what the runs kept;
4. the statistic over seeds: ``View.stat``, or where it is None the one the runs' protocol
   reports (``bench/boards/protocols.py``: glue_sane's median), else the mean;
5. one table per evaluation set the runs were scored on (``bench/boards/sections.py``), each
   aggregated by ``bench/boards/table.py``; records a board cannot use are listed with why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from bench.board_index import board_records
from bench.boards.baselines import baseline_records
from bench.boards.config import Board, get_board
from bench.boards.protocols import reported_statistic
from bench.boards.sections import build_tables
from bench.boards.selection import best_on_dev
from bench.boards.table import STATS, Table
from bench.record import Record, Unused, as_records
from datamodules.errors import PlmbenchError

#: how the records of a grid are chosen: every point a row, or per task the best on dev
SELECTIONS = ("all", "best-on-dev")


@dataclass(frozen=True)
class View:
    """What a caller asks of a board's records: the statistic over seeds (one of ``STATS``;
    None: the one the runs' protocol reports), the baseline rows or not, the tasks shown (fnmatch
    patterns; () for every task) and the selection of a grid (one of ``SELECTIONS``)."""

    stat: str | None = "mean"
    baselines: bool = True
    tasks: tuple[str, ...] = ()
    select: str = "all"

    def __post_init__(self) -> None:
        if self.stat is not None and self.stat not in STATS:
            raise PlmbenchError(f"unknown statistic {self.stat!r}; use one of {', '.join(STATS)}")
        if self.select not in SELECTIONS:
            raise PlmbenchError(f"unknown selection {self.select!r}; use one of "
                                f"{', '.join(SELECTIONS)}")


def tables_of(records: Iterable[Record | Mapping], board: Board | str, view: View = View(),
              unused: Iterable[Unused] = (), where: str | Path | None = None) -> list[Table]:
    """The board's tables of ``records`` as ``view`` asks (module docstring); ``unused``: the
    records already found unusable (unreadable files), listed under the first table; ``where``
    they were read, for a message. Tasks asked for that match none of the board's: one line
    naming those it has."""
    board = get_board(board) if isinstance(board, str) else board
    records = as_records(records)
    if view.tasks:
        present = sorted({r.task for r in records if board.holds(r)})
        records = [r for r in records if isinstance(r.task, str)
                   and any(fnmatchcase(r.task, pattern) for pattern in view.tasks)]
        if present and not any(board.holds(r) for r in records):
            raise PlmbenchError(f"--tasks {','.join(view.tasks)} matches no task of board "
                                f"{board.name!r}{f' under {where}' if where else ''}; its "
                                f"tasks: {', '.join(present)}")
    if view.select == "best-on-dev":
        records = best_on_dev(records, board)
    stat = view.stat or reported_statistic(records, board)
    if view.baselines:
        records += baseline_records(records, board.records_of)
    return build_tables(records, board, stat, unused)


def tables_in(results_dir: str | Path, board: Board | str, view: View = View()) -> list[Table]:
    """The board's tables of every record under ``results_dir`` (``tables_of``), read through
    the directory's index at a study's scale (``bench/board_index.py``)."""
    records, unused = board_records(results_dir)
    return tables_of(records, board, view, unused, results_dir)
