"""Short, stable, unique row names (bench/boards/points.py): rows of one model whose configs differ
in many keys (a learning rate, the checkpoint each starts from, the net's sizes) are named by the
fewest settings that tell them apart, not by a dump of every difference; the whole difference is
one column (CSV, JSON), one legend line (Markdown) or one tooltip (HTML) away, and ``plmbench
significance`` takes the short name or the old full one."""

from __future__ import annotations

import csv
import io
import json
import re

from bench.boards.html import render_html
from bench.boards.sections import build_tables
from bench.boards.significance import find_row
from bench.boards.text import render_csv, render_markdown
from bench.record import read_records, write_record
from tests.bench.boards.test_leaderboard import record
from tests.bench.boards.test_significance import RTE
from tests.bench.invoke import plmbench

#: four runs of one model: each starts from another checkpoint, and the learning rate, the
#: net's sizes and the step count differ between them in every way a sweep could
POINTS = [(1e-4, 128, 2, 100), (3e-4, 128, 2, 100), (1e-4, 256, 4, 200), (3e-4, 256, 4, 200)]


def sweep_records() -> list[dict]:
    records = []
    for i, (lr, hidden, layers, steps) in enumerate(POINTS):
        config = {"optim": {"lr": lr, "weight_decay": 0.01},
                  "init_from": f"ckpt:/home/someone/experiments/pretraining/run-{i}/seed0",
                  "model": {"name": "minilm-l6", "hidden_size": hidden, "num_layers": layers,
                            "intermediate_size": 4 * hidden, "num_heads": hidden // 64},
                  "trainer": {"max_steps": steps, "val_check_interval": steps // 2}}
        for seed in (0, 1):
            made = record("minilm-l6", "glue/rte", seed,
                          {"validation": {"accuracy": 0.55 + 0.03 * i + 0.01 * seed}},
                          task_cfg=RTE, protocol=f"{i:x}" * 16)
            made["config"] |= config
            records.append(made)
    return records


def test_rows_get_short_unique_names_with_their_settings_one_step_away(tmp_path):
    records = sweep_records()
    (table,) = build_tables(records, "glue")
    names = sorted(row.label for row in table.rows)
    assert len(set(names)) == len(POINTS)
    # the learning rate and a size tell the four apart: no checkpoint path, no dump
    for name in names:
        assert name.startswith("minilm-l6 ") and len(name) <= len("minilm-l6 ") + 40, name
        assert "/" not in name and "lr=0.000" in name and name.count("=") == 2, name
    assert min(len(row.full_name) for row in table.rows) >= 200  # what boards named them
    (again,) = build_tables(list(reversed(records)), "glue")
    assert sorted(row.label for row in again.rows) == names  # stable
    for row in table.rows:  # the full settings, and both names find the row
        assert row.point["optim.lr"] in ("0.0001", "0.0003")
        assert row.point["model.hidden_size"] in ("128", "256")
        assert find_row(table, row.label) is row and find_row(table, row.full_name) is row

    markdown = render_markdown(table)
    for row in table.rows:
        assert f"- {row.label}: init_from=" in markdown
    parsed = list(csv.DictReader(io.StringIO(render_csv(table))))
    assert {r["model"]: r["settings"] for r in parsed} == {
        row.label: ", ".join(f"{k}={v}" for k, v in row.point.items()) for row in table.rows}
    data = json.loads(render_html(table).split('id="data">')[1].split("</script>")[0]
                      .replace("&quot;", '"'))
    assert {r["label"]: r["settings"] for r in data["rows"]} == {
        row.label: row.point for row in table.rows}
    page = render_html(table)
    for row in table.rows:  # the name's cell carries the settings as its tooltip
        assert re.search(rf'data-value="{re.escape(row.label)}" title="init_from=', page)
    widths = [int(w) for w in re.findall(r'class="plot forest" data-plot="[^"]+" width="(\d+)"',
                                         page)]
    assert widths and max(widths) < 900  # the forest plot stays a sane width


def test_significance_takes_the_short_and_the_full_name(tmp_path):
    for made in sweep_records():
        write_record(tmp_path / made["protocol_hash"][:4] / f"seed{made['seed']}", made)
    records, _ = read_records(tmp_path)
    (table,) = build_tables(records, "glue")
    first, second = table.rows[:2]
    for a, b in ((first.label, second.label), (first.full_name, second.label)):
        done = plmbench("significance", a, b, str(tmp_path), "--resamples", "50",
                        "--aso-iterations", "0")
        assert done.rc == 0, done.err
        assert f"B = {b} against A = {a}" in done.out
    wrong = plmbench("significance", "minilm-l6 lr=9", first.label, str(tmp_path))
    assert wrong.rc == 2 and first.label in wrong.err


def test_a_long_label_is_cut_on_the_forest_plot_and_whole_in_its_tooltip():
    label = "my-model-" + "-".join(f"setting{i}=value{i}" for i in range(20))  # ~300 chars
    records = [record(name, "glue/rte", seed, {"validation": {"accuracy": 0.6 + seed / 50}},
                      task_cfg=RTE, protocol=name[:1] * 16)
               for name in (label, "other") for seed in (0, 1)]
    for made in records:
        made["label"] = made["model"]
    page = render_html(build_tables(records, "glue")[0])
    widths = [int(w) for w in re.findall(r'class="plot forest" data-plot="[^"]+" width="(\d+)"',
                                         page)]
    assert len(label) > 250 and widths and max(widths) < 900
    assert f"<title>{label}</title>" in page  # the whole name, on hover
    assert re.search(rf'<text class="label"[^>]*>{re.escape(label[:40])}[^<]*…</text>', page)
