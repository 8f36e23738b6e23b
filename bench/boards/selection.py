"""Best-on-dev selection for a hyperparameter grid (``conf/experiment/glue_paper.yaml``): the
BERT paper's protocol (Devlin et al. 2019, §4.1) fine-tunes every grid point and reports, per
task, the point that did best on the dev set.

Grid points differ in their protocol hash, so without selection each is a row of its own. This
keeps, per (label, task, protocol name), the records of the point whose mean over seeds of the
task's scoring columns is best, and gives them one protocol hash, ``best-on-dev`` (with the
protocol's name where the records name one), so a model is one row per protocol again; each
says which point it is (``selected``), which the boards print (``selection_lines``) and put in
their CSV and JSON. A protocol that selects on dev (``conf/protocol/modernbert.yaml``) has its
records selected by every board (``protocol_selection``).
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
        except PlmbenchError:
            continue  # build_table lists it as unused, with the reason
        key, protocol = (record.label, record.task, record.protocol), record.protocol_hash
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
        key = (record.label, record.task, record.protocol)
        if key not in best or not board.holds(record):
            kept.append(record)
        elif record.protocol_hash == best[key]:
            kept.append(record.updated(protocol_hash=selected_hash(record.protocol),
                                       selected=chosen[key]))
    return kept


def selected_hash(protocol: str | None) -> str:
    """The protocol hash of the points selected under ``protocol``: ``best-on-dev``, followed
    by the protocol's name where the records name one, so that rows selected under two
    protocols stay two rows."""
    return f"{SELECTED}:{protocol}" if protocol else SELECTED


def protocol_selection(records: Iterable[Record | Mapping], board: Board) -> list[Record]:
    """``records`` with best-on-dev applied to those whose protocol selects on dev
    (``protocol.selection: best-on-dev`` in the config that ran them: ModernBERT's grid,
    conf/protocol/modernbert.yaml), so every board reads such a protocol's rows as it reports
    them; the others, and records selected already (``plmbench leaderboard --select``), as
    they are."""
    records = as_records(records)

    def selects(record: Record) -> bool:
        protocol = record.config.get("protocol")
        return (record.selected is None and isinstance(protocol, Mapping)
                and protocol.get("selection") == SELECTED)

    chosen = [r for r in records if selects(r)]
    if not chosen:
        return records
    return [r for r in records if not selects(r)] + best_on_dev(chosen, board)


def selection_lines(table: Table) -> list[str]:
    """One line per (row, task) whose grid point was selected: which, and on what dev mean."""
    lines = []
    for row in table.rows:
        for task, chosen in sorted(row.selected.items()):
            point = point_text(chosen["point"]) or "the only point"
            lines.append(f"{row.label} {task}: {point} (dev mean {chosen['dev']:.4g} over "
                         f"{chosen['n']} values, best of {chosen['of']} points)")
    return lines
