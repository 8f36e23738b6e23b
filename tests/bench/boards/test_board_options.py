"""The leaderboard's options, through the ``plmbench leaderboard`` command on records written to
disk: ``--stat median`` (cramming's statistic), ``--select best-on-dev`` (the BERT paper's grid
protocol) and ``--compare DIR_A DIR_B``; each checked against values computed here.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import statistics

from scipy import stats as scipy_stats

from bench.cli import main
from bench.record import write_record
from tests.bench.boards.test_leaderboard import TASKS, markdown_table, record, split_metric, sweep


def write_all(directory, records) -> None:
    for i, rec in enumerate(records):
        write_record(directory / f"run{i:03d}", rec)


def leaderboard(capsys, *argv) -> str:
    assert main(["leaderboard", *map(str, argv), "--no-baselines"]) == 0
    return capsys.readouterr().out


def rows_of(text: str) -> dict[str, dict[str, str]]:
    header, *body = markdown_table(text)
    return {cells[0]: dict(zip(header, cells, strict=True)) for cells in body}


def test_median_cells_and_score_use_the_median_and_the_range(tmp_path, capsys):
    records, values = sweep()
    write_all(tmp_path, records)
    rows = rows_of(leaderboard(capsys, tmp_path, "--stat", "median"))
    for model, columns in values.items():
        for column, seed_values in columns.items():
            low, high = min(seed_values), max(seed_values)
            expected = (f"{100 * statistics.median(seed_values):.1f} "
                        f"[{100 * low:.1f}, {100 * high:.1f}] (n=3)")
            assert rows[model][column] == expected
        task_scores = [statistics.mean(statistics.median(columns[c["label"]])
                                       for c in config["columns"]) for config in TASKS.values()]
        assert rows[model]["GLUE score"].startswith(f"{100 * statistics.mean(task_scores):.1f} ")
    # the mean is still the default, and a mean cell differs from the median one
    mean_rows = rows_of(leaderboard(capsys, tmp_path))
    assert " ± " in mean_rows["bert-tiny-scratch"]["RTE (acc)"]


#: the grid's points: a learning rate, and a task key the command line set (task.batch_size)
POINTS = {"lr2e-5": (2e-5, 16), "lr3e-5": (3e-5, 16), "lr5e-5": (5e-5, 32)}


def grid_records() -> tuple[list[dict], dict[tuple[str, str], str]]:
    """Two models x two tasks x three grid points (protocols) x two seeds; and, per (model,
    task), the protocol whose mean over seeds of the task's scoring columns is the highest."""
    rng = random.Random(1)
    records, best = [], {}
    for model in ("bert-tiny-scratch", "electra-small-scratch"):
        for task in ("glue/rte", "glue/mrpc"):
            means = {}
            for point, (lr, batch) in POINTS.items():
                protocol = hashlib.sha256(f"{model} {point}".encode()).hexdigest()[:16]
                per_seed = []
                for seed in (0, 1):
                    metrics = {}
                    for column in TASKS[task]["columns"]:
                        split, metric = split_metric(column["value"])
                        metrics.setdefault(split, {})[metric] = rng.uniform(0.5, 0.9)
                    per_seed.append(statistics.mean(
                        metrics[s][m] for s, m in
                        (split_metric(c["value"]) for c in TASKS[task]["columns"])))
                    made = record(model, task, seed, metrics, protocol=protocol,
                                  variant=[f"optim.lr={lr}", f"task.batch_size={batch}"])
                    made["config"] |= {"optim": {"lr": lr, "schedule": "linear"},
                                       "task": {**TASKS[task], "batch_size": batch}}
                    records.append(made)
                means[protocol] = statistics.mean(per_seed)
            best[model, task] = max(means, key=means.get)
    return records, best


def test_best_on_dev_keeps_per_model_and_task_the_best_grid_point(tmp_path, capsys):
    records, best = grid_records()
    write_all(tmp_path, records)
    # without selection, every grid point is a row of its own: 3 per model
    assert len(rows_of(leaderboard(capsys, tmp_path))) == 6
    rows = rows_of(leaderboard(capsys, tmp_path, "--select", "best-on-dev"))
    assert sorted(rows) == ["bert-tiny-scratch", "electra-small-scratch"]
    for (model, task), protocol in best.items():
        chosen = [r for r in records if (r["label"], r["task"], r["protocol_hash"]) ==
                  (model, task, protocol)]
        for column in TASKS[task]["columns"]:
            split, metric = split_metric(column["value"])
            seed_values = [r["metrics"][split][metric] for r in chosen]
            assert rows[model][column["label"]].startswith(  # ± h, or [low, high] at a bound
                (f"{100 * statistics.mean(seed_values):.1f} ± ",
                 f"{100 * statistics.mean(seed_values):.1f} ["))
            assert rows[model][column["label"]].endswith("(n=2)")


def test_sweep_rows_are_named_by_the_values_that_tell_them_apart(tmp_path, capsys):
    records, _ = grid_records()
    write_all(tmp_path, records)
    text = leaderboard(capsys, tmp_path)
    rows = rows_of(text)
    # the learning rate alone tells the points apart: the batch size is left to the legend
    assert sorted(rows) == sorted(f"{model} lr={lr}"
                                  for model in ("bert-tiny-scratch", "electra-small-scratch")
                                  for lr, _ in POINTS.values())
    for model in ("bert-tiny-scratch", "electra-small-scratch"):
        for lr, batch in POINTS.values():
            assert f"- {model} lr={lr}: optim.lr={lr}, task.batch_size={batch}\n" in text
    # a row's name is its own: with one point alone on the board it is the label
    alone = tmp_path / "alone"
    write_all(alone, [r for r in records if r["config"]["optim"]["lr"] == 3e-5])
    assert sorted(rows_of(leaderboard(capsys, alone))) == [
        "bert-tiny-scratch",
        "electra-small-scratch",
    ]


