"""Best-on-dev selection for a hyperparameter grid (``conf/experiment/glue_paper.yaml``): the
BERT paper's protocol (Devlin et al. 2019, §4.1) fine-tunes every grid point and reports, per
task, the point that did best on the dev set.

Grid points differ in their protocol hash, so without selection each is a row of its own. This
keeps, per (label, task), the records of the point whose mean over seeds of the task's scoring
columns is best, and gives them one protocol, ``best-on-dev``, so a model is one row again; each
says which point it is (``selected``), which the boards print (``selection_lines``) and put in
their CSV and JSON.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping

from bench.boards.config import Board
from bench.boards.points import differing, point_text, resolved, settings
from bench.boards.table import Table, _record_columns, lookup
from bench.record import Record, as_records
from datamodules.errors import PlmbenchError

SELECTED = "best-on-dev"


def best_on_dev(records: Iterable[Record | Mapping], board: Board) -> list[Record]:
    """The board's records reduced to the best grid point per (label, task); others pass as is.
    Each kept record says which point it is (``selected``: the config values that tell the
    points apart, the dev mean that chose it, its count of values, the number of points)."""
    records = as_records(records)
    points: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    settings_of: dict[tuple, dict[str, dict]] = defaultdict(dict)
    configs_of: dict[tuple, dict[str, Mapping]] = defaultdict(dict)
    directions: dict[tuple, bool] = {}
    for record in records:
        if record.status != "ok" or not board.holds(record):
            continue
        try:
            columns = _record_columns(record, board)
        except (PlmbenchError, TypeError, ValueError, AttributeError):
            continue  # build_table lists it as unused, with the reason
        key, protocol = (record.label, record.task), record.protocol_hash
        for column in columns:
            value = lookup(record, column.value)
            if column.score and value is not None:
                points[key][protocol].append(value)
                directions[key] = column.higher_is_better
                settings_of[key].setdefault(protocol, settings(record))
                configs_of[key].setdefault(protocol, record.config)
    best, chosen = {}, {}
    for key, by_protocol in points.items():
        resolved(settings_of[key], configs_of[key])
        sign = 1 if directions[key] else -1
        best[key] = max(sorted(by_protocol), key=lambda p: sign * statistics.mean(by_protocol[p]))
        values = by_protocol[best[key]]
        chosen[key] = {"point": differing(settings_of[key])[best[key]],
                       "protocol_hash": best[key],
                       "dev": statistics.mean(values), "n": len(values),
                       "of": len(by_protocol)}
    kept = []
    for record in records:
        key = (record.label, record.task)
        if key not in best or not board.holds(record):
            kept.append(record)
        elif record.protocol_hash == best[key]:
            kept.append(record.updated(protocol_hash=SELECTED, selected=chosen[key]))
    return kept


def selection_lines(table: Table) -> list[str]:
    """One line per (row, task) whose grid point was selected: which, and on what dev mean."""
    lines = []
    for row in table.rows:
        for task, chosen in sorted(row.selected.items()):
            point = point_text(chosen["point"]) or "the only point"
            lines.append(f"{row.label} {task}: {point} (dev mean {chosen['dev']:.4g} over "
                         f"{chosen['n']} values, best of {chosen['of']} points)")
    return lines
