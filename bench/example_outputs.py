"""A run's per-example outputs, read back from the prediction files it wrote (Design contract
10), as arrays a paired bootstrap resamples (``bench/boards/bootstrap.py``).

A reader turns one eval split's file into ``Outputs``: the examples' ids (what pairs two runs'
rows) and per-example arrays from which each of the split's metrics is recomputed on any
resample of the rows (a [B, n] matrix of row indices gives B values at once):

- GLUE-style TSV (``index, prediction, label``, ``datamodules/predictions.py``): accuracy, F1 of
  class 1, Matthews' correlation (from the confusion counts of each resample) and, for scores,
  Pearson and Spearman; a text-to-text generation outside the label set counts as a wrong label
  (STS-B: the score -1), as ``lit_models/families/text_to_text.py`` scores it;
- tagging JSONL (tokens, gold, predicted tags): entity precision, recall and F1 micro-averaged
  from each sentence's counts of correct, predicted and gold entities (seqeval's entities);
- generation JSONL (prediction, reference): the ROUGE F-measures, means of per-example scores
  (``lit_models/metrics/rouge.py``);
- SQuAD JSON ({id: answer}, gold answers read from the task's data): exact match and F1, means
  of per-question scores x 100 (``lit_models/metrics/squad.py``);
- open-domain QA JSONL (prediction, references): exact match x 100 under the task's match rule
  (SQuAD-normalised strings or regexes, ``lit_models/metrics/exact_match.py``).

Every metric these recompute equals the one the run recorded (tested), so a bootstrap
resamples exactly the number on the board. A file of another kind is a PlmbenchError naming it.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.record import Record, as_record
from datamodules.errors import PlmbenchError

#: a metric on resampled rows: (the split's arrays, [B, n] row indices) -> [B] values
Metric = Callable[[Mapping[str, np.ndarray], np.ndarray], np.ndarray]
#: STS-B's score of a generated text that is no number (T5's string_to_float default)
NOT_A_SCORE = -1.0


@dataclass
class Outputs:
    """One run's outputs on one eval split: ``ids`` in row order, the arrays metrics read."""

    ids: np.ndarray
    data: dict[str, np.ndarray]
    metrics: dict[str, Metric] = field(default_factory=dict)
    #: the predictions as the file holds them, one per row: what "identical predictions"
    #: compares (two different invalid generations both read as a wrong class, scoring alike)
    raw: np.ndarray | None = None

    def metric(self, name: str, rows: np.ndarray) -> np.ndarray:
        if name not in self.metrics:
            raise PlmbenchError(f"metric {name!r} cannot be recomputed from the predictions "
                                f"files (known here: {', '.join(sorted(self.metrics))})")
        return self.metrics[name](self.data, rows)

    def aligned(self, ids: np.ndarray) -> Outputs:
        """These outputs with rows in the order of ``ids`` (the same examples)."""
        order = np.argsort(self.ids, kind="stable")
        at = order[np.searchsorted(self.ids, ids, sorter=order)]
        return Outputs(ids, {k: v[at] for k, v in self.data.items()}, self.metrics,
                       None if self.raw is None else self.raw[at])


def _mean(key: str, scale: float = 1.0) -> Metric:
    return lambda data, rows: scale * data[key][rows].mean(1)


