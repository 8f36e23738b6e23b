"""Leaderboards (bench/boards/table.py) against an independent computation with statistics.

Records are built here as dicts carrying their own task config (``config.task``), as runs write
them, so no training is needed; the board YAMLs are the shipped ones under conf/board/.
"""

from __future__ import annotations

import csv
import io
import math
import random
import statistics

import pytest
from scipy import stats as scipy_stats

from bench.boards.config import BOARD_DIR, Board, get_board, known_boards
from bench.boards.table import build_table
from bench.boards.text import render_csv, render_markdown
from bench.record import iter_records, write_record
from datamodules.errors import PlmbenchError

GLUE_ORDER = ["glue/cola", "glue/sst2", "glue/mrpc", "glue/stsb", "glue/qqp", "glue/mnli",
              "glue/qnli", "glue/rte", "glue/wnli"]


def task_config(name, columns=None, metrics=("accuracy",), splits=("validation",),
                board="glue") -> dict:
    """A resolved task config as a record holds it; ``columns`` None: derived ones."""
    task = {"name": name, "board": board, "metrics": list(metrics),
            "splits": {"train": "train", "eval": list(splits)}}
    if columns is not None:
        task["columns"] = columns
    return task


def col(label, value, **extra) -> dict:
    return {"label": label, "value": value, **extra}


# The synthetic sweep's tasks: one- and two-metric tasks, and MNLI's two splits.
TASKS = {
    "glue/mrpc": task_config("glue/mrpc", [col("MRPC (F1)", "metrics.validation.f1"),
                                          col("MRPC (acc)", "metrics.validation.accuracy")],
                             metrics=["f1", "accuracy"]),
    "glue/mnli": task_config("glue/mnli",
                             [col("MNLI-m", "metrics.validation_matched.accuracy"),
                              col("MNLI-mm", "metrics.validation_mismatched.accuracy")],
                             splits=["validation_matched", "validation_mismatched"]),
    "glue/rte": task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy")]),
}
MODELS = {"bert-tiny-scratch": ("p" * 16, 0.6), "electra-small-scratch": ("q" * 16, 0.75)}
SEEDS = (0, 1, 2)


def record(model, task, seed, metrics, status="ok", protocol=None, task_cfg=None, **extra):
    task_cfg = task_cfg if task_cfg is not None else TASKS[task]
    return {
        "schema": 1, "status": status, "model": model, "label": model, "task": task,
        "board": task_cfg["board"], "seed": seed,
        "protocol_hash": protocol or MODELS.get(model, ("r" * 16,))[0],
        "metrics": metrics, "finished_at": "2026-01-01T00:00:00Z",
        "config": {"model": {"name": model}, "seed": seed, "task": task_cfg}, **extra,
    }


def split_metric(value_path: str) -> tuple[str, str]:
    _, split, metric = value_path.split(".")
    return split, metric


def sweep(tasks=TASKS) -> tuple[list[dict], dict]:
    """Records of 2 models x the tasks x 3 seeds, and the values as {model: {column: [..]}}."""
    rng = random.Random(0)
    records, values = [], {model: {} for model in MODELS}
    for model, (_, level) in MODELS.items():
        for task, config in tasks.items():
            for seed in SEEDS:
                metrics = {}
                for column in config["columns"]:
                    split, metric = split_metric(column["value"])
                    value = level + rng.uniform(-0.05, 0.05)
                    metrics.setdefault(split, {})[metric] = value
                    values[model].setdefault(column["label"], []).append(value)
                records.append(record(model, task, seed, metrics, task_cfg=config))
    return records, values


def expected_score(columns: dict[str, list[float]], tasks=TASKS) -> float:
    """GLUE score computed independently: per task the mean of its columns' seed means, x100."""
    task_scores = [
        statistics.mean(statistics.mean(columns[c["label"]]) for c in config["columns"])
        for config in tasks.values()
    ]
    return 100 * statistics.mean(task_scores)


