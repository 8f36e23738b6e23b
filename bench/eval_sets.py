"""Which examples a run was scored on: a board ranks only runs scored on the same examples.

A score is a function of the model and of the examples it is read on: a run capped at 16 dev
examples and one read on 128 (``task.max_eval_samples``), or two runs made before and after the
data mirror changed, are not comparable, however alike their columns look. Every record says
what it was scored on, in two parts, and together they name its evaluation set per task
(``eval_set``):

- ``config``: the keys of its task config that say where the eval examples come from
  (``SOURCE_KEYS``: the dataset, its config and hub id, the eval splits), and ``caps``, those
  that choose among them (``CAP_KEYS``: ``max_eval_samples`` ...);
- ``gold``: per eval split, a digest of the gold side of its predictions file: the (index, gold
  label) pairs of a GLUE-style TSV, the example and gold fields of each JSONL row
  (``GOLD_FIELDS``: ids, tokens, references; never what the run predicted or retrieved), the
  question ids of a SQuAD JSON. Not the record's ``data`` fingerprints: they hash the
  tokenized splits, so two models with different tokenizers on the same examples have
  different ones. A record with no predictions file of its eval splits (older records,
  unscored splits) has ``gold`` None, which agrees with any digest of the same ``config``.

Where both records know their gold digests, the digests say whether the examples are the same,
whatever the caps were spelled as (the whole dev set asked for as its size and as null is one
set); where one does not, the caps must be equal too.

``sections`` splits a board's records into groups whose rows agree on every task's
evaluation set: each group is a board of its own (``bench/boards/sections.py``), with the
baseline computed on its own examples, and no row is ranked against a row of another.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.record import Record

#: the task config keys that say where a run's eval examples come from
SOURCE_KEYS = ("dataset", "config", "hub_id")
#: those that choose among them (how many, which documents or questions)
CAP_KEYS = ("max_eval_samples", "eval_documents", "eval_examples", "questions")
#: JSONL fields of the example and its gold side (not what the run predicted or retrieved)
GOLD_FIELDS = ("id", "idx", "index", "tokens", "gold", "label", "reference", "references",
               "question", "source")


@dataclass(frozen=True)
class EvalSet:
    """One task's evaluation set: where its examples come from (JSON), the caps that chose
    among them (JSON) and its gold digest (None: unknown). Two are one set (``==``, ``hash``)
    by their digests where known, else by their caps."""

    config: str
    gold: str | None = None
    caps: str = "{}"

    @property
    def identity(self) -> tuple:
        return (self.config, "gold", self.gold) if self.gold else (self.config, "caps", self.caps)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EvalSet) and self.identity == other.identity

    def __hash__(self) -> int:
        return hash(self.identity)

    def agrees(self, other: EvalSet) -> bool:
        """The same examples as far as both records can tell: the same gold digests where both
        know theirs, else the same caps (and no digests that differ)."""
        if self.config != other.config:
            return False
        if self.gold is not None and other.gold is not None:
            return self.gold == other.gold
        return self.caps == other.caps

    def merged(self, other: EvalSet) -> EvalSet:
        return EvalSet(self.config, self.gold or other.gold, self.caps)

    def describe(self) -> str:
        """"validation, max_eval_samples=16", for a note on the board."""
        config = {**json.loads(self.config), **json.loads(self.caps)}
        splits = ", ".join(config.pop("splits", None) or []) or "its eval splits"
        caps = [f"{key}={value}" for key, value in config.items()
                if value is not None and key not in ("dataset", "config", "hub_id")]
        source = "/".join(str(config[k]) for k in ("dataset", "config") if config.get(k))
        data = [f"data {source}"] if source else []
        gold = [f"gold labels {self.gold[:8]}"] if self.gold else []
        return "; ".join([splits, *(caps or ["every example"]), *data, *gold])


def digest(lines: Iterable[str]) -> str:
    sha = hashlib.sha256()
    for line in lines:
        sha.update(line.encode("utf-8"))
        sha.update(b"\n")
    return sha.hexdigest()[:16]


def label_pairs_digest(pairs: Iterable[tuple[int, str]]) -> str:
    """The digest of (index, gold label text) pairs, as a GLUE-style TSV holds them."""
    return digest(f"{index}\t{label}" for index, label in sorted(pairs))


def _file_gold(path: Path) -> str | None:
    """The digest of the gold side of one predictions file; None where it has none."""
    try:
        if path.suffix == ".tsv":
            with path.open(newline="", encoding="utf-8") as handle:
                rows = csv.DictReader(handle, delimiter="\t")
                if "label" not in (rows.fieldnames or ()):
                    return None  # an unlabelled split's submission file
                return label_pairs_digest((int(row["index"]), row["label"]) for row in rows)
        if path.suffix == ".json":  # SQuAD: {question id: answer}
            return digest(sorted(json.loads(path.read_text(encoding="utf-8"))))
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line]
        gold = [{k: row[k] for k in GOLD_FIELDS if k in row} for row in rows]
        if not any(gold):
            return None  # nothing of the examples' own: named by its config alone
        return digest(json.dumps(row, sort_keys=True) for row in gold)
    except (OSError, ValueError, KeyError, AttributeError):
        return None  # unreadable: named by its config alone


def run_dir_of(record: Record) -> Path | None:
    """Where a record's files are: beside its record.json, else its recorded run directory."""
    return record.home


