"""End to end: the ``plmbench`` command (bench/cli.py) on tiny runs over the real data mirror.

Every run goes through ``bench.cli.main([...])`` in this process: bert-tiny-scratch from scratch,
64 training / 32 eval examples, 4 steps, CPU. Runs that several tests read are made once per
module (``scope="module"`` fixtures); tests only read what those runs left, or copy it first.
Expected values are computed here independently: leaderboard cells from the records with
``statistics``, parameter counts from BERT's shapes, row counts from the Parquet footers.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from scipy import stats as scipy_stats

from bench.boards.config import known_boards
from bench.config_identity import config_hash
from bench.run.execute import CONF_DIR, normalize
from tests.bench.invoke import (
    Result,
    plmbench,
    plmbench_exit,
    read,
    records_under,
    reset_cli_state,
)
from tests.bench.invoke import run_dir as run_path
from tests.conftest import MIRROR_CANDIDATES, in_ci

#: what makes every run tiny; a test adds results_dir=... and what it is about
TINY = [
    "model=bert-tiny-scratch",
    "task.max_train_samples=64",
    "task.max_eval_samples=32",
    "trainer.max_steps=4",
    "trainer.enable_progress_bar=false",
]
#: the record keys every finished run has (bench/record.py schema 1, run.execute)
RECORD_KEYS = {
    "schema", "run_id", "run_dir", "model", "label", "task", "board", "seed", "init_from",
    "config", "config_hash", "protocol_hash", "versions", "hardware", "started_at", "finished_at",
    "wall_time_s", "status", "error", "overrides",
}
#: a tiny MLM pretraining run on WikiText's test split (the mirror has no train split)
PRETRAIN = [
    "model=bert-tiny-scratch", "task=pretrain/wikitext", "task.splits.train=test",
    "task.max_train_samples=3", "task.max_eval_samples=2", "trainer.max_steps=3",
    "trainer.enable_progress_bar=false",
]
OK_KEYS = RECORD_KEYS | {"metrics", "throughput", "parameters", "data", "steps"}
def markdown_rows(text: str) -> dict[str, dict[str, str]]:
    """Leaderboard Markdown -> {model: {column: cell}}."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:  # without the marks of a column's best and tied rows
        cells = [cell.strip().removesuffix(" ★").removesuffix(" ≈")
                 for cell in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def csv_rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as handle:
        return {row["model"]: row for row in csv.DictReader(handle)}


def cell_text(values: list[float], low: float = -math.inf, high: float = math.inf) -> str:
    """A leaderboard cell, rendered from the seed values independently of bench.boards.table:
    the mean ± the half-width of its 95% t-interval (scipy), no interval for one seed; its ends
    where the interval passes the metric's range [low, high] (x100)."""
    mean, n = 100 * statistics.mean(values), len(values)
    if n == 1:
        return f"{mean:.1f} (n=1)"
    half = scipy_stats.t.ppf(0.975, n - 1) * 100 * statistics.stdev(values) / math.sqrt(n)
    if mean - half < 100 * low or mean + half > 100 * high:
        ends = max(mean - half, 100 * low), min(mean + half, 100 * high)
        return f"{mean:.1f} [{ends[0]:.1f}, {ends[1]:.1f}] (n={n})"
    return f"{mean:.1f} ± {half:.1f} (n={n})"


def bert_classifier_parameters(config: dict, num_labels: int) -> int:
    """Parameters of a BERT encoder (with pooler) plus a linear head, from its config's sizes."""
    h, i = config["hidden_size"], config["intermediate_size"]
    embeddings = (config["vocab_size"] + config["max_position_embeddings"]
                  + config["type_vocab_size"]) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    pooler = h * h + h
    head = h * num_labels + num_labels
    return embeddings + config["num_hidden_layers"] * layer + pooler + head


TINY_SIZES = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                  max_position_embeddings=512, type_vocab_size=2)


# ----------------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def clean_cli_state():
    """No Hydra or failure state leaks into or out of a test, whatever it did."""
    reset_cli_state()
    yield
    reset_cli_state()