def test_compare_matches_a_configuration_whatever_else_either_side_holds(tmp_path, capsys):
    records, _ = grid_records()
    write_all(tmp_path / "a", records)  # three points per model
    write_all(tmp_path / "b", [r for r in records if r["config"]["optim"]["lr"] == 3e-5])
    text = leaderboard(capsys, "--compare", tmp_path / "a", tmp_path / "b", "--resamples", "50",
                       "--aso-iterations", "20")
    rows = rows_of(text.split("\n### ", 1)[0])  # the cells, then each shared row tested
    assert len(rows) == 6 and text.count("\n### ") == 2  # the two configurations both hold
    same = rows["bert-tiny-scratch lr=3e-05"]["RTE (acc)"]
    before, after = same.split(" (")[0].split(" → ")
    assert before == after and "(+0.0)" in same
    assert rows["bert-tiny-scratch lr=2e-05"]["RTE (acc)"].startswith(
        "only A: ")


def test_best_on_dev_says_which_point_it_chose(tmp_path, capsys):
    records, best = grid_records()
    write_all(tmp_path, records)
    lr_of = {r["protocol_hash"]: r["config"]["optim"]["lr"] for r in records}
    batch_of = {r["protocol_hash"]: r["config"]["task"]["batch_size"] for r in records}

    def point(model, task):
        return f"optim.lr={lr_of[best[model, task]]}, task.batch_size={batch_of[best[model, task]]}"

    text = leaderboard(capsys, tmp_path, "--select", "best-on-dev")
    for (model, task) in best:
        assert f"- {model} {task}: {point(model, task)} (dev mean " in text
    assert main(["leaderboard", str(tmp_path), "--no-baselines", "--select", "best-on-dev",
                 "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert (
        f"best-on-dev: bert-tiny-scratch glue/rte: {point('bert-tiny-scratch', 'glue/rte')}" in err
    )
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(out))}
    assert rows["bert-tiny-scratch"]["selected"] == (
        f"glue/mrpc: {point('bert-tiny-scratch', 'glue/mrpc')}; "
        f"glue/rte: {point('bert-tiny-scratch', 'glue/rte')}"
    )
    assert main(["leaderboard", str(tmp_path), "--no-baselines", "--select", "best-on-dev",
                 "--format", "json"]) == 0
    board = json.loads(capsys.readouterr().out)
    (row,) = [r for r in board["rows"] if r["label"] == "electra-small-scratch"]
    chosen = row["selected"]["glue/rte"]
    assert chosen["protocol_hash"] == best["electra-small-scratch", "glue/rte"] and chosen["n"] == 2
    assert chosen["point"] == {"optim.lr": json.dumps(lr_of[chosen["protocol_hash"]]),
                               "task.batch_size": str(batch_of[chosen["protocol_hash"]])}
    assert chosen["of"] == 3


def test_compare_shows_both_means_and_their_difference(tmp_path, capsys):
    records, values = sweep()
    shifted = [
        {**rec, "metrics": {split: {metric: value + 0.01 for metric, value in by_metric.items()}
                            for split, by_metric in rec["metrics"].items()}}
        for rec in records if rec["label"] == "bert-tiny-scratch"
    ]
    only_b = record("roberta-tiny-scratch", "glue/rte", 0, {"validation": {"accuracy": 0.5}},
                    protocol="s" * 16)
    write_all(tmp_path / "a", records)
    write_all(tmp_path / "b", [*shifted, only_b])
    text = leaderboard(capsys, "--compare", tmp_path / "a", tmp_path / "b",
                       "--aso-iterations", "50")
    cells, tests = text.split("\n### ", 1)
    rows = rows_of(cells)
    before = 100 * statistics.mean(values["bert-tiny-scratch"]["RTE (acc)"])
    # +1 point on every seed, marked "~" as Welch's test over the three seeds (scipy) cannot
    # tell it from noise at 5%
    seeds = values["bert-tiny-scratch"]["RTE (acc)"]
    p = scipy_stats.ttest_ind([v + 0.01 for v in seeds], seeds, equal_var=False).pvalue
    mark = " ~" if p >= 0.05 else ""
    assert rows["bert-tiny-scratch"]["RTE (acc)"] == f"{before:.1f} → {before + 1:.1f} (+1.0){mark}"
    # the rows both sides have are tested per task and on the score (Welch: no predictions)
    assert (
        tests.startswith("bert-tiny-scratch: B = ") and "electra-small-scratch: B = " not in tests
    )  # A only
    assert "| **aggregate** |" in tests and "| Welch |" in tests
    assert rows["electra-small-scratch"]["RTE (acc)"].startswith("only A: ")
    assert rows["roberta-tiny-scratch"]["RTE (acc)"] == "only B: 50.0"
    assert rows["roberta-tiny-scratch"]["MRPC (F1)"] == "–"


def test_an_unknown_statistic_is_refused_in_one_line(tmp_path, capsys):
    assert main(["leaderboard", str(tmp_path), "--stat", "mode"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "invalid choice: 'mode'" in line