def _f1_from(tp: np.ndarray, predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """2 tp / (predicted + gold), 0 where both are 0 (torchmetrics' and seqeval's zero_division)."""
    total = predicted + gold
    return np.divide(2 * tp, total, out=np.zeros(tp.shape), where=total > 0)


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson correlation of [B, n] arrays; 0 for a constant row."""
    x = x - x.mean(1, keepdims=True)
    y = y - y.mean(1, keepdims=True)
    denominator = np.sqrt((x * x).sum(1) * (y * y).sum(1))
    return np.divide((x * y).sum(1), denominator, out=np.zeros(len(x)), where=denominator > 0)


def _counts(predicted: np.ndarray, gold: np.ndarray, rows: np.ndarray, label: int) -> tuple:
    return ((predicted[rows] == label).sum(1), (gold[rows] == label).sum(1))


def _matthews(data: Mapping[str, np.ndarray], rows: np.ndarray, num_labels: int) -> np.ndarray:
    """Multi-class MCC (Gorodkin 2004) from each resample's confusion counts; 0 where a
    denominator is 0 (scikit-learn's convention, e.g. a constant prediction)."""
    predicted, gold = data["prediction"], data["label"]
    n = rows.shape[1]
    correct = (predicted[rows] == gold[rows]).sum(1).astype(float)
    cov_pp = cov_gg = cov_pg = 0.0
    for label in range(num_labels):
        p, g = (c.astype(float) for c in _counts(predicted, gold, rows, label))
        cov_pp, cov_gg, cov_pg = cov_pp + p * p, cov_gg + g * g, cov_pg + p * g
    numerator = correct * n - cov_pg
    denominator = np.sqrt((n * n - cov_pp) * (n * n - cov_gg))
    return np.divide(numerator, denominator, out=np.zeros(len(rows)), where=denominator > 0)


def _binary_f1(data: Mapping[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    predicted, gold = data["prediction"][rows], data["label"][rows]
    tp = ((predicted == 1) & (gold == 1)).sum(1)
    return _f1_from(tp, (predicted == 1).sum(1), (gold == 1).sum(1))


def _spearman(data: Mapping[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata  # 0.5 s of imports: only where a correlation is ranked

    return _pearson(rankdata(data["prediction"][rows], axis=1),
                    rankdata(data["label"][rows], axis=1))


def _macro_f1(data: Mapping[str, np.ndarray], rows: np.ndarray, num_labels: int) -> np.ndarray:
    """The mean of the per-class F1s over the classes a resample predicts or holds (torchmetrics'
    macro average, which leaves out classes with no true positive, false positive or negative)."""
    predicted, gold = data["prediction"][rows], data["label"][rows]
    total, classes = np.zeros(len(rows)), np.zeros(len(rows))
    for label in range(num_labels):
        p, g = predicted == label, gold == label
        tp = (p & g).sum(1)
        seen = (p | g).sum(1) > 0
        total += np.where(seen, _f1_from(tp, p.sum(1), g.sum(1)), 0.0)
        classes += seen
    return np.divide(total, classes, out=np.zeros(len(rows)), where=classes > 0)


def classification(num_labels: int) -> dict[str, Metric]:
    """The metrics of class ids in ``prediction`` and ``label``, as lit_models/metrics names
    them: ``f1`` of class 1 for two classes (macro beyond), ``micro_f1`` (single-label: the
    accuracy), ``macro_f1``."""
    def accuracy(data, rows):
        return (data["prediction"][rows] == data["label"][rows]).mean(1)

    def macro(data, rows):
        return _macro_f1(data, rows, num_labels)

    return {"accuracy": accuracy, "micro_f1": accuracy, "macro_f1": macro,
            "f1": _binary_f1 if num_labels == 2 else macro,
            "matthews": lambda data, rows: _matthews(data, rows, num_labels)}


REGRESSION: dict[str, Metric] = {
    "pearson": lambda data, rows: _pearson(data["prediction"][rows], data["label"][rows]),
    "spearman": _spearman,
}


def read_tsv(path: Path, task: Mapping) -> Outputs:
    """A GLUE-schema TSV with gold labels: class ids (text outside the vocabulary: a wrong class,
    the gold one + 1) or scores (text that is no number: -1)."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    if not rows or "label" not in rows[0]:
        raise PlmbenchError(f"{path} has no gold label column (an unlabelled split's "
                            "submission file): it cannot be scored")
    ids = np.array([int(row["index"]) for row in rows])
    if task["num_labels"] == 1:
        def score(text: str) -> float:
            try:
                return float(text)
            except ValueError:
                return NOT_A_SCORE
        data = {"prediction": np.array([score(r["prediction"]) for r in rows]),
                "label": np.array([float(r["label"]) for r in rows])}
        return Outputs(ids, data, dict(REGRESSION), _raw(r["prediction"] for r in rows))
    vocabulary = list(task.get("submission_labels") or task["label_names"])
    index = {name: i for i, name in enumerate(vocabulary)}
    gold = np.array([index[row["label"]] for row in rows])
    predicted = np.array([index.get(row["prediction"], -1) for row in rows])
    predicted = np.where(predicted < 0, (gold + 1) % len(vocabulary), predicted)
    return Outputs(ids, {"prediction": predicted, "label": gold}, classification(len(vocabulary)),
                   _raw(row["prediction"] for row in rows))


def _raw(predictions) -> np.ndarray:
    """The predictions as text, one per row (``Outputs.raw``)."""
    return np.array([p if isinstance(p, str) else json.dumps(p) for p in predictions],
                    dtype=object)


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def read_tagging(rows: list[dict]) -> Outputs:
    """Per sentence: entities right, predicted and gold (seqeval's, as the run scored them)."""
    from seqeval.metrics.sequence_labeling import get_entities

    counts = []
    for row in rows:
        gold, predicted = set(get_entities(row["gold"])), set(get_entities(row["predicted"]))
        counts.append((len(gold & predicted), len(predicted), len(gold)))
    tp, predicted, gold = np.array(counts, dtype=float).reshape(-1, 3).T

    def ratio(numerator: str, denominator: str) -> Metric:
        def metric(data, rows):
            top, bottom = data[numerator][rows].sum(1), data[denominator][rows].sum(1)
            return np.divide(top, bottom, out=np.zeros(len(rows)), where=bottom > 0)
        return metric

    metrics = {"precision": ratio("tp", "predicted"), "recall": ratio("tp", "gold"),
               "f1": lambda data, rows: _f1_from(data["tp"][rows].sum(1),
                                                 data["predicted"][rows].sum(1),
                                                 data["gold"][rows].sum(1))}
    return Outputs(np.arange(len(rows)), {"tp": tp, "predicted": predicted, "gold": gold},
                   metrics, _raw(row["predicted"] for row in rows))


def read_generations(rows: list[dict]) -> Outputs:
    """Per example: its ROUGE-1/2/L/Lsum F-measures (the run's scores are their means)."""
    from lit_models.metrics.rouge import KEYS, Rouge

    scores = {key: np.zeros(len(rows)) for key in KEYS}
    for i, row in enumerate(rows):
        rouge = Rouge()
        rouge.update([row["prediction"]], [row["reference"]])
        for key, value in rouge.compute().items():
            scores[key][i] = float(value)
    ids = np.array([str(row.get("id", i)) for i, row in enumerate(rows)])
    return Outputs(ids, scores, {key: _mean(key) for key in KEYS},
                   _raw(row["prediction"] for row in rows))


def read_open_qa(rows: list[dict], task: Mapping) -> Outputs:
    """Per question: whether the answer matches a reference, as the run scored it."""
    from lit_models.metrics.exact_match import exact_match

    match = (task.get("questions") or {}).get("match", "string")
    hits = np.array([float(exact_match(row["prediction"], row["references"], match))
                     for row in rows])
    ids = np.array([str(row["id"]) for row in rows])
    return Outputs(ids, {"exact_match": hits}, {"exact_match": _mean("exact_match", 100.0)},
                   _raw(row["prediction"] for row in rows))


def read_squad(path: Path, task: Mapping, split: str) -> Outputs:
    """Per question of the predictions JSON: exact match and F1 against the task's gold answers
    (the data the run read, capped as it was)."""
    from datamodules.squad import load_examples
    from lit_models.metrics.squad import question_scores, v2_references

    answers = json.loads(path.read_text(encoding="utf-8"))
    examples = load_examples(task, split, task.get("max_eval_samples"), train=False)
    gold = {row[task["id_field"]]: row[task["answers_field"]]["text"] for row in examples}
    missing = sorted(set(answers) - set(gold))
    if missing:
        raise PlmbenchError(f"{path}: questions {missing[:3]} are not in {task['name']} {split} "
                            "as the task config reads it; was the mirror changed since the run?")
    ids = np.array(sorted(answers))
    references = [gold[i] for i in ids]
    if task.get("version_2_with_negative"):
        references = [v2_references(r) for r in references]
    em, f1 = question_scores([answers[i] for i in ids], references)
    return Outputs(ids, {"exact_match": em, "f1": f1},
                   {"exact_match": _mean("exact_match", 100.0), "f1": _mean("f1", 100.0)},
                   _raw(answers[i] for i in ids))


def read_outputs(record: Record | Mapping, split: str) -> Outputs:
    """The per-example outputs of ``split`` in the predictions file ``record`` lists for it."""
    record = as_record(record)
    files = record.predictions
    where = record.run_dir or f"{record.task} seed {record.seed}"
    if split not in files:
        raise PlmbenchError(f"run {where} wrote no predictions for split {split!r} (a run "
                            "before predictions files were written, or an unscored split): re-run "
                            "it with `plmbench rerun <its record>`")
    path = (record.home or Path()) / files[split]
    if not path.is_file():
        raise PlmbenchError(f"{path} is missing: the run's predictions are needed for the "
                            "paired bootstrap; re-run it with `plmbench rerun`")
    task = record.task_config
    while isinstance(task.get("target"), Mapping):  # a pruned or compressed run: its task's labels
        task = task["target"]
    if path.suffix == ".tsv":
        return read_tsv(path, task)
    if path.suffix == ".json":
        return read_squad(path, task, split)
    rows = _read_jsonl(path)
    if rows and {"gold", "predicted"} <= set(rows[0]):
        return read_tagging(rows)
    if rows and {"prediction", "reference"} <= set(rows[0]):
        return read_generations(rows)
    if rows and {"prediction", "references"} <= set(rows[0]):
        return read_open_qa(rows, task)
    raise PlmbenchError(f"{path}: predictions of this kind cannot be resampled per example "
                        "(known: GLUE TSV, tagging, generation and open-QA JSONL, SQuAD JSON)")
