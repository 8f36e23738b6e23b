"""The leaderboard's options, through the ``plmbench leaderboard`` command on records written to
disk: ``--stat median`` (cramming's statistic), ``--select best-on-dev`` (the BERT paper's grid
protocol) and ``--compare DIR_A DIR_B``; each checked against values computed here.
"""

from __future__ import annotations

import hashlib
import random
import statistics

import pytest
from scipy import stats as scipy_stats

from bench.cli import main
from bench.records import write_record
from tests.bench.test_leaderboard import TASKS, markdown_table, record, split_metric, sweep


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
    assert " ± " in mean_rows["bert-tiny"]["RTE (acc)"]


def grid_records() -> tuple[list[dict], dict[tuple[str, str], str]]:
    """Two models x two tasks x three grid points (protocols) x two seeds; and, per (model,
    task), the protocol whose mean over seeds of the task's scoring columns is the highest."""
    rng = random.Random(1)
    records, best = [], {}
    for model in ("bert-tiny", "electra-small"):
        for task in ("glue/rte", "glue/mrpc"):
            means = {}
            for point in ("lr2e-5", "lr3e-5", "lr5e-5"):
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
                    records.append(record(model, task, seed, metrics, protocol=protocol))
                means[protocol] = statistics.mean(per_seed)
            best[model, task] = max(means, key=means.get)
    return records, best


def test_best_on_dev_keeps_per_model_and_task_the_best_grid_point(tmp_path, capsys):
    records, best = grid_records()
    write_all(tmp_path, records)
    # without selection, every grid point is a row of its own: 3 per model
    assert len(rows_of(leaderboard(capsys, tmp_path))) == 6
    rows = rows_of(leaderboard(capsys, tmp_path, "--select", "best-on-dev"))
    assert sorted(rows) == ["bert-tiny", "electra-small"]
    for (model, task), protocol in best.items():
        chosen = [r for r in records if (r["label"], r["task"], r["protocol_hash"]) ==
                  (model, task, protocol)]
        for column in TASKS[task]["columns"]:
            split, metric = split_metric(column["value"])
            seed_values = [r["metrics"][split][metric] for r in chosen]
            assert rows[model][column["label"]].startswith(
                f"{100 * statistics.mean(seed_values):.1f} ± ")
            assert rows[model][column["label"]].endswith("(n=2)")


def test_compare_shows_both_means_and_their_difference(tmp_path, capsys):
    records, values = sweep()
    shifted = [
        {**rec, "metrics": {split: {metric: value + 0.01 for metric, value in by_metric.items()}
                            for split, by_metric in rec["metrics"].items()}}
        for rec in records if rec["label"] == "bert-tiny"
    ]
    only_b = record("roberta-tiny", "glue/rte", 0, {"validation": {"accuracy": 0.5}},
                    protocol="s" * 16)
    write_all(tmp_path / "a", records)
    write_all(tmp_path / "b", [*shifted, only_b])
    text = leaderboard(capsys, "--compare", tmp_path / "a", tmp_path / "b",
                       "--aso-iterations", "50")
    cells, tests = text.split("\n### ", 1)
    rows = rows_of(cells)
    before = 100 * statistics.mean(values["bert-tiny"]["RTE (acc)"])
    # +1 point on every seed, marked "~" as Welch's test over the three seeds (scipy) cannot
    # tell it from noise at 5%
    seeds = values["bert-tiny"]["RTE (acc)"]
    p = scipy_stats.ttest_ind([v + 0.01 for v in seeds], seeds, equal_var=False).pvalue
    mark = " ~" if p >= 0.05 else ""
    assert rows["bert-tiny"]["RTE (acc)"] == f"{before:.1f} → {before + 1:.1f} (+1.0){mark}"
    # the rows both sides have are tested per task and on the score (Welch: no predictions)
    assert tests.startswith("bert-tiny: B = ") and "electra-small: B = " not in tests  # A only
    assert "| **aggregate** |" in tests and "| Welch |" in tests
    assert rows["electra-small"]["RTE (acc)"].startswith("only A: ")
    assert rows["roberta-tiny"]["RTE (acc)"] == "only B: 50.0"
    assert rows["roberta-tiny"]["MRPC (F1)"] == "–"


def test_an_unknown_statistic_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["leaderboard", str(tmp_path), "--stat", "mode"])
    assert "invalid choice: 'mode'" in capsys.readouterr().err