def half_width(seed_values: list[float]) -> float:
    """The 95% t-interval's half-width of the mean, by hand: t(0.975, n-1) s / sqrt(n)."""
    n = len(seed_values)
    return scipy_stats.t.ppf(0.975, n - 1) * statistics.stdev(seed_values) / math.sqrt(n)


def cell_text(seed_values: list[float], scale=100, spec=".1f") -> str:
    mean = statistics.mean(seed_values)
    return (f"{format(scale * mean, spec)} ± {format(scale * half_width(seed_values), spec)} "
            f"(n={len(seed_values)})")


def unmarked(text: str) -> str:
    """A cell's text without its best / not-significantly-different mark."""
    return text.removesuffix(" ★").removesuffix(" ≈")


def markdown_table(text: str) -> list[list[str]]:
    """The Markdown table's lines as cells, header first, the rule line dropped, the marks of
    best and tied cells dropped (test_board_statistics.py checks them)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    return [[unmarked(c.strip()) for c in line.strip("|").split("|")]
            for i, line in enumerate(lines) if i != 1]


# ------------------------------------------------------------------ the GLUE board


def test_cells_and_score_match_an_independent_computation():
    records, values = sweep()
    table = build_table(records, "glue")
    assert table.n_records == len(records) == 18
    assert [row.label for row in table.rows] == ["electra-small-scratch", "bert-tiny-scratch"]
    for row in table.rows:
        assert set(row.cells) == set(values[row.label])
        for column, seed_values in values[row.label].items():
            cell = row.cells[column]
            assert cell.n == 3
            assert cell.mean == pytest.approx(statistics.mean(seed_values))
            assert cell.std == pytest.approx(statistics.stdev(seed_values))
            assert cell.median == pytest.approx(statistics.median(seed_values))
        assert row.score == pytest.approx(expected_score(values[row.label]))
        assert row.n_scored == 3


def test_markdown_shows_present_columns_in_board_order_aligned():
    records, values = sweep()
    text = render_markdown(build_table(records, "glue"))
    lines = text.splitlines()
    assert "glue" in lines[0] and "GLUE" in lines[0] and "(18 records used)" in lines[0]
    header, *body = markdown_table(text)
    # mrpc before mnli before rte: the board's task_order, not the records' order
    assert header == ["Model", "GLUE score", "MRPC (F1)", "MRPC (acc)", "MNLI-m", "MNLI-mm",
                      "RTE (acc)"]
    table_lines = [line for line in lines if line.startswith("|")]
    assert len(table_lines) == 4 and len({len(line) for line in table_lines}) == 1
    assert set(lines[3]) <= set("|-:")
    for cells, model in zip(body, ["electra-small-scratch", "bert-tiny-scratch"], strict=True):
        assert cells[0] == model
        score = unmarked(cells[1])
        assert score.startswith(f"{expected_score(values[model]):.1f} ± ")
        assert score.endswith(" (3/9 tasks)")
        assert [unmarked(c) for c in cells[2:]] == [cell_text(values[model][column])
                                                    for column in header[2:]]
    footnote = lines[-1]
    assert "± the half-width of its 95% t-interval" in footnote and "×100" in footnote
    assert "GLUE score" in footnote and "Wang et al. 2019" in footnote  # from conf/board/glue.yaml


def new_task_records(task_cfg: dict, labels_metrics: list[tuple[str, str, str]]):
    """The sweep plus 3 seeds of each model on a task the shipped YAMLs do not have."""
    records, values = sweep()
    rng = random.Random(5)
    for model, (_, level) in MODELS.items():
        for seed in SEEDS:
            metrics = {}
            for label, split, metric in labels_metrics:
                value = level - 0.2 + rng.uniform(-0.05, 0.05)
                metrics.setdefault(split, {})[metric] = value
                values[model].setdefault(label, []).append(value)
            records.append(record(model, task_cfg["name"], seed, metrics, task_cfg=task_cfg))
    return records, values


def test_a_new_task_with_columns_reaches_the_board_and_its_score():
    boolq = task_config("glue/boolq", [col("BoolQ (acc)", "metrics.validation.accuracy")])
    records, values = new_task_records(boolq, [("BoolQ (acc)", "validation", "accuracy")])
    table = build_table(records, "glue")
    assert table.labels[-1] == "BoolQ (acc)"  # not in task_order: after the listed tasks
    tasks = {**TASKS, "glue/boolq": boolq}
    header, *body = markdown_table(render_markdown(table))
    for cells in body:
        model = cells[0]
        assert unmarked(cells[header.index("BoolQ (acc)")]) == cell_text(
            values[model]["BoolQ (acc)"])
        # ten tasks seen: GLUE's nine and the new one
        assert unmarked(cells[1]).startswith(f"{expected_score(values[model], tasks):.1f} ± ")
        assert unmarked(cells[1]).endswith(" (4/10 tasks)")
    row = next(row for row in table.rows if row.label == "bert-tiny-scratch")
    assert row.score == pytest.approx(expected_score(values["bert-tiny-scratch"], tasks))


def test_a_new_task_without_columns_gets_derived_ones():
    # two eval splits: the split goes into the label; two metrics: one column each
    mytask = task_config("glue/mytask", None, metrics=["accuracy", "f1"], splits=["dev", "ood"])
    derived = [(f"glue/mytask {metric} [{split}]", split, metric)
               for split in ("dev", "ood") for metric in ("accuracy", "f1")]
    records, values = new_task_records(mytask, derived)
    table = build_table(records, "glue")
    assert table.labels[-4:] == [label for label, _, _ in derived]
    for row in table.rows:
        expected = statistics.mean([
            statistics.mean([statistics.mean(values[row.label][c["label"]])
                             for c in config["columns"]])
            for config in TASKS.values()
        ] + [statistics.mean([statistics.mean(values[row.label][label])
                              for label, _, _ in derived])])
        assert row.score == pytest.approx(100 * expected)
        assert row.n_scored == 4

    # one eval split: the label is "<task> <metric>" alone
    single = task_config("glue/single", None, metrics=["matthews"])
    single_record = record(
        "bert-tiny-scratch", "glue/single", 0, {"validation": {"matthews": 0.25}}, task_cfg=single
    )
    only = build_table([single_record], "glue")
    assert only.labels == ["glue/single matthews"]
    assert only.rows[0].score == pytest.approx(25.0)


def test_failed_and_foreign_records_are_ignored():
    records, _ = sweep()
    ax = task_config("glue/ax", [], metrics=[], splits=["test"])
    no_config = record("bert-tiny-scratch", "glue/rte", 5, {"validation": {"accuracy": 0.0}})
    del no_config["config"]
    extra = [
        record(
            "bert-tiny-scratch", "glue/rte", 9, {"validation": {"accuracy": 0.0}}, status="failed"
        ),
        record(
            "bert-tiny-scratch", "glue/rte", 8, {"validation": {"accuracy": 0.0}}, board="pretrain"
        ),
        record(
            "bert-tiny-scratch", "glue/ax", 7, {"test": {"accuracy": 0.0}}, task_cfg=ax
        ),  # no columns
        record("bert-tiny-scratch", "glue/rte", 6, {"validation": {"f1": 0.0}}),  # no value shown
        no_config,  # a record without its task config has no columns
    ]
    expected = render_markdown(build_table(records, "glue"))
    table = build_table(records + extra, "glue")
    assert table.n_records == 18
    # the failed run is listed apart from the table, with its error; the rest is unchanged
    (failure,) = table.failures
    assert (failure.task, failure.label, failure.seed) == ("glue/rte", "bert-tiny-scratch", 9)
    shown, listed = render_markdown(table).split("### Failed runs (1), not in the table\n\n")
    assert shown == expected + "\n"
    assert listed.startswith("- glue/rte bert-tiny-scratch seed 9: ")


def test_missing_tasks_give_dashes_and_a_partial_task_count():
    records, values = sweep()
    only_rte = [
        r for r in records if r["model"] == "electra-small-scratch" or r["task"] == "glue/rte"
    ]
    table = build_table(only_rte, "glue")
    tiny = next(row for row in table.rows if row.label == "bert-tiny-scratch")
    assert tiny.n_scored == 1
    assert tiny.score == pytest.approx(
        100 * statistics.mean(values["bert-tiny-scratch"]["RTE (acc)"])
    )
    line = next(line for line in render_markdown(table).splitlines() if "bert-tiny-scratch" in line)
    assert line.count("–") == 4 and "(1/9 tasks)" in line


def test_single_seed_has_zero_std_and_a_rerun_replaces_its_seed():
    first = record("bert-tiny-scratch", "glue/rte", 0, {"validation": {"accuracy": 0.5}},
                   finished_at="2026-01-01T00:00:00Z")
    rerun = record("bert-tiny-scratch", "glue/rte", 0, {"validation": {"accuracy": 0.7}},
                   finished_at="2026-01-02T00:00:00Z")
    for records in ([first, rerun], [rerun, first]):
        cell = build_table(records, "glue").rows[0].cells["RTE (acc)"]
        assert (cell.mean, cell.std, cell.n) == (pytest.approx(0.7), 0.0, 1)


def test_one_label_under_two_protocols_gets_two_tagged_rows():
    records = [
        record(
            "bert-tiny-scratch",
            "glue/rte",
            0,
            {"validation": {"accuracy": 0.6}},
            protocol="abcdef99",
        ),
        record(
            "bert-tiny-scratch",
            "glue/rte",
            0,
            {"validation": {"accuracy": 0.5}},
            protocol="123456ff",
        ),
        record("electra-small-scratch", "glue/rte", 0, {"validation": {"accuracy": 0.4}}),
    ]
    labels = [row.label for row in build_table(records, "glue").rows]
    assert labels == [
        "bert-tiny-scratch [abcdef]",
        "bert-tiny-scratch [123456]",
        "electra-small-scratch",
    ]


def test_output_is_the_same_bytes_twice_and_in_any_record_order():
    records, _ = sweep()
    shuffled = records[:]
    random.Random(1).shuffle(shuffled)
    table, again, other = (build_table(records, "glue"), build_table(records, "glue"),
                           build_table(shuffled, get_board("glue")))
    assert render_markdown(table) == render_markdown(again) == render_markdown(other)
    assert render_csv(table) == render_csv(again) == render_csv(other)


def test_csv_parses_and_matches_the_markdown_numbers():
    records, _ = sweep()
    table = build_table(records, "glue")
    rows = list(csv.DictReader(io.StringIO(render_csv(table))))
    _, *markdown = markdown_table(render_markdown(table))
    assert [row["model"] for row in rows] == ["electra-small-scratch", "bert-tiny-scratch"]
    for row, shown, table_row in zip(rows, markdown, table.rows, strict=True):
        score, low = float(row["score"]), float(row["score_ci_low"])
        assert unmarked(shown[1]) == f"{score:.1f} ± {score - low:.1f} ({row['n_tasks']}/9 tasks)"
        assert float(row["score_ci_high"]) - score == pytest.approx(score - low)
        for column, text in zip(table.labels, shown[2:], strict=True):
            mean, low, n = (row[f"{column} {stat}"] for stat in ("mean", "ci_low", "n"))
            assert unmarked(text) == f"{float(mean):.1f} ± {float(mean) - float(low):.1f} (n={n})"
            median = float(row[f"{column} median"])
            assert median == pytest.approx(100 * table_row.cells[column].median)


def test_records_written_to_disk_make_the_same_table(tmp_path):
    records, _ = sweep()
    for i, rec in enumerate(records):
        write_record(tmp_path / f"run{i:02d}", rec)
    assert render_csv(build_table(iter_records(tmp_path), "glue")) == render_csv(
        build_table(records, "glue")
    )


def test_scaled_and_raw_columns_on_one_board():
    # a task may override the board's x100 for a column: a loss stays raw, with its own format
    cfg = task_config("glue/rte", [col("RTE (acc)", "metrics.validation.accuracy"),
                                   col("RTE loss", "metrics.validation.loss", scale=1,
                                       format=".3f", score=False)])
    accs, losses = [0.61, 0.64, 0.66], [0.7123, 0.6981, 0.6544]
    records = [
        record(
            "bert-tiny-scratch",
            "glue/rte",
            seed,
            {"validation": {"accuracy": a, "loss": x}},
            task_cfg=cfg,
        )
        for seed, (a, x) in enumerate(zip(accs, losses, strict=True))
    ]
    table = build_table(records, "glue")
    text = render_markdown(table)
    header, row = markdown_table(text)
    assert header == ["Model", "GLUE score", "RTE (acc)", "RTE loss"]
    assert row[2] == cell_text(accs)  # x100, .1f
    assert row[3] == cell_text(losses, scale=1, spec=".3f")
    # the loss does not score
    assert row[1] == f"{100 * statistics.mean(accs):.1f} ± {100 * half_width(accs):.1f} (1/9 tasks)"
    assert "×100: RTE (acc); raw values: RTE loss" in text


# ------------------------------------------------------------------ the pretraining board


def pretrain_task(name="pretrain/wikipedia", split="heldout") -> dict:
    """The pretrain/_base.yaml columns, resolved for a task whose first eval split is ``split``."""
    return task_config(name, [
        col("MLM loss", f"metrics.{split}.mlm_loss", higher_is_better=False, format=".3f"),
        col("perplexity", f"metrics.{split}.perplexity", higher_is_better=False, format=".2f"),
        col("denoising loss", f"metrics.{split}.denoising_loss", higher_is_better=False,
            format=".3f"),
        col("PLM loss", f"metrics.{split}.plm_loss", higher_is_better=False, format=".3f"),
        col("tokens", "throughput.train_tokens", score=False, format="#.3g", varies=False),
        col("FLOPs", "throughput.train_flops", score=False, format="#.3g", varies=False),
        col("tokens/s", "throughput.train_tokens_per_s", higher_is_better=True, score=False,
            format=",.0f"),
        col("wall time (s)", "wall_time_s", higher_is_better=False, score=False, format=",.0f"),
        col("parameters", "parameters", score=False, format="#.3g", varies=False),
        col("recipe", "recipe.text", text="column"),
    ], metrics=[], splits=[split], board="pretrain")


def pretrain_record(model, seed, loss, task="pretrain/wikipedia", split="heldout", **extra):

    return record(model, task, seed, {split: {"mlm_loss": loss, "perplexity": math.exp(loss)}},
                  task_cfg=pretrain_task(task, split),
                  throughput={"train_tokens": 1_234_567, "train_flops": 3.2e15,
                              "train_tokens_per_s": 45678.9, "train_samples_per_s": 10.0},
                  wall_time_s=3600.4, parameters=4_385_920, **extra)


def test_pretrain_board_shows_losses_as_they_are_and_has_no_score():
    losses = {"a-big-model": [2.9, 3.1], "z-small-model": [2.1, 2.2]}  # z is better, a sorts first
    records = [pretrain_record(model, seed, loss)
               for model, seed_losses in losses.items() for seed, loss in enumerate(seed_losses)]
    table = build_table(records, "pretrain")
    assert all(row.score is None for row in table.rows)
    text = render_markdown(table)
    header, *body = markdown_table(text)
    assert header == ["Model", "MLM loss", "perplexity", "tokens", "FLOPs", "tokens/s",
                      "wall time (s)", "parameters"]  # no score column
    assert [cells[0] for cells in body] == ["a-big-model", "z-small-model"]  # by label
    for cells in body:
        seed_losses = losses[cells[0]]
        assert cells[1] == cell_text(seed_losses, scale=1, spec=".3f")  # raw, not x100
        assert cells[2] == cell_text([math.exp(x) for x in seed_losses], scale=1, spec=".2f")
        # tokens, FLOPs and parameters do not vary with the seed: the value alone
        assert cells[3:] == ["1.23e+06", "3.20e+15", "45,679 ± 0 (n=2)", "3,600 ± 0 (n=2)",
                             "4.39e+06"]
    assert "Lower is better: MLM loss, perplexity, wall time (s)." in text
    assert "raw values" in text and "score" not in text.lower()
    rows = list(csv.DictReader(io.StringIO(render_csv(table))))
    assert "score" not in rows[0] and float(rows[1]["MLM loss mean"]) == pytest.approx(2.15)


def test_a_label_two_tasks_share_is_tagged_with_its_task():
    records = [
        pretrain_record("bert-tiny-scratch", 0, 3.0),
        pretrain_record("bert-tiny-scratch", 0, 4.0, task="pretrain/wikitext", split="validation"),
    ]
    table = build_table(records, "pretrain")
    # wikitext is first in the board's task_order
    assert table.labels[:2] == ["MLM loss [pretrain/wikitext]", "perplexity [pretrain/wikitext]"]
    assert "MLM loss [pretrain/wikipedia]" in table.labels
    cells = table.rows[0].cells
    assert cells["MLM loss [pretrain/wikitext]"].mean == 4.0
    assert cells["MLM loss [pretrain/wikipedia]"].mean == 3.0


def test_lower_is_better_score_sorts_rows_ascending():
    board = Board.from_config({
        "name": "toy", "defaults": {"format": ".2f"},
        "aggregate": {"method": "mean", "label": "mean loss"},
    })
    cfg = task_config("toy/a", [col("loss", "metrics.dev.loss", higher_is_better=False),
                                col("ppl", "metrics.dev.ppl", higher_is_better=False)],
                      board="toy")
    values = {"m1": (3.0, 20.0), "m2": (1.0, 3.0), "m3": (2.0, 7.0)}
    records = [record(m, "toy/a", 0, {"dev": {"loss": loss, "ppl": ppl}}, task_cfg=cfg)
               for m, (loss, ppl) in values.items()]
    table = build_table(records, board)
    assert [row.label for row in table.rows] == ["m2", "m3", "m1"]  # ascending mean
    for row in table.rows:
        assert row.score == pytest.approx(statistics.mean(values[row.label]))
    text = render_markdown(table)
    assert markdown_table(text)[1][:2] == ["m2", "2.00 (2/2 columns)"]
    assert "mean loss (lower is better)" in text

    # a higher-is-better column mixed into the same mean has no meaning: refused
    mixed = task_config("toy/b", [col("acc", "metrics.dev.acc")], board="toy")
    records.append(record("m1", "toy/b", 0, {"dev": {"acc": 0.5}}, task_cfg=mixed))
    with pytest.raises(PlmbenchError, match="set score: false"):
        build_table(records, board)


# ------------------------------------------------------------------ boards as files


def test_the_shipped_boards():
    assert known_boards() == sorted(path.stem for path in BOARD_DIR.glob("*.yaml"))
    assert {"glue", "pretrain"} <= set(known_boards())
    glue = get_board("glue")
    assert list(glue.task_order) == GLUE_ORDER
    assert (glue.aggregate, glue.score_label, glue.scale) == ("task_macro", "GLUE score", 100)
    pretrain = get_board("pretrain")
    assert pretrain.aggregate == "none" and pretrain.scale == 1


def test_shipped_task_yamls_give_the_glue_columns_and_resolve_the_pretrain_split():
    """Compose every shipped task with Hydra, as a run does, and read its columns back."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from bench.compose import resolve_target
    from bench.run.execute import CONF_DIR

    records = []
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        for path in sorted((CONF_DIR / "task").glob("*/*.yaml")):
            if path.stem == "_base":
                continue
            composed = compose("config", [f"task={path.parent.name}/{path.stem}"])
            if "target" in composed.task and composed.task.target is None:
                continue  # an analysis of a fine-tuned run's task: it resolves with that run
            resolve_target(composed)
            task = OmegaConf.to_container(composed, resolve=True)["task"]
            metrics = {}
            for column in task["columns"]:
                node, keys = metrics, column["value"].split(".")
                if keys[0] != "metrics":
                    continue
                for key in keys[1:-1]:
                    node = node.setdefault(key, {})
                node[keys[-1]] = 0.5
            records.append(record("bert-tiny-scratch", task["name"], 0, metrics, task_cfg=task,
                                  throughput={"train_tokens": 1000}))
            if task["name"] == "pretrain/wikipedia":
                assert task["columns"][0]["value"] == "metrics.heldout.mlm_loss"
                assert task["columns"] == pretrain_task()["columns"]  # this file's copy
            if task["name"] == "pretrain/wikitext":
                assert task["columns"][0]["value"] == "metrics.validation.mlm_loss"
    glue = build_table(records, "glue")
    assert glue.labels == [
        "CoLA (MCC)", "SST-2 (acc)", "MRPC (F1)", "MRPC (acc)", "STS-B (P)", "STS-B (S)",
        "QQP (F1)", "QQP (acc)", "MNLI-m", "MNLI-mm", "QNLI (acc)", "RTE (acc)", "WNLI (acc)",
    ]
    assert glue.rows[0].score == pytest.approx(50.0) and glue.rows[0].n_scored == 9
    pretrain = build_table(records, "pretrain")
    assert pretrain.labels[:2] == ["MLM loss [pretrain/wikitext]", "perplexity [pretrain/wikitext]"]


