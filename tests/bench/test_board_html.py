"""The HTML leaderboard in a real headless browser (Chromium through Playwright, pointed at the
system's /usr/bin/chromium; nothing is downloaded): the page opens with no network, the table
reads back as rendered, clicking a header sorts by that column, and the plots are drawn."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.board_html import render_html
from bench.leaderboard import build_table
from tests.bench.test_leaderboard import sweep
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
    sizes = {"bert-tiny": 4_400_000, "electra-small": 13_500_000}
    for record in records:
        record["parameters"] = sizes[record["model"]]
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
    assert cells[2] == table.columns[0].text(first.cells[table.labels[0]])

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
    spread = page.locator("svg[data-plot^=seeds] circle")
    assert spread.count() == sum(c.n for row in table.rows for c in row.cells.values())
    assert page.locator("[data-plot=compute]").inner_text().startswith("no runs")