@pytest.fixture(scope="module")
def real_mirror(tmp_path_factory) -> Iterator[Path]:
    """Module-wide: PLMBENCH_DATA at the real mirror, a private `datasets` cache (for the
    module-scoped runs; function-scoped tests use conftest's `mirror` / `datasets_cache`)."""
    import datasets

    root = next((path for path in MIRROR_CANDIDATES if (path / "glue").is_dir()), None)
    if root is None:
        message = f"real data mirror not found (tried {[str(p) for p in MIRROR_CANDIDATES]})"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    cache = tmp_path_factory.mktemp("hf_datasets")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(root))
        patch.setenv("HF_DATASETS_CACHE", str(cache))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
        yield root


@pytest.fixture(scope="module")
def rte_run(real_mirror, tmp_path_factory) -> tuple[Path, Result]:
    """One single (non-sweep) glue/rte run: (results dir, what plmbench returned)."""
    results = tmp_path_factory.mktemp("rte") / "results"
    return results, plmbench("run", *TINY, "task=glue/rte", f"results_dir={results}")


@pytest.fixture(scope="module")
def rte_rerun(rte_run, tmp_path_factory) -> dict:
    """A copy of rte_run's results, run again as is, then with skip_completed=false."""
    results = tmp_path_factory.mktemp("rerun") / "results"
    shutil.copytree(rte_run[0], results)
    run_dir = run_path(results, "glue/rte", *TINY)
    before = read(run_dir), (run_dir / "record.json").stat().st_mtime_ns
    args = ["run", *TINY, "task=glue/rte", f"results_dir={results}"]
    skipped = plmbench(*args)
    after_skip = read(run_dir), (run_dir / "record.json").stat().st_mtime_ns
    forced = plmbench(*args, "skip_completed=false")
    return dict(before=before, skipped=skipped, after_skip=after_skip, forced=forced,
                after_force=read(run_dir))


@pytest.fixture(scope="module")
def stsb_sweep(real_mirror, tmp_path_factory) -> tuple[Path, Result]:
    """A Hydra multirun over two seeds of glue/stsb (regression: seeds give distinct values)."""
    results = tmp_path_factory.mktemp("sweep") / "results"
    return results, plmbench("run", "-m", *TINY, "task=glue/stsb", "seed=0,1",
                             f"results_dir={results}")


@pytest.fixture(scope="module")
def pretrained(real_mirror, tmp_path_factory) -> tuple[Path, Result]:
    """A tiny MLM pretraining run on WikiText's test split (the mirror has no train split)."""
    results = tmp_path_factory.mktemp("pretrain") / "results"
    return results, plmbench("run", *PRETRAIN, f"results_dir={results}")


# ------------------------------------------------------------------ 1. a classification run