def test_no_matching_records_gives_an_empty_table_and_one_line(tmp_path):
    records, _ = sweep()
    failed = [dict(r, status="failed") for r in records]
    table = build_table(failed, "glue")
    assert table.rows == [] and table.n_records == 0
    message = render_markdown(table, tmp_path)
    first, *listed = message.splitlines()
    assert "no finished runs" in first.lower() and "glue" in first and str(tmp_path) in first
    # the failures are listed, one line each, never a row
    assert len(table.failures) == len(failed)
    assert sum(line.startswith("- ") for line in listed) == len(failed)
    assert render_markdown(build_table([], "glue"), tmp_path).count("\n") == 1
    assert render_csv(table) == ("model,protocol_hash,score,score_ci_low,score_ci_high,n_tasks,"
                                 "marks\n")
    # a glue sweep is nothing for the pretraining board
    message = render_markdown(build_table(records, "pretrain"))
    assert message == "No finished runs of board 'pretrain' in the given records.\n"


def test_unknown_board_lists_the_known_ones():
    with pytest.raises(PlmbenchError) as error:
        get_board("no_such_board")
    assert str(error.value) == (
        f"unknown board 'no_such_board'; known boards: {', '.join(known_boards())}"
    )
    assert {"glue", "pretrain"} <= set(known_boards())