def eval_set(record: Record) -> EvalSet:
    """The evaluation set of a record (module docstring). A baseline record carries its gold
    digest (``bench/boards/baselines.py``: from the data it was computed on), and so does a
    record read through the board's index (``bench/board_index.py``: its files' digests, kept)."""
    task = record.task_config
    splits = eval_splits(task)
    source = {key: task.get(key) for key in SOURCE_KEYS if task.get(key) is not None}
    key = json.dumps({**source, "splits": splits}, sort_keys=True, default=str)
    caps = json.dumps({k: task.get(k) for k in CAP_KEYS if task.get(k) is not None},
                      sort_keys=True, default=str)
    golds = record.gold if isinstance(record.gold, Mapping) else file_golds(record)
    if golds is None:
        return EvalSet(key, None, caps)  # not every eval split's gold side known: by its config
    return EvalSet(key, digest(f"{s}\t{d}" for s, d in sorted(golds.items())), caps)


def eval_splits(task: Mapping) -> list:
    """The eval splits a task config names (none where it names them in no known form)."""
    splits = (task.get("splits") or {}).get("eval") if isinstance(task.get("splits"),
                                                                  Mapping) else None
    return [splits] if isinstance(splits, str) else list(
        splits if isinstance(splits, list | tuple) else [])


def gold_files(record: Record) -> dict[str, Path] | None:
    """Per eval split, the predictions file whose gold side names the examples; None where a
    split has none listed (or the record has no run directory)."""
    splits, files, where = eval_splits(record.task_config), record.predictions, run_dir_of(record)
    if not splits or not isinstance(files, Mapping) or where is None or not set(splits) <= set(
            files):
        return None
    return {split: where / str(files[split]) for split in splits}


def file_golds(record: Record) -> dict[str, str] | None:
    """Per eval split, the digest of the gold side of its predictions file; None where some
    split's is unknown (no file listed, unreadable, no gold side)."""
    files = gold_files(record)
    golds = {split: _file_gold(path) for split, path in (files or {}).items()}
    return None if files is None or None in golds.values() else golds


@dataclass
class Section:
    """Records whose rows agree on each task's evaluation set (``evals``)."""

    evals: dict[str, EvalSet]
    records: list[Record]

    def agrees(self, evals: Mapping[str, EvalSet]) -> bool:
        return all(self.evals[task].agrees(e) for task, e in evals.items() if task in self.evals)

    def merge(self, evals: Mapping[str, EvalSet]) -> None:
        for task, e in evals.items():
            self.evals[task] = self.evals[task].merged(e) if task in self.evals else e


def sections(records: list[Record], row_of, is_run) -> list[Section]:
    """The runs' records (``is_run``: ok, on the board, no baseline) split into sections; a row
    (``row_of(record)``) whose runs of one task were scored on several sets is one row per set.
    Sections are formed greedily, the rows with the most tasks first (then by row), each joining
    the first section it agrees with, so the same records give the same sections. Other
    records (baselines, failures) are not placed here (``place``)."""
    units: dict[tuple, dict[str, EvalSet]] = defaultdict(dict)
    keys: dict[int, tuple] = {}
    per_task: dict[tuple, list[EvalSet]] = defaultdict(list)
    runs = [(i, r) for i, r in enumerate(records) if is_run(r)]
    evals = {i: eval_set(r) for i, r in runs}
    for i, r in runs:
        found = per_task[row_of(r), r.task]
        if not any(e == evals[i] for e in found):
            found.append(evals[i])
    for found in per_task.values():
        found.sort(key=lambda e: (e.config, e.gold or ""))
    for i, r in runs:
        row = row_of(r)
        unit = (row, per_task[row, r.task].index(evals[i]))
        units[unit][r.task] = evals[i]
        keys[i] = unit
    found_sections: list[Section] = []
    where: dict[tuple, Section] = {}
    for unit in sorted(units, key=lambda u: (-len(units[u]), repr(u))):
        section = next((s for s in found_sections if s.agrees(units[unit])), None)
        if section is None:
            section = Section({}, [])
            found_sections.append(section)
        section.merge(units[unit])
        where[unit] = section
    for i, r in runs:
        where[keys[i]].records.append(r)
    return found_sections


def place(record: Record, found: list[Section]) -> list[Section]:
    """The sections a baseline or failed record belongs to: those whose set of its task agrees
    with its own (a failure, whose predictions were never written, by its config alone)."""
    own = eval_set(record)
    return [s for s in found if record.task in s.evals and s.evals[record.task].agrees(own)]