def test_classification_run_leaves_a_complete_ok_record(rte_run):
    results, result = rte_run
    assert result.rc == 0, result.err
    run_dir = run_path(results, "glue/rte", *TINY)
    assert records_under(results) == [run_dir / "record.json"]
    record = read(run_dir)
    assert OK_KEYS <= set(record)
    assert record["status"] == "ok" and record["error"] is None
    assert (record["task"], record["model"], record["label"], record["board"], record["seed"]) == (
        "glue/rte", "bert-tiny-scratch", "bert-tiny-scratch", "glue", 0)
    assert record["init_from"] == "scratch" and record["steps"] == 4
    assert Path(record["run_dir"]) == run_dir
    assert 0.0 <= record["metrics"]["validation"]["accuracy"] <= 1.0
    assert set(record["metrics"]) == {"validation"}
    # 32 eval examples: accuracy is a multiple of 1/32
    assert (32 * record["metrics"]["validation"]["accuracy"]) == pytest.approx(
        round(32 * record["metrics"]["validation"]["accuracy"]))
    for key in ("config_hash", "protocol_hash"):
        assert re.fullmatch(r"[0-9a-f]{16}", record[key])
    # the hashes are those of the configuration as composed (and normalized, as a run does)
    # from the same overrides
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        composed = compose("config", overrides=[*TINY, "task=glue/rte", f"results_dir={results}"])
    normalize(composed)
    composed = OmegaConf.to_container(composed, resolve=True)
    assert config_hash(composed) == record["config_hash"]
    # the protocol: without the task, but for the task keys of the training recipe the command
    # line changed (the training cap; the eval cap chooses data, not the recipe)
    assert sorted(record["variant"]) == ["task.max_eval_samples=32", "task.max_train_samples=64",
                                         "trainer.max_steps=4"]
    assert config_hash(composed, ignore_task=True, task_keys=["max_train_samples"]) == record[
        "protocol_hash"]
    assert record["config_hash"] != record["protocol_hash"]
    assert {"python", "torch", "lightning", "plmbench", "git_commit"} <= set(record["versions"])
    assert set(record["data"]) == {"train", "validation"}
    assert len(set(record["data"].values())) == 2  # each split its own fingerprint
    assert record["throughput"]["train_tokens_per_s"] > 0
    assert record["throughput"]["train_samples_per_s"] > 0
    assert record["wall_time_s"] > 0
    # bert-tiny-scratch's scratch WordPiece vocabulary fills its 8192 entries on RTE's training text
    sizes = dict(TINY_SIZES, vocab_size=record["config"]["model"]["vocab_size"])
    assert record["parameters"] == bert_classifier_parameters(sizes, num_labels=2)
    resolved = record["config"]
    assert resolved["task"]["max_train_samples"] == 64 and resolved["trainer"]["max_steps"] == 4
    assert resolved["results_dir"] == str(results)


def test_leaderboard_markdown_and_csv_show_the_record(rte_run, tmp_path):
    results, _ = rte_run
    accuracy = read(run_path(results, "glue/rte", *TINY))["metrics"]["validation"]["accuracy"]

    shown = plmbench("leaderboard", str(results))
    assert shown.rc == 0 and shown.err == ""
    assert "(1 record used)" in shown.out
    row = markdown_rows(shown.out)["bert-tiny-scratch"]
    # the GLUE board's own columns follow the task's: the encoder's size, and no pretraining
    # behind a model fine-tuned from scratch
    assert list(row) == ["Model", "GLUE score", "RTE (acc)", "parameters", "trained parameters",
                         "pretraining tokens", "pretraining FLOPs"]
    size = read(run_path(results, "glue/rte", *TINY))["encoder_parameters"]
    # a model's size and pretraining cost do not vary with the seed: the value alone
    assert row["parameters"] == f"{size:#.3g}"
    # fine-tuning (finetune=full) trains every weight, the head's included
    trained = read(run_path(results, "glue/rte", *TINY))["parameters"]
    assert row["trained parameters"] == f"{trained:#.3g}"
    assert row["pretraining tokens"] == f"{0:#.3g}"
    # one seed: no interval
    assert row["RTE (acc)"] == f"{100 * accuracy:.1f} (n=1)"
    assert row["GLUE score"] == f"{100 * accuracy:.1f} (1/9 tasks)"

    out = tmp_path / "board" / "glue.csv"
    written = plmbench("leaderboard", str(results), "--format", "csv", "--out", str(out))
    assert written.rc == 0 and written.out.strip() == f"wrote {out}"
    rows = csv_rows(out)
    assert sorted(rows) == [
        "baseline (no training) †",
        "bert-tiny-scratch",
    ]  # and the majority class
    row = rows["bert-tiny-scratch"]
    assert float(row["RTE (acc) mean"]) == pytest.approx(100 * accuracy, abs=1e-4)
    assert float(row["RTE (acc) std"]) == 0.0 and row["RTE (acc) n"] == "1"
    assert float(row["score"]) == pytest.approx(100 * accuracy, abs=1e-4)
    assert row["n_tasks"] == "1"
    assert row["protocol_hash"] == read(run_path(results, "glue/rte", *TINY))["protocol_hash"]
    assert [p.name for p in out.parent.iterdir()] == ["glue.csv"]  # no temp file left