@pytest.mark.parametrize("config, fragment", [
    ({"name": "b", "aggregate": {"method": "median"}}, "aggregate.method 'median'"),
    ({"name": "b", "defaults": {"scale": 0}}, "scale must be a positive number"),
    ({"name": "b", "defaults": {"format": "%d"}}, "not a float format spec"),
    ({"name": "b", "colums": []}, "unknown key colums (did you mean columns?)"),
])
def test_bad_board_configs_are_named(config, fragment):
    with pytest.raises(PlmbenchError) as error:
        Board.from_config(config)
    assert fragment in str(error.value)


def test_a_bad_column_in_a_record_is_listed_with_its_task_not_a_crash():
    cfg = task_config("glue/rte", [{"label": "RTE (acc)"}])  # no value
    bad = record(
        "bert-tiny-scratch", "glue/rte", 0, {"validation": {"accuracy": 0.5}}, task_cfg=cfg
    )
    table = build_table([bad], "glue")
    assert table.rows == []
    (unused,) = table.unused
    assert "task glue/rte columns[0] needs a label and a value" in unused.why


# ------------------------------------------------------------------ board columns, rows by label


def domain_board(**extra) -> Board:
    return Board.from_config({
        "name": "domain", "rows": "label", "defaults": {"scale": 100, "format": ".1f"},
        "task_order": ["scibert_tc/chemprot", "pretrain/*"],  # a board column's task: its pattern
        "columns": [
            {"tasks": "pretrain/*", "label": "pretraining tokens",
             "value": "throughput.train_tokens", "scale": 1, "score": False, "format": ".0f"},
        ], **extra})


