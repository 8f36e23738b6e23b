"""The claims report (bench/studies/claims.py): the registry composes at both sizes with every
claim's runs in its study (the verdict rules: tests/bench/studies/test_verdicts.py); and claims_tiny
end to end on four claims (one with pretraining runs, head pruning with its own runs, the parameter
count, T5's objectives on an encoder-decoder; the others' arms are the same machinery, runs of
pretrain_compare and study entries):
claims.md and claims.html name each claim's paper, arms, effect with its interval, verdict and
cost, the effect being the board's difference of the two rows and the cost the FLOPs of the runs
behind them."""

from __future__ import annotations

import pytest

from bench.boards.significance import find_row
from bench.boards.table import build_table
from bench.record import iter_records
from bench.studies.claims import VERDICTS, claims_of, preset_parameters
from bench.studies.study import REFERENCE, composed, needed, study_runs
from tests.bench.invoke import plmbench, plmbench_on_mirror

CHOSEN = "study.claims=[dynamic_masking,albert_parameters,head_pruning,t5_objectives]"


@pytest.mark.parametrize("size", ["claims_small", "claims_tiny", "claims_cpu"])
def test_every_claim_names_its_paper_arms_and_runs_of_its_study(size):
    cfg = composed([f"experiment={size}"])
    claims = claims_of(cfg)
    assert {"dynamic_masking", "no_nsp", "albert_parameters", "albert_sharing", "rtd_vs_mlm",
            "span_masking", "distillation", "domain_adaptation",
            "retrieval_augmented", "feature_based", "head_pruning", "t5_objectives"} <= set(claims)
    entries = study_runs(cfg)
    for name, claim in claims.items():
        assert claim["claim"] and claim["paper"], name
        needed(entries, claim["runs"])  # every entry it names exists, with what it starts from
    order = list(entries)
    for name, overrides in entries.items():  # and each starts from an entry run before it
        for source, _ in REFERENCE.findall(" ".join(overrides)):
            assert order.index(source) < order.index(name), (name, source)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    done, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "claims",
                                       "experiment=claims_tiny", CHOSEN)
    assert done.rc == 0, done.err[-2000:]
    return done, results


def test_claims_tiny_writes_the_report_of_its_claims(report):
    done, results = report
    text = (results / "claims.md").read_text()
    assert text in done.out  # printed too
    rows = {cells[1].strip(): [c.strip() for c in cells[1:-1]]
            for cells in (line.split("|") for line in text.split("\n## ")[0].splitlines()
                          if line.startswith("| ") and not line.startswith("| claim"))
            if len(cells) > 12}
    assert set(rows) == {"dynamic_masking", "albert_parameters", "head_pruning", "t5_objectives"}
    masking = rows["dynamic_masking"]
    assert masking[2].startswith("Liu et al. 2019 (RoBERTa), §4.1")
    assert masking[3].startswith("bert-tiny-scratch: ")
    assert masking[4].startswith("bert-tiny-scratch/dynamic: ")
    assert masking[9] in VERDICTS
    # the effect is the GLUE board's difference of the two rows, with its interval
    records = list(iter_records(results))
    table = build_table(records, "glue")
    a, b = find_row(table, "bert-tiny-scratch"), find_row(table, "bert-tiny-scratch/dynamic")
    assert masking[6].startswith(f"{b.score - a.score:+.2f} [") or masking[6].startswith("+0 ex")
    # the cost: the training FLOPs of the four runs behind the two rows
    behind = [
        r for r in records if r["label"] in ("bert-tiny-scratch", "bert-tiny-scratch/dynamic")
    ]
    flops = [r["throughput"].get("train_flops") for r in behind]
    unrecorded = sum(f is None for f in flops)
    total = f"{sum(f or 0 for f in flops):.3g} FLOPs"  # a lower bound where some are unrecorded
    assert len(behind) == 4 and masking[10].startswith(
        f"≥{total} ({unrecorded} of 4 runs unrecorded)" if unrecorded else total)
    # T5's objectives: two encoder-decoders pretrained under one budget, each fine-tuned on RTE;
    # span corruption decodes shorter targets, so its pretraining cost fewer FLOPs
    t5 = rows["t5_objectives"]
    assert t5[3].startswith("t5-tiny-scratch/bert_style: ")
    assert t5[4].startswith("t5-tiny-scratch/span_corruption: ")
    assert t5[9] in VERDICTS
    pretraining = {r["label"]: r["throughput"]["train_flops"] for r in records
                   if r["task"] == "pretrain/wikipedia"
                   and r["label"].startswith("t5-tiny-scratch/")}
    assert (pretraining["t5-tiny-scratch/span_corruption"]
            < pretraining["t5-tiny-scratch/bert_style"])
    # head pruning: the fine-tuned model against itself with 40% of its heads cut out, both
    # scored on one dev set (the pruned one without a training step)
    pruning = rows["head_pruning"]
    assert pruning[3].startswith("bert-tiny-scratch/heads-all: ")
    assert pruning[4].startswith("bert-tiny-scratch/heads-pruned: ")
    a = find_row(table, "bert-tiny-scratch/heads-all")
    b = find_row(table, "bert-tiny-scratch/heads-pruned")
    assert pruning[6].startswith(f"{b.score - a.score:+.2f} [") or pruning[6].startswith("+0 ex")
    assert b.parameters < a.parameters and pruning[9] in VERDICTS
    (pruned,) = [r for r in records if r["label"] == "bert-tiny-scratch/heads-pruned"]
    (analysis,) = [r for r in records if r["task"] == "analysis/head_pruning"]
    assert pruned["steps"] == 0 and pruned["parameters"] == analysis["parameters"]
    heads = analysis["analysis"]["heads"]
    assert 0.6 * heads <= analysis["analysis"]["pruned"]["heads_kept"] < heads
    # ALBERT-xxlarge holds 222.6M, not Table 1's 235M; the other counts match within 3%
    assert rows["albert_parameters"][9] == "contradicted"
    assert rows["albert_parameters"][6].startswith(
        "albert-xxlarge-scratch: 222.6M for 235M (-5.3%)")
    assert "| albert-xxlarge-scratch | 235M | 222.6M | no |" in text
    assert "| albert-base-scratch | 12M | 11.7M | yes |" in text
    page = (results / "claims.html").read_text()
    assert page.count("<tr class=") == 4 and "Liu et al. 2019 (RoBERTa)" in page


def test_the_report_renders_again_from_the_records_alone(report, tmp_path, monkeypatch):
    """``--from-records`` (how the docs render a committed study) prints the same report from
    the records, with no data mirror, and runs and writes nothing."""
    done, results = report
    before = {path: path.stat().st_mtime_ns for path in results.rglob("*")}
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path))  # an empty mirror: no task data
    again = plmbench("claims", "--from-records", "experiment=claims_tiny", CHOSEN,
                     f"results_dir={results}")
    assert again.rc == 0, again.err[-2000:]
    assert again.out == (results / "claims.md").read_text()
    assert {path: path.stat().st_mtime_ns for path in results.rglob("*")} == before
    missing = plmbench("claims", "--from-records", "experiment=claims_tiny",
                       f"results_dir={tmp_path / 'none'}")
    assert missing.rc == 2 and "--from-records: no results directory" in missing.err
    assert not (tmp_path / "none").exists()


def test_the_parameter_count_is_the_albert_tests(report):
    assert preset_parameters("albert-xxlarge-scratch") == pytest.approx(222.6e6, rel=1e-3)