# ------------------------------------------------------------------------- 2. a sweep


def test_multirun_sweep_gives_one_record_per_seed_and_aggregates_them(stsb_sweep, tmp_path):
    results, result = stsb_sweep
    assert result.rc == 0, result.err
    run_dirs = [run_path(results, "glue/stsb", *TINY, seed=seed) for seed in (0, 1)]
    assert records_under(results) == [d / "record.json" for d in run_dirs]
    records = [read(d) for d in run_dirs]
    assert [r["seed"] for r in records] == [0, 1]
    assert all(r["status"] == "ok" for r in records)
    assert records[0]["run_id"] != records[1]["run_id"]
    # seeds are not part of the experiment: one config, one protocol, hence one leaderboard row
    assert records[0]["config_hash"] == records[1]["config_hash"]
    assert records[0]["protocol_hash"] == records[1]["protocol_hash"]
    values = {metric: [r["metrics"]["validation"][metric] for r in records]
              for metric in ("pearson", "spearman")}
    assert values["pearson"][0] != values["pearson"][1]  # the seeds did change something

    row = markdown_rows(plmbench("leaderboard", str(results)).out)["bert-tiny-scratch"]
    assert row["STS-B (P)"] == cell_text(values["pearson"], -1, 1)  # correlations: [-1, 1]
    assert row["STS-B (S)"] == cell_text(values["spearman"], -1, 1)
    assert "(n=2)" in row["STS-B (P)"]

    out = tmp_path / "sweep.csv"
    assert plmbench("leaderboard", str(results), "--format", "csv", "--out", str(out)).rc == 0
    row = csv_rows(out)["bert-tiny-scratch"]
    for label, metric in (("STS-B (P)", "pearson"), ("STS-B (S)", "spearman")):
        seeds = values[metric]
        assert float(row[f"{label} mean"]) == pytest.approx(100 * statistics.mean(seeds), abs=1e-4)
        assert float(row[f"{label} std"]) == pytest.approx(100 * statistics.stdev(seeds), abs=1e-4)
        assert float(row[f"{label} median"]) == pytest.approx(
            100 * statistics.median(seeds), abs=1e-4)
        assert row[f"{label} n"] == "2"


# ------------------------------------------------------------------------ 3. re-runs


def test_rerun_skips_a_completed_run_and_skip_completed_false_reruns_it(rte_rerun):
    (first, mtime), (after_skip, mtime_after_skip) = rte_rerun["before"], rte_rerun["after_skip"]
    assert rte_rerun["skipped"].rc == 0
    assert "record says ok" in rte_rerun["skipped"].out  # run.main's skip message
    assert after_skip == first and mtime_after_skip == mtime

    forced, rerun = rte_rerun["forced"], rte_rerun["after_force"]
    assert forced.rc == 0, forced.err
    assert rerun["status"] == "ok" and rerun["run_id"] != first["run_id"]
    assert rerun["started_at"] >= first["finished_at"]
    assert rerun["config"]["skip_completed"] is False


def test_a_forced_rerun_is_the_same_experiment(rte_rerun):
    first, _ = rte_rerun["before"]
    rerun = rte_rerun["after_force"]
    assert rerun["config_hash"] == first["config_hash"]
    assert rerun["protocol_hash"] == first["protocol_hash"]


# ---------------------------------------------------------- 4. regression and the GLUE score