def test_a_board_column_spans_the_tasks_it_matches_and_rows_group_by_label():
    """A row is a label: its fine-tuning seeds (one protocol) and the pretraining runs that made
    its models (others) fill one row; the board's column replaces the pretraining tasks' own and
    aggregates over every task it matches (two TAPT runs: their mean, n=2)."""
    board = domain_board()
    finetune = task_config("scibert_tc/chemprot", [col("ChemProt", "metrics.test.micro_f1")],
                           board="domain")
    scores = {"m/tapt": [0.5, 0.7], "m/dapt": [0.6, 0.8]}
    records = [record(label, "scibert_tc/chemprot", seed, {"test": {"micro_f1": value}},
                      protocol=f"ft-{label}", task_cfg=finetune)
               for label, values in scores.items() for seed, value in enumerate(values)]
    tokens = {("m/tapt", "pretrain/tapt/chemprot"): 1000, ("m/tapt", "pretrain/tapt/ncbi"): 3000,
              ("m/dapt", "pretrain/pubmed"): 8000}
    for (label, task), count in tokens.items():
        own = {**pretrain_task(task), "board": "domain"}
        records.append(record(label, task, 0, {"heldout": {"mlm_loss": 2.0}},
                              protocol=f"pt-{task}", task_cfg=own,
                              throughput={"train_tokens": count}))
    table = build_table(records, board)
    assert table.labels == ["ChemProt", "pretraining tokens"]  # no MLM loss, no per-task copies
    rows = {row.label: row for row in table.rows}
    assert set(rows) == {"m/tapt", "m/dapt"}
    tapt = rows["m/tapt"]
    assert tapt.cells["ChemProt"].n == 2
    assert tapt.cells["ChemProt"].mean == pytest.approx(0.6)
    assert tapt.cells["pretraining tokens"].values == (1000.0, 3000.0)
    assert rows["m/dapt"].cells["pretraining tokens"].mean == 8000
    assert tapt.protocol_hash != rows["m/dapt"].protocol_hash and len(tapt.protocol_hash) == 16
    # grouped by protocol instead, the label's runs are rows of their own
    by_protocol = build_table(records, Board.from_config({"name": "domain"}))
    assert len(by_protocol.rows) > 2


