"""Baseline rows on a board, so every score is read against chance: for each task the board's
runs used, the task's reference rows with no training (``bench/task_baselines.py``: the majority
class of the training labels, labelled ``BASELINE_LABEL``; the mean score; a TF-IDF classifier
under its own name) on the same eval data.

A run keeps them in its record (``record["baselines"]``), so a board is a pure function of
records (DESIGN.md contract 8): the same records board the same bytes on a machine whose data
mirror lacks the task, and a board loads no task data, no torch. Only records written before runs
kept them get their baseline computed from the data as it reads when the board is built, which
may no longer be the data the runs were scored on (a re-mirrored dataset).

Either way a baseline carries ``gold``: per eval split, the digest of the gold labels it scored
(``bench/eval_sets.py``), the same digest a run's predictions file gives; a board shows a
baseline only beside runs whose labels match, and says so where none do
(``bench/boards/sections.py``).

A baseline is a record like any other, marked ``baseline: true`` and labelled by its row name,
so the leaderboard aggregates and renders it with no special case beyond the mark; one that
cannot be computed (from records that are not as expected) is a failed record, which the board
lists with its error, never a board that stops.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from bench.record import Baselines, Record, as_records
from bench.task_baselines import computed

BASELINE_LABEL = "baseline (no training)"
#: what the data of a task's baseline depends on; runs that agree on these share one baseline
DATA_KEYS = ("name", "dataset", "config", "splits", "label_field", "num_labels", "metrics",
             "max_train_samples", "max_eval_samples", "family", "board", "columns", "format",
             "context", "imbalance", "tfidf", "hub_id", "eval_documents", "eval_examples",
             "questions")


def baseline_records(records: Iterable[Record | Mapping], board: str) -> list[Record]:
    """One baseline record per distinct task data among the board's finished runs: the one the
    runs of that data kept (where they kept different ones, each, labelled "[i of n kept]"),
    else (records from before runs kept them) computed from the data."""
    tasks: dict[str, dict] = {}
    kept: dict[str, dict[str, Baselines]] = {}  # per task data: each distinct kept baseline
    for record in as_records(records):
        task = record.task_config
        if record.board != board or record.status != "ok" or not task:
            continue
        if record.baseline or not isinstance(task.get("family"), Mapping):
            continue
        key = json.dumps({k: task.get(k) for k in DATA_KEYS}, sort_keys=True)
        tasks.setdefault(key, dict(task))
        if record.has("baselines"):  # a run that kept them, even as None (the family has none)
            stored = record.baselines or Baselines()
            kept.setdefault(key, {}).setdefault(_text(stored), stored)
    made = []
    for key, task in sorted(tasks.items()):
        versions = [kept[key][text] for text in sorted(kept.get(key, {}))] or [
            Baselines.of(computed(task), f"the baselines of {key}")]
        for i, stored in enumerate(versions, 1):
            # runs that kept different baselines of one task's data (the data changed between
            # them): each is a row of its own, named so, never one silently for the others
            which = f" [{i} of {len(versions)} kept]" if len(versions) > 1 else ""
            if stored.error is not None:
                made.append(_baseline(task, board, BASELINE_LABEL + which, f"{key}{which}",
                                      status="failed", error=stored.error))
                continue
            for row in stored.rows:
                label = (BASELINE_LABEL if row.name is None else row.name) + which
                made.append(_baseline(task, board, label, f"{key}{which}", status="ok",
                                      metrics=row.metrics, gold=stored.gold or None))
    return made


def _text(stored: Baselines) -> str:
    """A kept baseline as text, what tells two apart."""
    return json.dumps({"rows": [[r.name, r.metrics] for r in stored.rows],
                       "gold": stored.gold, "error": stored.error}, sort_keys=True, default=str)


def _baseline(task: Mapping, board: str, label: str, key: str, **outcome) -> Record:
    """A baseline record of ``task``: its ``outcome`` (status and metrics, or error)."""
    return Record(**outcome, baseline=True, board=board, task=task["name"], label=label,
                  model=label, seed=0, protocol_hash="baseline", config={"task": task},
                  run_dir=f"{label} of {task['name']}", finished_at=key)
