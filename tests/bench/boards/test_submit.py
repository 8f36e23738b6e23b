"""GLUE submissions: a run predicts its unlabelled test split whole (``task.predict_splits``), and
``plmbench submit glue`` gathers a model's test predictions into the zip GLUE's server takes: the
server's eleven file names, ``index<TAB>prediction`` headers, GLUE's test-set sizes and label
vocabularies (0/1 for CoLA, SST-2, MRPC, QQP, WNLI; names for the inference tasks; STS-B's score in
[0, 5]), one run per task chosen best on dev, missing tasks refused unless allowed."""

import csv
import functools
import io
import json
import random
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from bench.boards.submit import GLUE
from bench.compose import compose_config
from bench.record import write_record
from tests.bench.invoke import plmbench, read, run_dir

#: the submission format as GLUE's server states it: file -> (rows, vocabulary; None: a score)
FORMAT = {
    "CoLA.tsv": (1063, {"0", "1"}), "SST-2.tsv": (1821, {"0", "1"}),
    "MRPC.tsv": (1725, {"0", "1"}), "STS-B.tsv": (1379, None), "QQP.tsv": (390965, {"0", "1"}),
    "MNLI-m.tsv": (9796, {"entailment", "neutral", "contradiction"}),
    "MNLI-mm.tsv": (9847, {"entailment", "neutral", "contradiction"}),
    "QNLI.tsv": (5463, {"entailment", "not_entailment"}),
    "RTE.tsv": (3000, {"entailment", "not_entailment"}), "WNLI.tsv": (146, {"0", "1"}),
    "AX.tsv": (1104, {"entailment", "neutral", "contradiction"}),
}
WNLI = ["model=bert-tiny-scratch", "task=glue/wnli", "task.predict_splits=[test]",
        "task.max_train_samples=32", "task.max_eval_samples=16", "trainer.max_steps=2",
        "trainer.enable_progress_bar=false"]


def test_the_format_table_is_glues(mirror):
    """The spec the command writes against: GLUE's names, and its test sizes where the mirror
    holds the test split."""
    assert {entry.file: (entry.rows, set(entry.vocabulary) if entry.vocabulary else None)
            for entry in GLUE} == FORMAT
    for entry in GLUE:
        path = mirror / "glue" / entry.task.removeprefix("glue/") / f"{entry.split}.parquet"
        if path.is_file():
            assert pq.read_metadata(path).num_rows == entry.rows, entry.file


def read_zip(path: Path) -> dict[str, list[dict]]:
    with zipfile.ZipFile(path) as zf:
        assert all("/" not in name for name in zf.namelist())  # files at the zip's root
        return {name: list(csv.reader(io.StringIO(zf.read(name).decode()), delimiter="\t"))
                for name in zf.namelist()}


def check_format(files: dict[str, list]) -> None:
    for name, rows in files.items():
        count, vocabulary = FORMAT[name]
        assert rows[0] == ["index", "prediction"], name
        assert [int(row[0]) for row in rows[1:]] == list(range(count)), name
        values = [row[1] for row in rows[1:]]
        if vocabulary is None:
            assert all(0.0 <= float(v) <= 5.0 for v in values), name
        else:
            assert set(values) <= vocabulary, name


