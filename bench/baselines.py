"""Reference rows computed from the data alone, with no run, so every score on a board is read
against chance: for each task the board's runs used, its family's ``baselines`` (classification:
the majority class of the training labels, labelled ``BASELINE_LABEL``; regression: the mean
score; spoiler detection adds a TF-IDF + logistic-regression classifier, under its own name) on
the same eval data.

A baseline is a record like any other, marked ``baseline: true`` and labelled by its row name,
so the leaderboard aggregates and renders it with no special case beyond the mark; one that
cannot be computed (from records that are not as expected) is a failed record, which the board
lists with its error, never a board that stops.

A baseline is computed from the data as it reads when the board is built, which may no longer be
the data the runs were scored on (a re-mirrored dataset). So each carries ``gold``: per eval
split, the digest of the gold labels it scored (``bench/eval_sets.py``), the same digest a run's
predictions file gives; a board shows a baseline only beside runs whose labels match, and says
so where none do (``bench/board_sections.py``). Records do not hold the training labels a
majority class is taken from, so the baseline cannot yet be a function of the records alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from omegaconf import OmegaConf

from bench.eval_sets import label_pairs_digest
from datamodules.errors import PlmbenchError
from datamodules.predictions import label_text, submission_vocabulary

BASELINE_LABEL = "baseline (no training)"
#: what the data of a task's baseline depends on; runs that agree on these share one baseline
DATA_KEYS = ("name", "dataset", "config", "splits", "label_field", "num_labels", "metrics",
             "max_train_samples", "max_eval_samples", "family", "board", "columns", "format",
             "context", "imbalance", "tfidf", "hub_id", "eval_documents", "eval_examples",
             "questions")


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
    if tasks:  # a family loads its data and its modules (torch, Lightning): only when needed
        from bench.run import task_family
    for key, task in sorted(tasks.items()):
        try:
            family = task_family(OmegaConf.create(task))
            rows = family.baselines(task)
            gold = _gold(task, family.eval_labels(task)) if rows else None
        except PlmbenchError:  # data gone since the runs: no reference row for this task
            rows = {}
        except Exception as err:  # noqa: BLE001 - a board lists it, it never stops the board
            error = " ".join(f"{type(err).__name__}: {err}".split())
            made.append(_baseline(task, board, BASELINE_LABEL, key, status="failed",
                                  error=f"the baseline could not be computed: {error}"))
            continue
        for name, metrics in rows.items():
            label = BASELINE_LABEL if name is None else name
            made.append(_baseline(task, board, label, key, status="ok", metrics=metrics,
                                  **({"gold": gold} if gold else {})))
    return made


def _gold(task: Mapping, labels: Mapping[str, list] | None) -> dict[str, str] | None:
    """Per eval split, the digest of the gold labels the baseline scored, written as a run's
    predictions file writes them (``datamodules/predictions.py``); None where unknown."""
    if labels is None:
        return None
    vocabulary = submission_vocabulary(task)
    return {split: label_pairs_digest((i, label_text(value, vocabulary))
                                      for i, value in enumerate(values))
            for split, values in labels.items()}


def _baseline(task: Mapping, board: str, label: str, key: str, **outcome) -> dict:
    """A baseline record of ``task``: its ``outcome`` (status and metrics, or error)."""
    return {**outcome, "baseline": True, "board": board, "task": task["name"], "label": label,
            "model": label, "seed": 0, "protocol_hash": "baseline", "config": {"task": task},
            "run_dir": f"{label} of {task['name']}", "finished_at": key}
