"""``plmbench submit glue RESULTS_DIR``: one model's GLUE test-set predictions as the zip that
GLUE's server (gluebenchmark.com; Wang et al. 2019) scores; ``plmbench submit superglue``: its
SuperGLUE diagnostics the same way (``AX-b.jsonl``, ``AX-g.jsonl``: one ``{"idx": i, "label":
"entailment"|"not_entailment"}`` a line, as super.gluebenchmark.com takes them, predicted by the
``superglue/axb`` and ``superglue/axg`` runs of an RTE model).

The zip holds one TSV per task at its root, named as the server expects (``CoLA.tsv``,
``SST-2.tsv``, ``MRPC.tsv``, ``STS-B.tsv``, ``QQP.tsv``, ``MNLI-m.tsv``, ``MNLI-mm.tsv``,
``QNLI.tsv``, ``RTE.tsv``, ``WNLI.tsv``, ``AX.tsv``; the names jiant's and T5's submission
scripts write), each with the header ``index<TAB>prediction`` and one row per test example in
index order: ``0``/``1`` for CoLA, SST-2, MRPC, QQP and WNLI, label names for the inference tasks
(entailment / not_entailment; entailment / neutral / contradiction for MNLI and AX), STS-B's
score clipped to [0, 5].

Where the rows come from: the runs' ``predictions/<split>.tsv`` of the test splits (a GLUE run
with ``task.predict_splits=[test]``; MNLI ``[test_matched,test_mismatched]``; AX predicts its test
split by itself), read in either vocabulary (GLUE's, or the task's ``label_names``), checked for
GLUE's row count and indices 0..n-1 and turned into GLUE's vocabulary. Of several runs of a task
(seeds, grid points) the one best on dev is taken, by the mean of the task's scoring board
columns (ties: the lowest seed); AX is taken from the run that started from the chosen MNLI run's
checkpoint where there is one. Every file's run and the reason it was picked are printed and
written beside the zip (``<zip>.sources.json``).

A task without test predictions is refused in one line naming it, since GLUE's server scores
complete submissions; ``--allow-missing`` writes the zip without those files and says which are
missing.
"""

from __future__ import annotations

import csv
import math
import sys
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.boards.config import get_board
from bench.boards.table import _record_columns, lookup
from bench.record import Record, as_records, records_in
from datamodules import strict_json
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_path, atomic_write_text
from datamodules.init_from import InitFrom

BINARY = ("0", "1")
NLI = ("entailment", "not_entailment")
MNLI = ("entailment", "neutral", "contradiction")
#: STS-B's scores lie in [0, 5]; a regression head's outputs are clipped to it
SCORE_RANGE = (0.0, 5.0)


@dataclass(frozen=True)
class Entry:
    """One file of GLUE's submission."""

    file: str  # its name in the zip
    task: str  # the plmbench task that predicts it
    split: str  # the split of that task the predictions are of
    rows: int  # GLUE's test-set size
    vocabulary: tuple[str, ...] | None  # GLUE's labels by class id; None: a score


GLUE = (
    Entry("CoLA.tsv", "glue/cola", "test", 1063, BINARY),
    Entry("SST-2.tsv", "glue/sst2", "test", 1821, BINARY),
    Entry("MRPC.tsv", "glue/mrpc", "test", 1725, BINARY),
    Entry("STS-B.tsv", "glue/stsb", "test", 1379, None),
    Entry("QQP.tsv", "glue/qqp", "test", 390965, BINARY),
    Entry("MNLI-m.tsv", "glue/mnli", "test_matched", 9796, MNLI),
    Entry("MNLI-mm.tsv", "glue/mnli", "test_mismatched", 9847, MNLI),
    Entry("QNLI.tsv", "glue/qnli", "test", 5463, NLI),
    Entry("RTE.tsv", "glue/rte", "test", 3000, NLI),
    Entry("WNLI.tsv", "glue/wnli", "test", 146, BINARY),
    Entry("AX.tsv", "glue/ax", "test", 1104, MNLI),
)
#: SuperGLUE's diagnostics, predicted by an RTE model (the benchmark's other files: not yet)
SUPERGLUE = (
    Entry("AX-b.jsonl", "superglue/axb", "test", 1104, NLI),
    Entry("AX-g.jsonl", "superglue/axg", "test", 356, NLI),
)
HEADER = ("index", "prediction")


@dataclass
class Source:
    """The run a file comes from, and why that one."""

    run_dir: str
    seed: int | None
    reason: str