def test_a_run_predicts_its_test_split_whole_and_submits_it(mirror, tmp_path):
    results = tmp_path / "results"
    done = plmbench("run", *WNLI, f"results_dir={results}")
    assert done.rc == 0, done.err
    where = run_dir(results, "glue/wnli", *WNLI[1:])
    record = read(where)
    assert record["predictions"]["test"] == "predictions/test.tsv"
    with (where / "predictions/test.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == 146  # the whole split, whatever max_eval_samples says
    # in GLUE's vocabulary already (task.submission_labels: WNLI's label ids), no gold column
    assert list(rows[0]) == ["index", "prediction"]
    assert {row["prediction"] for row in rows} <= {"0", "1"}

    refused = plmbench("submit", "glue", str(results))
    assert refused.rc == 2 and len(refused.err_lines) == 1
    assert "no test predictions for CoLA.tsv" in refused.err and "--allow-missing" in refused.err
    assert not (results / "submissions").exists()  # nothing partial

    done = plmbench("submit", "glue", str(results), "--allow-missing")
    assert done.rc == 0, done.err
    assert "10 of 11 files missing" in done.err
    written = results / "submissions/glue-bert-tiny-scratch.zip"
    files = read_zip(written)
    assert list(files) == ["WNLI.tsv"]
    check_format(files)
    assert [row[1] for row in files["WNLI.tsv"][1:]] == [r["prediction"] for r in rows]
    sources = json.loads((written.parent / "glue-bert-tiny-scratch.zip.sources.json").read_text())
    assert sources["files"]["WNLI.tsv"]["run_dir"] == str(where)


@functools.cache
def composed_task(task: str) -> dict:
    return OmegaConf.to_container(
        compose_config([f"task={task}", "model=bert-tiny-scratch"], "").task, resolve=True
    )


def fake_run(results: Path, task: str, seed: int, predictions: dict[str, list[str]],
             dev: float | None = None, init_from: str = "scratch", variant: str = "") -> Path:
    """A finished run's record and test prediction files, as a run writes them."""
    task_config = composed_task(task)
    where = results / task / "bert-tiny-scratch" / variant / f"seed{seed}"
    (where / "predictions").mkdir(parents=True)
    files = {}
    for split, values in predictions.items():
        path = where / "predictions" / f"{split}.tsv"
        path.write_text("index\tprediction\n" + "".join(
            f"{i}\t{v}\n" for i, v in enumerate(values)))
        files[split] = f"predictions/{split}.tsv"
    metrics = {}
    if dev is not None:
        metrics = {"validation": dict.fromkeys(task_config["metrics"], dev),
                   "validation_matched": {"accuracy": dev},
                   "validation_mismatched": {"accuracy": dev}}
    write_record(
        where,
        {
            "status": "ok",
            "label": "bert-tiny-scratch",
            "model": "bert-tiny-scratch",
            "task": task,
            "seed": seed,
            "board": "glue",
            "run_dir": str(where),
            "predictions": files,
            "metrics": metrics,
            "config": {"task": task_config, "init_from": init_from},
        },
    )
    return where


@pytest.fixture(scope="module")
def full_results(tmp_path_factory):
    """Every GLUE task's test predictions: label names (as plmbench's files hold them) for some
    tasks, GLUE's vocabulary for others; STS-B scores beyond [0, 5]; CoLA in three seeds, the
    second best on dev; two AX runs, one from the chosen MNLI run."""
    results = tmp_path_factory.mktemp("results")
    rng = random.Random(0)
    names = {"glue/sst2": ["negative", "positive"], "glue/mrpc": ["0", "1"],
             "glue/qqp": ["0", "1"], "glue/qnli": ["entailment", "not_entailment"],
             "glue/rte": ["entailment", "not_entailment"],
             "glue/wnli": ["not_entailment", "entailment"]}
    sizes = {entry.task: entry.rows for entry in GLUE if entry.split == "test"}
    for task, labels in names.items():
        fake_run(results, task, 0, {"test": rng.choices(labels, k=sizes[task])}, dev=0.7)
    for seed, dev in enumerate([0.1, 0.3, 0.2]):
        labels = ["acceptable"] * 1063 if seed == 1 else ["unacceptable"] * 1063
        fake_run(results, "glue/cola", seed, {"test": labels}, dev=dev)
    scores = [f"{rng.uniform(-0.5, 5.5):.4f}" for _ in range(1379)]
    fake_run(results, "glue/stsb", 0, {"test": scores}, dev=0.5)
    mnli = ["entailment", "neutral", "contradiction"]
    chosen = fake_run(results, "glue/mnli", 0, {"test_matched": rng.choices(mnli, k=9796),
                                                "test_mismatched": rng.choices(mnli, k=9847)},
                      dev=0.8)
    fake_run(results, "glue/mnli", 1, {"test_matched": ["neutral"] * 9796,
                                       "test_mismatched": ["neutral"] * 9847}, dev=0.6)
    fake_run(results, "glue/ax", 0, {"test": ["neutral"] * 1104}, variant="other")
    fake_run(results, "glue/ax", 0, {"test": ["contradiction"] * 1104},
             init_from=f"ckpt:{chosen}", variant="from-chosen")
    return results, scores, chosen


def test_the_zip_holds_every_task_in_glues_format(full_results, tmp_path):
    results, scores, chosen = full_results
    out = tmp_path / "glue.zip"
    done = plmbench("submit", "glue", str(results), "--out", str(out))
    assert done.rc == 0, done.err
    files = read_zip(out)
    assert set(files) == set(FORMAT)
    check_format(files)
    # STS-B: in-range scores as written, the others clipped
    written = [float(row[1]) for row in files["STS-B.tsv"][1:]]
    assert written == [min(max(float(s), 0.0), 5.0) for s in scores]
    assert any(float(s) > 5 for s in scores) and any(float(s) < 0 for s in scores)
    # the label names of SST-2 became GLUE's 0/1
    assert {row[1] for row in files["SST-2.tsv"][1:]} == {"0", "1"}
    # CoLA's best seed on dev (1: "acceptable" everywhere) and the reason printed
    assert {row[1] for row in files["CoLA.tsv"][1:]} == {"1"}
    cola_line = next(line for line in done.out.splitlines() if line.startswith("CoLA.tsv"))
    assert "seed 1: best on dev of 3 runs" in cola_line
    # MNLI's two files from one run, AX from the run that started from it
    assert {row[1] for row in files["MNLI-m.tsv"][1:]} != {"neutral"}
    assert {row[1] for row in files["AX.tsv"][1:]} == {"contradiction"}
    sources = json.loads(Path(f"{out}.sources.json").read_text())["files"]
    assert sources["MNLI-m.tsv"]["run_dir"] == sources["MNLI-mm.tsv"]["run_dir"] == str(chosen)
    assert "MNLI run's checkpoint" in sources["AX.tsv"]["reason"]


def test_a_file_of_the_wrong_size_or_labels_is_refused(full_results, tmp_path):
    results, _, _ = full_results
    broken = tmp_path / "broken"
    fake_run(broken, "glue/rte", 0, {"test": ["entailment"] * 2999})
    refused = plmbench("submit", "glue", str(broken), "--allow-missing")
    assert refused.rc == 2 and "2999 rows, RTE.tsv needs 3000" in refused.err
    other = tmp_path / "other"
    fake_run(other, "glue/rte", 0, {"test": ["entailment"] * 2999 + ["maybe"]})
    refused = plmbench("submit", "glue", str(other), "--allow-missing")
    assert refused.rc == 2 and "predicts 'maybe'" in refused.err
    assert not (broken / "submissions").exists() and not (other / "submissions").exists()
