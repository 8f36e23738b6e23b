"""Best-on-dev selection for a hyperparameter grid (``conf/experiment/glue_paper.yaml``): the
BERT paper's protocol (Devlin et al. 2019, §4.1) fine-tunes every grid point and reports, per
task, the point that did best on the dev set.

Grid points differ in their protocol hash, so without selection each is a row of its own. This
keeps, per (label, task), the records of the point whose mean over seeds of the task's scoring
columns is best, and gives them one protocol, ``best-on-dev``, so a model is one row again.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping

from bench.board_config import Board
from bench.leaderboard import _record_columns, lookup

SELECTED = "best-on-dev"


def best_on_dev(records: Iterable[Mapping], board: Board) -> list[Mapping]:
    """The board's records reduced to the best grid point per (label, task); others pass as is."""
    records = list(records)
    points: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    directions: dict[tuple, bool] = {}
    for record in records:
        if record.get("status") != "ok" or record.get("board") != board.name:
            continue
        key = (record.get("label"), record.get("task"))
        for column in _record_columns(record, board):
            value = lookup(record, column.value)
            if column.score and value is not None:
                points[key][record.get("protocol_hash")].append(value)
                directions[key] = column.higher_is_better
    best = {}
    for key, by_protocol in points.items():
        sign = 1 if directions[key] else -1
        best[key] = max(sorted(by_protocol), key=lambda p: sign * statistics.mean(by_protocol[p]))
    kept = []
    for record in records:
        key = (record.get("label"), record.get("task"))
        if key not in best or record.get("board") != board.name:
            kept.append(record)
        elif record.get("protocol_hash") == best[key]:
            kept.append({**record, "protocol_hash": SELECTED})
    return kept
