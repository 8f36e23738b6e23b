"""The HTML leaderboard in a real headless browser (Chromium through Playwright, pointed at the
system's /usr/bin/chromium; nothing is downloaded): the page opens with no network, the table
reads back as rendered, clicking a header sorts by that column, and the plots are drawn: a
forest plot per task with the rows' intervals, the rows x tasks heatmap, and the score against
cost with its Pareto frontier, every label measured in the browser to touch no other label and
to stay inside its plot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.board_html import render_html
from bench.board_plots import pareto
from bench.board_text import cell_text
from bench.leaderboard import build_table
from bench.references import load_references
from tests.bench.test_leaderboard import TASKS, record, sweep, task_config
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
    assert page.locator("#references tbody tr").count() == len(table.references) == 6
    # every reference row with an RTE accuracy is a diamond on the RTE forest plot
    diamonds = page.locator("svg.forest polygon.reference")
    assert diamonds.count() == sum("RTE (acc)" in r.values for r in table.references)