def test_stsb_is_a_regression_and_two_tasks_give_the_glue_score(stsb_sweep, tmp_path):
    sweep_results, _ = stsb_sweep
    results = tmp_path / "results"
    shutil.copytree(sweep_results, results)
    mrpc = plmbench("run", *TINY, "task=glue/mrpc", f"results_dir={results}")
    assert mrpc.rc == 0, mrpc.err

    stsb = [read(run_path(results, "glue/stsb", *TINY, seed=seed)) for seed in (0, 1)]
    for record in stsb:
        metrics = record["metrics"]["validation"]
        assert set(metrics) == {"pearson", "spearman"}
        assert all(-1.0 <= value <= 1.0 for value in metrics.values())
        # num_labels 1: a one-output regression head on the encoder
        sizes = dict(TINY_SIZES, vocab_size=record["config"]["model"]["vocab_size"])
        assert record["parameters"] == bert_classifier_parameters(sizes, num_labels=1)
    mrpc_metrics = read(run_path(results, "glue/mrpc", *TINY))["metrics"]["validation"]
    assert set(mrpc_metrics) == {"f1", "accuracy"}
    assert all(0.0 <= value <= 1.0 for value in mrpc_metrics.values())

    # GLUE (Wang et al. 2019): a task scores the mean of its metrics (each a mean over seeds),
    # the benchmark the mean of the task scores
    stsb_score = statistics.mean(
        statistics.mean(r["metrics"]["validation"][m] for r in stsb)
        for m in ("pearson", "spearman")
    )
    mrpc_score = statistics.mean([mrpc_metrics["f1"], mrpc_metrics["accuracy"]])
    glue_score = statistics.mean([stsb_score, mrpc_score])

    row = markdown_rows(plmbench("leaderboard", str(results)).out)["bert-tiny-scratch"]
    assert row["GLUE score"] == f"{100 * glue_score:.1f} (2/9 tasks)"
    assert list(row)[2:6] == ["MRPC (F1)", "MRPC (acc)", "STS-B (P)", "STS-B (S)"]  # GLUE order
    assert row["MRPC (F1)"] == cell_text([mrpc_metrics["f1"]])
    out = tmp_path / "glue.csv"
    assert plmbench("leaderboard", str(results), "--format", "csv", "--out", str(out)).rc == 0
    row = csv_rows(out)["bert-tiny-scratch"]
    assert float(row["score"]) == pytest.approx(100 * glue_score, abs=1e-4)
    assert row["n_tasks"] == "2"
    # --tasks: one task's runs alone, its score that task's
    only = markdown_rows(plmbench("leaderboard", str(results), "--tasks", "glue/m*").out)
    assert list(only["bert-tiny-scratch"])[2:4] == ["MRPC (F1)", "MRPC (acc)"]
    assert only["bert-tiny-scratch"]["GLUE score"] == f"{100 * mrpc_score:.1f} (1/9 tasks)"
    assert "STS-B (P)" not in only["bert-tiny-scratch"]


# ------------------------------------------------------- 5. pretraining, then fine-tuning it


def test_pretraining_run_records_mlm_loss_and_exports_the_model(pretrained):
    results, result = pretrained
    assert result.rc == 0, result.err
    run_dir = run_path(results, "pretrain/wikitext", *PRETRAIN)
    record = read(run_dir)
    assert OK_KEYS <= set(record) and record["status"] == "ok"
    assert record["board"] == "pretrain" and record["steps"] == 3
    validation = record["metrics"]["validation"]
    assert validation["mlm_loss"] > 0
    assert validation["perplexity"] == pytest.approx(math.exp(validation["mlm_loss"]), rel=1e-9)
    assert set(record["data"]) == {"test", "validation"}  # trained on the test split
    assert record["throughput"]["train_tokens_per_s"] > 0

    export = run_dir / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (export / name).is_file() and (export / name).stat().st_size > 0, name
    config = json.loads((export / "config.json").read_text())
    vocab = json.loads((export / "tokenizer.json").read_text())["model"]["vocab"]
    assert config["vocab_size"] == len(vocab)
    assert {k: config[k] for k in TINY_SIZES} == TINY_SIZES
    # three WikiText documents cannot fill bert-tiny-scratch's 8192-entry vocabulary
    assert config["vocab_size"] < 8192
    # a pretraining run is not a GLUE result, but a row of the pretrain board: the board a
    # folder's runs name, without --board; a board they do not name is one line, exit 2
    assert "board 'pretrain' (1 record used)" in plmbench("leaderboard", str(results)).out
    glue = plmbench("leaderboard", str(results), "--board", "glue")
    assert glue.rc == 2 and glue.err.strip().endswith(
        "holds no run of board 'glue', only of pretrain; pass --board with one of them")
    board = plmbench("leaderboard", str(results), "--board", "pretrain")
    assert board.rc == 0, board.err
    row = markdown_rows(board.out)["bert-tiny-scratch"]
    assert row["MLM loss"] == f"{validation['mlm_loss']:.3f} (n=1)"
    assert row["tokens"].startswith(f"{record['throughput']['train_tokens']:#.3g}")