def _has_predictions(record: Record, split: str) -> bool:
    path = record.predictions.get(split)
    return bool(path) and ((record.home or Path()) / path).is_file()


def dev_score(record: Record) -> float | None:
    """The mean of the task's scoring GLUE-board columns (higher is better), None without."""
    values = []
    for column in _record_columns(record, get_board("glue")):
        value = lookup(record, column.value)
        if column.score and value is not None:
            values.append(value if column.higher_is_better else -value)
    return sum(values) / len(values) if values else None


def _best_on_dev(candidates: list[Record]) -> tuple[Record, str]:
    def key(record):
        score = dev_score(record)
        return (score is None, -(score or 0.0), record.seed or 0, record.run_dir)

    chosen = min(candidates, key=key)
    if len(candidates) == 1:
        return chosen, "the only run"
    score = dev_score(chosen)
    if score is None:
        return chosen, f"none of {len(candidates)} runs has dev scores: the lowest seed"
    seeds = sorted(r.seed for r in candidates)
    return chosen, (f"best on dev of {len(candidates)} runs (seeds {seeds}): mean of its scoring "
                    f"columns {score:.4f}")


def _same_dir(init_from: str | None, run_dir: str) -> bool:
    """Whether ``init_from`` is ``ckpt:`` the run in ``run_dir`` (or its export)."""
    try:
        where = InitFrom.parse(init_from).run_dir() if init_from else None
    except PlmbenchError:  # no checkpoint of a run
        return False
    return where is not None and where.resolve() == Path(run_dir).resolve()


def choose_runs(records: Iterable[Record | Mapping], label: str,
                entries: tuple[Entry, ...] = GLUE) -> dict[str, tuple[Record, Source]]:
    """For each file of ``entries``, the record whose test predictions it takes (the file names
    as keys; a file without a run is absent)."""
    runs: dict[str, list[Record]] = {}
    for record in as_records(records):
        if record.status == "ok" and record.label == label:
            runs.setdefault(record.task, []).append(record)
    chosen: dict[str, tuple[Record, Source]] = {}
    picked_task: dict[str, Record] = {}
    for entry in entries:
        candidates = [r for r in runs.get(entry.task, []) if _has_predictions(r, entry.split)]
        if not candidates:
            continue
        if entry.task in picked_task and picked_task[entry.task] in candidates:
            record, reason = picked_task[entry.task], "the run its other test split comes from"
        elif entry.task == "glue/ax" and "MNLI-m.tsv" in chosen:
            mnli = chosen["MNLI-m.tsv"][1].run_dir
            started = [r for r in candidates
                       if _same_dir(r.config.get("init_from"), mnli)]
            record, reason = (started[0], f"predicted by the chosen MNLI run's checkpoint ({mnli})"
                              ) if started else _best_on_dev(candidates)
        else:
            record, reason = _best_on_dev(candidates)
        picked_task[entry.task] = record
        chosen[entry.file] = (record, Source(record.run_dir, record.seed, reason))
    return chosen


def _glue_value(entry: Entry, value: str, label_names: list[str], where: str) -> str:
    """A prediction file's value in GLUE's vocabulary (a score clipped to [0, 5])."""
    if entry.vocabulary is None:
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise PlmbenchError(f"{where} predicts {value!r}, not a finite score; re-run the task")
        low, high = SCORE_RANGE
        return value if low <= score <= high else f"{min(max(score, low), high):.1f}"
    if value in entry.vocabulary:
        return value
    if value in label_names and label_names.index(value) < len(entry.vocabulary):
        return entry.vocabulary[label_names.index(value)]
    raise PlmbenchError(f"{where} predicts {value!r}, which is none of the server's labels "
                        f"{list(entry.vocabulary)} nor the task's {label_names}; re-run the task")


