"""Protocols (conf/protocol/, DESIGN.md contract 8) end to end at tiny size: ModernBERT's two rounds
(conf/experiment/published_glue_modernbert_tiny.yaml: a stand-in for MNLI, then RTE from the
round-one run best on dev), and the same model under the paper and glue_sane protocols in one
results directory. Every record names its protocol; round two's records start from round one's
selected checkpoint; the glue board selects the modernbert protocol's grid on dev and shows the rows
of the three protocols side by side, a column saying which is which; published figures show their
protocol and split; the GPU claims read "no evidence" at CPU size with their command and hours."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from bench.boards.config import get_board
from bench.boards.protocols import reported_statistic
from bench.boards.references import load_references
from bench.boards.sections import build_tables, render_tables
from bench.boards.table import build_table
from bench.boards.text import render_json, render_markdown
from bench.record import as_records
from bench.records import config_hash, iter_records
from bench.studies.claims import _cost_text, claims_of, evaluate, on_cpu
from bench.studies.study import composed, needed, study_runs
from datamodules.errors import PlmbenchError
from tests.bench.invoke import mirror_with, plmbench

TINY = ["task.max_train_samples=32", "task.max_eval_samples=16", "task.max_length=32",
        "trainer.max_steps=2", "task.batch_size=8"]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """The tiny ModernBERT-protocol study, then one RTE run under each of the other two
    protocols, all in one results directory."""
    import datasets

    root = mirror_with("glue")
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(root))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE",
                      str(tmp_path_factory.mktemp("hf_datasets")))
        study = plmbench("study", "experiment=published_glue_modernbert_tiny",
                         f"results_dir={results}")
        assert study.rc == 0, study.err[-3000:]
        others = plmbench("run", "-m", "model=bert-tiny-scratch", "task=glue/rte",
                          "protocol=paper,glue_sane", *TINY, f"results_dir={results}")
        assert others.rc == 0, others.err[-3000:]
    return results


def by_protocol(results: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for record in iter_records(results):
        assert record["status"] == "ok", record.get("error")
        found.setdefault(record["protocol"], []).append(record)
    return found


def test_every_record_names_the_protocol_that_made_it(results):
    found = by_protocol(results)
    assert set(found) == {"modernbert", "paper", "glue_sane"}
    # the study: round one's two grid points on the stand-in, round two's two points x 2 seeds
    modernbert = found["modernbert"]
    assert sorted(r["task"] for r in modernbert) == ["glue/rte"] * 4 + ["glue/sst2"] * 2
    for record in modernbert:
        optim, protocol = record["config"]["optim"], record["config"]["protocol"]
        assert protocol["name"] == "modernbert" and optim["warmup_ratio"] == 0.06
        # Composer's decoupled weight decay, as torch's AdamW takes it: w / lr
        assert optim["weight_decay"] == pytest.approx(protocol["weight_decay"] / optim["lr"])
    (sane,) = found["glue_sane"]
    assert (sane["config"]["optim"]["lr"], sane["config"]["task"]["batch_size"],
            sane["config"]["optim"]["schedule"]) == (4e-5, 8, "cosine")  # TINY's batch size
    # the paper protocol is the runs' recipe of before protocols had names: the same hash
    (paper,) = found["paper"]
    without = {k: v for k, v in paper["config"].items() if k != "protocol"}
    assert config_hash(paper["config"]) == config_hash(without)
    assert config_hash(sane["config"]) != config_hash(
        {k: v for k, v in sane["config"].items() if k != "protocol"})
    assert len({paper["protocol_hash"], sane["protocol_hash"]}) == 2


def test_round_two_starts_from_the_round_one_run_best_on_dev(results):
    found = by_protocol(results)["modernbert"]
    round_one = [r for r in found if r["task"] == "glue/sst2"]
    round_two = [r for r in found if r["task"] == "glue/rte"]
    # the stand-in's grid points by dev accuracy (one seed each): the best, the first on a tie
    accuracy = {r["protocol_hash"]: statistics.mean(
        [x["metrics"]["validation"]["accuracy"] for x in round_one
         if x["protocol_hash"] == r["protocol_hash"]]) for r in round_one}
    best = max(sorted(accuracy), key=accuracy.get)
    (source,) = [r for r in round_one if r["protocol_hash"] == best]
    assert {r["init_from"] for r in round_two} == {f"ckpt:{source['run_dir']}"}
    assert (Path(source["run_dir"]) / "model" / "config.json").is_file()  # its exported model
    assert {r["seed"] for r in round_two} == {19, 8364}
    assert all(r["config"]["task"]["checkpoint_labels"] == "new" for r in round_two)
    # what it started from is counted as the row's pretraining: the stand-in run's own tokens
    assert all(r["pretraining"]["runs"] for r in round_two)


def test_the_board_shows_rows_of_three_protocols_side_by_side(results):
    records = list(iter_records(results))
    (table,) = build_tables(records, "glue")
    assert table.text_columns[0] == "protocol"
    rows = {row.texts["protocol"]: row for row in table.rows}
    assert set(rows) == {"modernbert", "paper", "glue_sane"}
    # the modernbert protocol selects its grid on dev on every board: one row, both tasks
    modernbert = rows["modernbert"]
    assert modernbert.protocol_hash == "best-on-dev:modernbert"
    assert set(modernbert.selected) == {"glue/rte", "glue/sst2"}
    assert all(chosen["of"] == 2 for chosen in modernbert.selected.values())
    assert "RTE (acc)" in rows["paper"].cells and "SST-2 (acc)" not in rows["glue_sane"].cells
    text = render_tables([table], "md")
    header = next(line for line in text.splitlines() if line.startswith("| Model"))
    assert [c.strip() for c in header.split("|")[1:4]] == ["Model", "protocol", "GLUE score"]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
             if line.startswith("| bert-tiny-scratch")]
    assert sorted(row[1] for row in cells) == ["glue_sane", "modernbert", "paper"]
    assert "Protocols (the protocol column says which made each row): glue_sane (cramming's" in text
    assert "modernbert (ModernBERT's: RTE, MRPC and STS-B from the same model's MNLI" in text
    data = render_json(table)
    assert '"protocols": {' in data and '"protocol": "glue_sane"' in data
    # the statistic a board shows unless asked: the one its runs' protocol reports
    typed = [r for r in as_records(records)]
    board = get_board("glue")
    assert reported_statistic(typed, board) == "mean"  # three protocols
    sane = [r for r in typed if r.protocol == "glue_sane"]
    assert reported_statistic(sane, board) == "median"
    out = plmbench("leaderboard", str(Path(sane[0].run_dir).parent), "--board", "glue")
    assert out.rc == 0 and "median [min, max] over seeds" in out.out
    # one protocol alone: no column, the footnote names it
    (alone,) = build_tables([r for r in records if r["protocol"] == "paper"], "glue")
    assert "protocol" not in alone.text_columns
    assert "Protocol of every row: paper (each paper's own recipe" in render_markdown(alone)


def test_published_figures_show_their_protocol_and_split(results, tmp_path, monkeypatch):
    records = [r for r in iter_records(results) if r["protocol"] == "paper"]
    table = build_table(records, "glue")
    table.references = load_references("glue_dev")
    text = render_markdown(table)
    published = text.split("### Published results (not measured here, not ranked)")[1]
    header = next(line for line in published.splitlines() if line.startswith("| Model"))
    assert [c.strip() for c in header.split("|")[1:5]] == [
        "Model", "protocol", "split", "published score"]
    modernbert = next(line for line in published.splitlines()
                      if line.startswith("| ModernBERT-base ‡"))
    assert [c.strip() for c in modernbert.split("|")[2:5]] == ["modernbert", "dev", "88.4"]
    assert "‼" not in published  # no figure of the file is a test figure shown as dev
    # a test-set figure its source presents as dev is marked so
    import bench.boards.references as references

    (tmp_path / "glue_dev.yaml").write_text(
        "split: dev\nrows:\n"
        "  - {label: bert-base-uncased, source: 'a survey, Table 2', split: test,\n"
        "     presented_as: dev, values: {RTE (acc): 66.4}}\n"
        "  - {label: x, source: 'y', protocol: glue_sane, values: {RTE (acc): 60.0}}\n")
    monkeypatch.setattr(references, "REFERENCE_DIR", tmp_path)
    table.references = load_references("glue_dev")
    text = render_markdown(table)
    line = next(line for line in text.splitlines() if line.startswith("| bert-base-uncased ‡"))
    assert [c.strip() for c in line.split("|")[2:4]] == ["paper", "test, as dev ‼"]
    assert "‼ : test-set figures the source presents as dev figures" in text
    line = next(line for line in text.splitlines() if line.startswith("| x ‡"))
    assert [c.strip() for c in line.split("|")[2:4]] == ["glue_sane", "dev"]
    (tmp_path / "glue_dev.yaml").write_text(
        "rows:\n  - {label: x, source: y, protocol: modern, values: {}}\n")
    with pytest.raises(PlmbenchError, match="protocol is 'modern'; use one of glue_sane, "
                                            "modernbert, paper"):
        load_references("glue_dev")


def test_the_gpu_claims_read_no_evidence_at_cpu_size_with_their_command_and_hours():
    cfg = composed(["experiment=claims_tiny"])
    assert on_cpu(cfg) and not on_cpu(composed(["experiment=claims_small", "trainer=gpu"]))
    claims = claims_of(cfg)
    for name, hours in (("modernbert_vs_deberta", 0.6), ("mnli_start", 0.5)):
        result = evaluate(name, claims[name], [], 10, 0, cpu=True)
        assert result.verdict == "no evidence"
        assert f"study.claims=[{name}]" in result.detail and "trainer=gpu" in result.detail
        assert _cost_text(result) == f"not run at CPU size: ~{hours:g} GPU-hours (estimated)"
        # on a GPU the claim is its arms' comparison: with no records, its rows are not run
        assert evaluate(name, claims[name], [], 10, 0, cpu=False).verdict == "not run"


def test_the_published_study_runs_modernberts_two_rounds_for_each_model():
    """published_glue_modernbert (the GPU study): per model round one's five tasks, then RTE, MRPC
    and STS-B from that model's own MNLI entry, with the protocol's seeds per task."""
    cfg = composed(["experiment=published_glue_modernbert"])
    entries = study_runs(cfg)
    seeds = {"cola": 4, "sst2": 3, "qqp": 1, "qnli": 1, "mnli": 1, "rte": 5, "mrpc": 5, "stsb": 5}
    for model in ("modernbert", "deberta_v3", "ettin"):
        for task, count in seeds.items():
            entry = entries[f"{model}_{task}"]
            assert f"task=glue/{task}" in entry
            (seed,) = [o for o in entry if o.startswith("seed=")]
            assert len(seed.split("=")[1].split(",")) == count
            second = task in ("rte", "mrpc", "stsb")
            assert needed(entries, [f"{model}_{task}"]) == (
                {f"{model}_{task}", f"{model}_mnli"} if second else {f"{model}_{task}"})
        assert "save_model=true" in entries[f"{model}_mnli"]
    assert list(entries).index("modernbert_mnli") < list(entries).index("modernbert_rte")
    assert cfg.protocol.name == "modernbert" and cfg.results_dir == "results/published_glue"