def test_finetuning_from_the_pretraining_run_uses_its_export(pretrained, rte_run, mirror,
                                                              tmp_path):
    pretrain_dir = run_path(pretrained[0], "pretrain/wikitext", *PRETRAIN)
    assert read(pretrain_dir)["status"] == "ok"
    results = tmp_path / "results"
    result = plmbench("run", *TINY, "task=glue/rte", f"init_from=ckpt:{pretrain_dir}",
                      "label=bert-tiny-pt", f"results_dir={results}")
    assert result.rc == 0, result.err
    record = read(run_path(results, "glue/rte", *TINY, f"init_from=ckpt:{pretrain_dir}",
                           label="bert-tiny-pt"))
    assert record["status"] == "ok"
    assert record["init_from"] == f"ckpt:{pretrain_dir}"
    assert (record["label"], record["model"]) == ("bert-tiny-pt", "bert-tiny-scratch")
    # the encoder has the exported vocabulary, not a fresh 8192-entry one
    exported = json.loads((pretrain_dir / "model/config.json").read_text())
    assert record["parameters"] == bert_classifier_parameters(exported, num_labels=2)
    # ... and tokenizes RTE with the exported tokenizer: other token ids than the scratch run's
    scratch = read(run_path(rte_run[0], "glue/rte", *TINY))
    assert record["data"]["train"] != scratch["data"]["train"]
    assert record["protocol_hash"] != scratch["protocol_hash"]  # init_from is part of it
    board = plmbench("leaderboard", str(results), "--no-baselines")
    assert list(markdown_rows(board.out)) == ["bert-tiny-pt"]


# ------------------------------------------------------------------------- 6. bad input


def assert_one_error_line(result: Result, *fragments: str) -> str:
    """Exactly one `error:` line, the last thing on stderr, no traceback; returns it."""
    errors = [line for line in result.err_lines if line.startswith("error:")]
    assert len(errors) == 1, result.err
    assert result.err_lines[-1] == errors[0]
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in errors[0]
    return errors[0]


def test_unknown_model_preset_is_one_line_naming_the_nearest_and_the_presets(mirror, tmp_path):
    results = tmp_path / "results"
    result = plmbench("run", *TINY[1:], "model=bert-huge-scratch", f"results_dir={results}")
    assert result.rc == 2
    line = assert_one_error_line(result, "model=bert-huge-scratch: there is no "
                                 "conf/model/bert-huge-scratch.yaml",
                                 "did you mean model=bert-large-scratch?")
    options = line.split("options: ")[1].split(" (")[0].split(", ")
    assert {"bert-tiny-scratch", "bert-base-scratch"} <= set(options)
    assert not results.exists()


def test_dataset_missing_offline_fails_with_one_line_before_the_run(mirror, tmp_path):
    """Missing data is found by the config check (bench/run/config_check.py ``check_data``), before
    the run starts: one line, no run directory, no record."""
    results = tmp_path / "results"
    result = plmbench("run", *TINY, "task=glue/mnli", f"results_dir={results}")
    assert result.rc == 2  # bad input
    tried = mirror / "glue/mnli/train.parquet"
    line = assert_one_error_line(result, "glue/mnli", str(tried), "HF_HUB_OFFLINE=1",
                                 "plmbench data mirror glue mnli")
    assert line.startswith("error: glue/mnli split train not found")
    assert not results.exists()


