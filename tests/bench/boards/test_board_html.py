"""The HTML leaderboard in a real headless browser (Chromium through Playwright, pointed at the
system's /usr/bin/chromium; nothing is downloaded): the page opens with no network, the table
reads back as rendered, clicking a header sorts by that column, and the plots are drawn: a
forest plot per task with the rows' intervals, the rows x tasks heatmap, and the score against
cost with its Pareto frontier, every label measured in the browser to touch no other label or
point and to stay inside its plot (names of the widest glyphs too), a label away from its point
joined to it by a leader line; a board of two evaluation sets is two sortable tables on one
page."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from bench.boards.html import render_html
from bench.boards.plots import pareto
from bench.boards.references import load_references
from bench.boards.sections import build_tables
from bench.boards.table import build_table
from bench.boards.text import cell_text
from bench.run.execute import CONF_DIR
from tests.bench.boards.test_leaderboard import TASKS, record, sweep, task_config
from tests.conftest import in_ci, require

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def page(tmp_path):
    sync_api = require("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        if in_ci():
            pytest.fail(f"no Chromium at {CHROMIUM}; .ci/run installs Debian's chromium")
        pytest.skip(f"no Chromium at {CHROMIUM}")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            offline=True,
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def test_the_page_opens_offline_sorts_by_a_clicked_header_and_draws_its_plots(page, tmp_path):
    records, _ = sweep()
    sizes = {"bert-tiny-scratch": 4_400_000, "electra-small-scratch": 13_500_000}
    for one in records:
        one["parameters"] = sizes[one["model"]]
    table = build_table(records, "glue")
    html = render_html(table)
    assert html == render_html(build_table(list(reversed(records)), "glue"))  # same bytes
    path = tmp_path / "board.html"
    path.write_text(html, encoding="utf-8")
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    assert all(url.startswith("file:") for url in requests)  # self-contained

    headers = page.locator("#board thead th").all_inner_texts()
    assert headers == ["Model", "GLUE score", *table.labels]
    models = page.locator("#board tbody tr td:first-child").all_inner_texts()
    assert models == [row.label for row in table.rows]  # best score first
    cells = page.locator("#board tbody tr").first.locator("td").all_inner_texts()
    first = table.rows[0]
    assert cells[2] == cell_text(first, table.columns[0], table)

    rte = headers.index("RTE (acc)")
    for order in (min, max):  # first click ascending, second descending
        page.locator("#board thead th").nth(rte).click()
        shown = page.locator("#board tbody tr td:first-child").all_inner_texts()
        by_rte = {row.label: row.cells["RTE (acc)"].mean for row in table.rows}
        assert shown[0] == order(by_rte, key=by_rte.get)

    dots = page.locator("svg[data-plot=parameters] circle")
    assert dots.count() == len(table.rows)
    box = page.locator("svg[data-plot=parameters]").bounding_box()
    assert box["width"] > 100 and box["height"] > 100  # laid out, not collapsed
    assert page.locator("[data-plot=compute]").inner_text().startswith("no runs")
    # one forest plot per task, a point and an interval per row; no per-seed strips
    assert page.locator("svg.forest").count() == len(TASKS)
    assert page.locator("svg.forest circle.model").count() == len(TASKS) * len(table.rows)
    assert page.locator("svg.forest line.interval").count() == len(TASKS) * len(table.rows)
    assert page.locator("svg[data-plot^=seeds]").count() == 0
    assert page.locator("#heatmap tbody tr").count() == len(table.rows)


def boxes(page, selector: str) -> list[dict]:
    """The drawn bounding boxes of the elements ``selector`` matches, in page coordinates."""
    return page.eval_on_selector_all(selector, "els => els.map(e => { const r = "
                                     "e.getBoundingClientRect(); return {x: r.left, y: r.top, "
                                     "r: r.right, b: r.bottom, text: e.textContent}; })")


def overlapping(a: dict, b: dict) -> bool:
    return a["x"] < b["r"] and b["x"] < a["r"] and a["y"] < b["b"] and b["y"] < a["b"]


def inside(box: dict, frame: dict) -> bool:
    return (box["x"] >= frame["x"] and box["r"] <= frame["r"] and box["y"] >= frame["y"]
            and box["b"] <= frame["b"])


def crowded_records() -> list[dict]:
    """Fourteen models of nearly one size and score, with long names, two seeds each on RTE: the
    worst case for labels."""
    rte = TASKS["glue/rte"]
    records = []
    for i in range(14):
        name = f"a-rather-long-model-name-{i:02d}"
        for seed in (0, 1):
            accuracy = 0.6 + 0.004 * i + 0.01 * seed
            records.append(record(name, "glue/rte", seed, {"validation": {"accuracy": accuracy}},
                                  protocol=f"{i:016d}", task_cfg=rte,
                                  encoder_parameters=4_000_000 + 50_000 * (i % 5)))
    return records


def test_crowded_labels_never_overlap_or_leave_their_plot_and_the_frontier_is_drawn(page,
                                                                                   tmp_path):
    table = build_table(crowded_records(), "glue")
    path = tmp_path / "board.html"
    path.write_text(render_html(table), encoding="utf-8")
    page.goto(path.as_uri())
    for svg in ("svg[data-plot=parameters]", "svg.forest"):
        frame = boxes(page, svg)[0]
        labels = boxes(page, f"{svg} text.point-label, {svg} text.label")
        assert len(labels) == len(table.rows)  # every point named: beside it, or by number
        for i, label in enumerate(labels):
            assert inside(label, frame), label["text"]
            assert not any(overlapping(label, other) for other in labels[i + 1:]), label["text"]
    numbered = page.locator("svg[data-plot=parameters] + ol.legend li").all_inner_texts()
    named = [t["text"] for t in boxes(page, "svg[data-plot=parameters] text.point-label")]
    assert sorted([n for n in named if not n.isdigit()] + numbered) == sorted(
        row.label for row in table.rows)
    # the frontier: the rows no other row beats on both parameters and score
    expected = pareto([(r.parameters, r.score, r.label) for r in table.rows])
    drawn = page.locator("svg[data-plot=parameters] polyline.pareto").get_attribute("points")
    assert len(drawn.split()) == len(expected) > 1
    assert page.locator("svg[data-plot=parameters] circle[fill='#c0392b']").count() == len(
        expected)


def test_reference_rows_are_a_table_of_their_own_and_marked_points(page, tmp_path):
    rte = task_config("glue/rte", [{"label": "RTE (acc)", "value": "metrics.validation.accuracy"}])
    records = [
        record(
            "bert-tiny-scratch",
            "glue/rte",
            seed,
            {"validation": {"accuracy": 0.6 + seed / 50}},
            task_cfg=rte,
        )
        for seed in range(3)
    ]
    table = build_table(records, "glue")
    table.references = load_references("glue_dev")
    path = tmp_path / "board.html"
    path.write_text(render_html(table), encoding="utf-8")
    page.goto(path.as_uri())
    assert page.locator("#board tbody tr").count() == 1  # never among the measured rows
    rows = OmegaConf.load(CONF_DIR / "references" / "glue_dev.yaml").rows  # the file, read apart
    assert page.locator("#references tbody tr").count() == len(table.references) == len(rows)
    # every reference row with an RTE accuracy is a diamond on the RTE forest plot
    diamonds = page.locator("svg.forest polygon.reference")
    assert diamonds.count() == sum("RTE (acc)" in r.values for r in table.references)


def wide_records() -> list[dict]:
    """Eighteen models with names of the widest glyphs (W, M, m, =), close in size, compute and
    score: labels whose width a per-character average underestimates, crowded together."""
    rte = TASKS["glue/rte"]
    records = []
    for i in range(18):
        name = f"WMW-{i:02d} mm=MM" if i % 2 else f"Mwm{i:02d} lr=1e-4"
        for seed in (0, 1):
            records.append(record(name, "glue/rte", seed,
                                  {"validation": {"accuracy": 0.6 + 0.003 * i + 0.01 * seed}},
                                  protocol=f"{i:016d}", task_cfg=rte, init_from="scratch",
                                  throughput={"train_flops": 1e15 * (1 + 0.02 * (i % 6))},
                                  encoder_parameters=4_000_000 + 40_000 * (i % 4)))
    return records


def test_scatter_labels_never_overlap_and_far_ones_have_leader_lines(page, tmp_path):
    table = build_table(wide_records(), "glue")
    path = tmp_path / "board.html"
    path.write_text(render_html(table), encoding="utf-8")
    page.goto(path.as_uri())
    far = 0
    for plot in ("parameters", "compute"):
        svg = f"svg[data-plot={plot}]"
        frame = boxes(page, svg)[0]
        labels = boxes(page, f"{svg} text.point-label")
        dots = boxes(page, f"{svg} circle")
        assert len(dots) == len(table.rows) and len(labels) > len(table.rows) // 2
        for i, label in enumerate(labels):
            assert inside(label, frame), label["text"]
            assert not any(overlapping(label, other) for other in labels[i + 1:]), label["text"]
            assert not any(overlapping(label, dot) for dot in dots), label["text"]
        legend = page.locator(f"{svg} + ol.legend li").all_inner_texts()
        named = [t["text"] for t in labels if not t["text"].isdigit()]
        assert sorted(named + [n.split(" (unlabelled")[0] for n in legend]) == sorted(
            row.label for row in table.rows)
        # a label drawn away from its point is joined to it by a leader line from the point
        anchors = page.eval_on_selector_all(
            f"{svg} text.point-label", "els => els.map(e => [+e.dataset.x, +e.dataset.y])")
        leaders = {(round(float(line.get_attribute("x1")), 1),
                    round(float(line.get_attribute("y1")), 1))
                   for line in page.locator(f"{svg} line.leader").all()}
        for label, (u, v) in zip(labels, anchors, strict=True):
            x, y = u + frame["x"], v + frame["y"]  # the point, in page coordinates
            gap = math.hypot(max(label["x"] - x, 0, x - label["r"]),
                             max(label["y"] - y, 0, y - label["b"]))
            if gap > 14:
                far += 1
                assert (round(u, 1), round(v, 1)) in leaders, label["text"]
    assert far > 0  # the case is crowded enough to need them


def test_two_evaluation_sets_are_two_tables_on_one_page(page, tmp_path):
    rte = TASKS["glue/rte"]
    records = [record(model, "glue/rte", seed, {"validation": {"accuracy": acc + seed / 100}},
                      protocol=model[:1] * 16,
                      task_cfg={**rte, "max_eval_samples": cap, "splits": {"eval": ["validation"]}})
               for model, acc, cap in (("a", 0.6, 16), ("b", 0.7, 16), ("c", 0.5, 128),
                                       ("d", 0.8, 128))
               for seed in (0, 1)]
    tables = build_tables(records, "glue")
    path = tmp_path / "board.html"
    path.write_text(render_html(tables), encoding="utf-8")
    page.goto(path.as_uri())
    assert page.locator("table.board").count() == 2
    ids = page.eval_on_selector_all("[id]", "els => els.map(e => e.id)")
    assert len(ids) == len(set(ids))  # no element id twice
    second = page.locator("table.board").nth(1)
    models = second.locator("tbody tr td:first-child").all_inner_texts()
    assert sorted(models) == sorted(row.label for row in tables[1].rows)
    second.locator("thead th").nth(0).click()  # sorts its own table, by name
    assert second.locator("tbody tr td:first-child").all_inner_texts() == sorted(models)
    assert page.locator("p.board-note").count() == 2
    assert page.locator("svg[data-plot^=forest]").count() == 2
