"""``plmbench run task=analysis/attention`` end to end on a random BERT checkpoint: Wikipedia
sentence pairs of the mirror and a CoNLL-U fixture of Universal Dependencies (converted by the
mirror's own reader) give a record with every statistic per layer and head, a row on the
attention board, and a page that Chromium opens offline with a heatmap per statistic whose cells
hold the record's values, the dependency table and the example attention maps. Without the parsed
set the run says so in its record and its page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.boards.table import build_table
from datamodules.tokenization import train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import to_hf
from lit_models.nets.bert import BertConfig, BertModel
from tests import hub_fixtures
from tests.bench.boards.test_board_html import page  # noqa: F401 (the Chromium page fixture)
from tests.bench.invoke import plmbench
from tests.conftest import MIRROR_CANDIDATES
from tests.nets.parity import TEXT

RUN = ["task.text_examples=24", "task.text.max_train_samples=6", "task.dependencies.min_count=5",
       "task.page_examples=1", "trainer.enable_progress_bar=false"]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    real = next((p for p in MIRROR_CANDIDATES if (p / "wikipedia_en_sample").is_dir()), None)
    if real is None:
        pytest.skip("the data mirror with the Wikipedia sample is needed")
    mirror = tmp_path_factory.mktemp("mirror")
    (mirror / "wikipedia_en_sample").symlink_to(real / "wikipedia_en_sample")
    hub_fixtures.write_universal_dependencies(mirror, sentences=30)
    checkpoint = tmp_path_factory.mktemp("checkpoint")
    tokenizer = train_tokenizer(get_arch("bert").tokenizer, TEXT, vocab_size=200,
                                lowercase=True)
    torch.manual_seed(0)
    net = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32,
                               num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
                               initializer_range=0.2))
    to_hf(Model(get_arch("bert"), net, tokenizer), checkpoint)
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(mirror))
        common = [
            "run",
            "model=bert-tiny-scratch",
            "task=analysis/attention",
            f"init_from=hf:{checkpoint}",
            f"results_dir={results}",
            *RUN,
        ]
        result = plmbench(*common)
        assert result.rc == 0, result.err[-3000:]
        no_parse = plmbench(*common, "task.dependencies.split=nope", "label=without-parses")
        assert no_parse.rc == 0, no_parse.err[-3000:]
    return {record["label"]: record for record in (
        json.loads(path.read_text()) for path in results.rglob("record.json"))}


def test_the_record_holds_every_statistic_per_layer_and_head(analysed):
    record = analysed["bert-tiny-scratch"]
    analysis = record["analysis"]
    heads = analysis["heads"]
    assert set(heads) >= {"cls", "sep", "punctuation", "previous", "next", "self", "entropy"}
    assert all(len(v) == 2 and len(v[0]) == 4 for v in heads.values())
    attention = record["metrics"]["attention"]
    for name in ("cls", "sep", "previous", "entropy"):
        mean = sum(sum(row) for row in heads[name]) / 8
        assert attention[name] == pytest.approx(mean)
    assert 0 < attention["entropy"] <= attention["uniform_entropy"] + 1e-6
    relations = analysis["dependencies"]["relations"]
    assert {"all", "det", "nsubj", "obj"} <= set(relations) and "punct" not in relations
    assert analysis["dependencies"]["sentences"] == 30
    assert attention["dependency_all"] == relations["all"]["accuracy"]
    table = build_table(list(analysed.values()), "attention")
    assert {row.label for row in table.rows} == {"bert-tiny-scratch", "without-parses"}


def test_without_the_parsed_set_the_record_and_the_page_say_why(analysed):
    record = analysed["without-parses"]
    assert "nope" in record["analysis"]["dependencies"]["skipped"]
    assert "dependency_all" not in record["metrics"]["attention"]
    page_text = (Path(record["run_dir"]) / "attention.html").read_text()
    assert "No dependency analysis" in page_text


def test_the_page_opens_offline_with_the_records_values(analysed, page):  # noqa: F811
    record = analysed["bert-tiny-scratch"]
    path = Path(record["run_dir"]) / record["analysis"]["page"]
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    assert all(url.startswith("file:") for url in requests)
    heads = record["analysis"]["heads"]
    for name, values in heads.items():
        cells = page.locator(f"svg[data-plot={name}] rect")
        assert cells.count() == 8, name
        assert cells.nth(5).get_attribute("data-value") == f"{values[1][1]:.3f}"
    box = page.locator("svg[data-plot=entropy]").bounding_box()
    assert box["width"] > 50 and box["height"] > 50
    rows = page.locator("#dependencies tbody tr")
    assert rows.count() == len(record["analysis"]["dependencies"]["relations"])
    assert page.locator("svg[data-plot^=example-]").count() >= 7  # the heads that stand out
