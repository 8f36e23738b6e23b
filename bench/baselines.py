"""Reference rows computed from the data alone, with no training, so every score on a board is read
against chance: for each task the board's runs used, its family's ``baseline`` (classification:
the majority class of the training labels; regression: the mean score) on the same eval data.

A baseline is a record like any other, marked ``baseline: true`` and labelled ``BASELINE_LABEL``,
so the leaderboard aggregates and renders it with no special case beyond the mark; one that
cannot be computed from records that are not as expected is a failed record, which the board
lists with its error, never a board that stops.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from omegaconf import OmegaConf

from bench.run import task_family
from datamodules.errors import PlmbenchError

BASELINE_LABEL = "baseline (no training)"
#: what the data of a task's baseline depends on; runs that agree on these share one baseline
DATA_KEYS = ("name", "dataset", "config", "splits", "label_field", "num_labels", "metrics",
             "max_train_samples", "max_eval_samples", "family", "board", "columns")


def baseline_records(records: Iterable[Mapping], board: str) -> list[dict]:
    """One baseline record per distinct task data among the board's finished runs."""
    tasks: dict[str, dict] = {}
    for record in records:
        task = (record.get("config") or {}).get("task")
        if record.get("board") != board or record.get("status") != "ok" or not task:
            continue
        if record.get("baseline") or not isinstance(task.get("family"), Mapping):
            continue
        data = {key: task.get(key) for key in DATA_KEYS}
        tasks.setdefault(json.dumps(data, sort_keys=True), dict(task))
    made = []
    for key, task in sorted(tasks.items()):
        outcome: dict = {"status": "ok", "error": None}
        try:
            outcome["metrics"] = task_family(OmegaConf.create(task)).baseline(task)
        except PlmbenchError:  # data gone since the runs: no reference row for this task
            outcome["metrics"] = None
        except Exception as err:  # noqa: BLE001 - a board lists it, it never stops the board
            error = " ".join(f"{type(err).__name__}: {err}".split())
            outcome = {"status": "failed", "error": f"the baseline could not be computed: {error}"}
        if outcome["status"] == "ok" and outcome["metrics"] is None:
            continue
        made.append({
            **outcome, "baseline": True, "board": board, "task": task["name"],
            "label": BASELINE_LABEL, "model": BASELINE_LABEL, "seed": 0,
            "protocol_hash": "baseline", "config": {"task": task},
            "run_dir": f"baseline of {task['name']}", "finished_at": key,
        })
    return made