def test_bad_board_columns_and_rows_are_one_line():
    with pytest.raises(PlmbenchError, match="rows 'model' is not one of protocol, label"):
        Board.from_config({"name": "d", "rows": "model"})
    with pytest.raises(PlmbenchError, match=r"columns\[0\] needs tasks"):
        Board.from_config({"name": "d", "columns": [{"label": "x", "value": "wall_time_s"}]})
    with pytest.raises(PlmbenchError, match=r"columns\[0\]: unknown key task \(did you mean tasks"):
        Board.from_config({"name": "d", "columns": [{"tasks": "a/*", "task": "a", "label": "x",
                                                     "value": "wall_time_s"}]})


def test_a_board_extends_another_and_a_cycle_is_one_line(tmp_path, monkeypatch):
    import bench.boards.config as board_config

    for name in ("glue", "distill"):
        (tmp_path / f"{name}.yaml").write_text((BOARD_DIR / f"{name}.yaml").read_text())
    (tmp_path / "a.yaml").write_text("extends: b\nname: a\ntitle: A\n")
    (tmp_path / "b.yaml").write_text("extends: a\nname: b\ntitle: B\n")
    monkeypatch.setattr(board_config, "BOARD_DIR", tmp_path)
    glue, distill = get_board("glue"), get_board("distill")
    assert (distill.name, distill.reference, glue.reference) == ("distill", "teacher", "")
    assert distill.task_order == glue.task_order and distill.columns == glue.columns
    with pytest.raises(PlmbenchError, match="extends 'a', which extends it back"):
        get_board("a")
    (tmp_path / "c.yaml").write_text("name: c\ntitle: C\naggregate: {method: none}\n"
                                     "reference: teacher\n")
    with pytest.raises(PlmbenchError, match="reference must be a row label"):
        get_board("c")
