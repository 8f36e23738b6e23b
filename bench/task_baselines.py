"""A task's reference rows with no training, as a record keeps them: its family's ``baselines``
(classification: the majority class of the training labels; regression: the mean score; spoiler
detection adds a TF-IDF + logistic-regression classifier, under its own name) on the task's eval
data, with the digest of the gold labels they scored per eval split (``bench/eval_sets.py``).

A run computes them when it runs (``bench/run/execute.py``) and keeps them in its record; a board
(``bench/boards/baselines.py``) reads them back, and computes them from the data as it reads now
(``computed``) only for records written before runs kept them. Both sides import this module,
which sits at bench/'s root for that reason.
"""
from __future__ import annotations

from collections.abc import Mapping

from omegaconf import OmegaConf

from bench.eval_sets import label_pairs_digest
from datamodules.errors import PlmbenchError
from datamodules.predictions import label_text, submission_vocabulary


def of_task(family, task: Mapping) -> dict | None:
    """What a run keeps of its task's baselines (``record["baselines"]``): each row's name (None:
    the majority class or mean score, ``bench.boards.baselines.BASELINE_LABEL``) and metrics per
    eval split, and the digest of the gold labels they scored; None where the family has none."""
    rows = family.baselines(task)
    if not rows:
        return None
    return {"rows": [{"name": name, "metrics": metrics} for name, metrics in rows.items()],
            "gold": _gold(task, family.eval_labels(task))}


def computed(task: Mapping) -> dict:
    """The baselines of a task whose runs kept none, from the data as it reads now: no rows where
    the data is gone, an ``error`` where it cannot be computed."""
    from bench.task_family import task_family  # the family's modules (torch): only when needed

    try:
        return of_task(task_family(OmegaConf.create(task)), task) or {"rows": []}
    except PlmbenchError:  # data gone since the runs: no reference row for this task
        return {"rows": []}
    except Exception as err:  # noqa: BLE001 - a board lists it, it never stops the board
        error = " ".join(f"{type(err).__name__}: {err}".split())
        return {"error": f"the baseline could not be computed: {error}"}


def _gold(task: Mapping, labels: Mapping[str, list] | None) -> dict[str, str] | None:
    """Per eval split, the digest of the gold labels the baseline scored, written as a run's
    predictions file writes them (``datamodules/predictions.py``); None where unknown."""
    if labels is None:
        return None
    vocabulary = submission_vocabulary(task)
    return {split: label_pairs_digest((i, label_text(value, vocabulary))
                                      for i, value in enumerate(values))
            for split, values in labels.items()}