def test_corrupt_parquet_names_the_file(mirror, datasets_cache, monkeypatch, tmp_path):
    broken = tmp_path / "mirror"
    (broken / "glue/rte").mkdir(parents=True)
    train = broken / "glue/rte/train.parquet"
    train.write_bytes(b"this is not a parquet file\n" * 100)
    shutil.copy(mirror / "glue/rte/validation.parquet", broken / "glue/rte/validation.parquet")
    monkeypatch.setenv("PLMBENCH_DATA", str(broken))

    results = tmp_path / "results"
    result = plmbench("run", *TINY, "task=glue/rte", f"results_dir={results}")
    assert result.rc == 2
    assert_one_error_line(result, f"cannot read {train}", "plmbench data mirror glue rte")
    record = read(run_path(results, "glue/rte", *TINY))
    assert record["status"] == "failed" and str(train) in record["error"]
    assert records_under(results) == [run_path(results, "glue/rte", *TINY) / "record.json"]

    listing = plmbench("data", "list")
    assert listing.rc == 2
    assert_one_error_line(listing, f"cannot read {train}")


def test_unwritable_results_dir_fails_before_anything_is_written(mirror, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("a regular file\n")
    results = afile / "sub"
    result = plmbench("run", *TINY, f"results_dir={results}")
    assert result.rc == 2 and result.out == ""
    assert len(result.err_lines) == 1
    assert_one_error_line(result, f"error: results directory {results} is not writable",
                          "results_dir=DIR")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["afile"]
    assert afile.read_text() == "a regular file\n"


def test_leaderboard_bad_input(tmp_path):
    result = plmbench("leaderboard", str(tmp_path), "--board", "nope")
    assert result.rc == 2 and result.out == ""
    known = ", ".join(known_boards())  # every conf/board/*.yaml: glue, pretrain, squad, ...
    assert {"glue", "pretrain"} <= set(known_boards())
    assert result.err_lines == [f"error: unknown board 'nope'; known boards: {known}"]

    missing = tmp_path / "never-ran"
    result = plmbench("leaderboard", str(missing))
    assert result.rc == 2
    assert_one_error_line(result, f"results directory {missing} does not exist")
    assert not missing.exists()


# ------------------------------------------------------------------------------- 7. help


def test_top_level_help_lists_the_commands():
    result = plmbench_exit("--help")
    assert result.rc == 0
    for command in ("run", "leaderboard", "perf", "data"):
        assert command in result.out
    assert "plmbench run -m" in result.out  # the epilog's examples
    # perf as it is: the three steps against transformers, lengths and generation
    perf = " ".join(result.out.split("perf ", 1)[1].split("study")[0].split())
    assert "pretraining, fine-tuning and inference steps" in perf and "--generate" in perf


def test_run_help_is_hydras_and_lists_the_config_groups():
    result = plmbench_exit("run", "--help")
    assert result.rc == 0
    groups = result.out.split("== Configuration groups ==")[1].split("== Config ==")[0]
    options = {
        line.split(":")[0].strip(): [o.strip() for o in line.split(":", 1)[1].split(",")]
        for line in groups.splitlines() if ":" in line and "(group=option)" not in line
    }
    assert "bert-tiny-scratch" in options["model"]
    assert {"rte", "stsb", "mrpc", "mnli"} <= set(options["task/glue"])
    assert "wikitext" in options["task/pretrain"]
    assert {"cpu", "gpu"} <= set(options["trainer"])
    assert {"full", "frozen", "adapters", "ulmfit"} == set(options["finetune"])


def test_data_list_shows_the_mirrors_splits_with_row_counts(mirror, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")  # a narrow terminal cuts nothing: names come whole
    result = plmbench("data", "list")
    assert result.rc == 0 and result.err == ""
    assert str(mirror) in result.out
    table = {}
    for line in result.out.splitlines()[3:]:
        cells = line.split()
        table[tuple(cells[:3])] = cells[3]
    for split in ("train", "validation", "test"):
        rows = pq.ParquetFile(mirror / f"glue/rte/{split}.parquet").metadata.num_rows
        assert table[("glue", "rte", split)] == f"{rows:,}"
    assert ("glue", "mnli", "train") not in table
    datasets = {key[0] for key in table}
    assert {path.name for path in mirror.iterdir() if any(path.glob("*/*.parquet"))} == datasets