def submission_rows(entry: Entry, record: Record) -> list[tuple[str, str]]:
    """The (index, prediction) rows of ``entry``'s file from ``record``'s predictions, checked
    for GLUE's row count and indices and in GLUE's vocabulary."""
    path = (record.home or Path()) / record.predictions[entry.split]
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        if not set(HEADER) <= set(reader.fieldnames or ()):
            raise PlmbenchError(f"{path} has columns {reader.fieldnames}, not {list(HEADER)}; "
                                "it is no prediction file of a GLUE-style task")
        rows = list(reader)
    if len(rows) != entry.rows:
        raise PlmbenchError(
            f"{path}: {len(rows)} rows, {entry.file} needs {entry.rows} (the whole test "
            f"split: run {entry.task} without task.max_eval_samples on its test split)")
    try:
        indices = sorted(int(row["index"]) for row in rows)
    except ValueError:
        raise PlmbenchError(f"{path}: an index that is no integer; re-run the task") from None
    if indices != list(range(entry.rows)):
        raise PlmbenchError(f"{path}: indices are not 0..{entry.rows - 1} once each; re-run the "
                            "task")
    label_names = list(record.task_config.get("label_names") or [])
    out = [(int(row["index"]), _glue_value(entry, row["prediction"], label_names,
                                           f"{path} row {row['index']}")) for row in rows]
    return [(str(index), value) for index, value in sorted(out)]


#: how a run predicts what a submission needs
PREDICT = ("run the tasks with task.predict_splits=[test] (MNLI: [test_matched,test_mismatched]) "
           "and glue/ax from the MNLI run")

def _tsv(rows: list[tuple[str, str]]) -> str:
    return "".join(f"{index}\t{value}\n" for index, value in [HEADER, *rows])


def _jsonl(rows: list[tuple[str, str]]) -> str:
    """SuperGLUE's format: one ``{"idx": ..., "label": ...}`` a line."""
    return "".join(strict_json.dumps({"idx": int(index), "label": value}) + "\n"
                   for index, value in rows)


#: benchmark -> (its name, its files, how a file is written, what its runs must do)
BENCHMARKS = {
    "glue": ("GLUE", GLUE, _tsv, PREDICT),
    "superglue": ("SuperGLUE", SUPERGLUE, _jsonl, "run superglue/axb and superglue/axg with "
                  "init_from=ckpt:<a superglue/rte run saved with save_model=true>"),
}


def model_label(records: list[Record], label: str | None, results_dir: str | Path,
                benchmark: str = "glue") -> str:
    """``label``, or the one label with test predictions of ``benchmark`` in the results."""
    if label is not None:
        return label
    name, entries, _, predict = BENCHMARKS[benchmark]
    tasks = {entry.task for entry in entries}
    labels = sorted({r.label for r in records if r.task in tasks
                     and r.status == "ok" and r.predictions})
    if not labels:
        raise PlmbenchError(f"no run under {results_dir} has {name} predictions; {predict}")
    if len(labels) > 1:
        raise PlmbenchError(f"several models with {name} predictions in the results "
                            f"({', '.join(map(str, labels))}); pick one with --model LABEL")
    return labels[0]


def submit(benchmark: str, results_dir: str | Path, label: str | None = None,
           out: str | Path | None = None, allow_missing: bool = False
           ) -> tuple[Path, dict[str, Source], list[str]]:
    """Write the ``benchmark`` submission zip of ``label``'s runs under ``results_dir``: (the
    zip's path, the source of each file, the missing files). Nothing is written when a task is
    missing, unless ``allow_missing``."""
    name, entries, write, predict = BENCHMARKS[benchmark]
    records, unused = records_in(results_dir)
    for record in unused:  # a run it cannot read is never left out in silence
        print(f"warning: {record.source}: not used for the submission: {record.why}",
              file=sys.stderr)
    label = model_label(records, label, results_dir, benchmark)
    chosen = choose_runs(records, label, entries)
    missing = [entry.file for entry in entries if entry.file not in chosen]
    if not chosen:
        raise PlmbenchError(f"no {name} test predictions of model {label} in {results_dir}; "
                            f"{predict}")
    if missing and not allow_missing:
        raise PlmbenchError(f"model {label} has no test predictions for {', '.join(missing)}; "
                            f"{name}'s server scores complete submissions: {predict}, or "
                            "pass --allow-missing")
    files = {entry.file: write(submission_rows(entry, chosen[entry.file][0]))
             for entry in entries if entry.file in chosen}
    out = Path(out) if out else Path(results_dir) / "submissions" / f"{benchmark}-{label}.zip"
    with atomic_path(out) as partial, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
        for file, text in files.items():
            zf.writestr(file, text)
    sources = {file: source for file, (_, source) in chosen.items()}
    atomic_write_text(out.with_name(out.name + ".sources.json"), strict_json.dumps(
        {"model": label, "missing": missing,
         "files": {file: vars(source) for file, source in sources.items()}}, indent=2) + "\n")
    return out, sources, missing
