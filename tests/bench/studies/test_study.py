"""The domain-adaptation study end to end at tiny size (conf/experiment/domain_tiny.yaml): one
command pretrains the general model, its further-pretrained (DAPT), task-adapted (TAPT) and
from-scratch alternatives on both domains, fine-tunes each on an end task of each domain over two
seeds, scores every model on every domain's held-out text, and leaves records and the domain
board; further pretraining lowers the in-domain perplexity of the checkpoint it started from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.boards.baselines import baseline_records
from bench.boards.table import build_table
from bench.record import iter_records
from bench.studies.study import _resolve, composed, points, study_runs
from datamodules.errors import PlmbenchError
from tests.bench.invoke import plmbench, plmbench_on_mirror, read

ROWS = {  # row -> the end tasks it is fine-tuned on
    "bert-tiny-scratch/off-the-shelf": {"ChemProt (micro-F1)", "ACL-ARC (macro-F1)"},
    "bert-tiny-scratch/tapt": {"ChemProt (micro-F1)", "ACL-ARC (macro-F1)"},
    "bert-tiny-scratch/dapt-pubmed": {"ChemProt (micro-F1)"},
    "bert-tiny-scratch/scratch-pubmed": {"ChemProt (micro-F1)"},
    "bert-tiny-scratch/dapt-cs": {"ACL-ARC (macro-F1)"},
    "bert-tiny-scratch/scratch-cs": {"ACL-ARC (macro-F1)"},
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The tiny study, run once for the module's tests."""
    return plmbench_on_mirror(tmp_path_factory, "pubmed_abstracts", "study",
                              "experiment=domain_tiny")


def test_one_command_leaves_ok_records_of_every_run(study):
    result, results = study
    assert result.rc == 0, result.err[-2000:]
    records = list(iter_records(results))
    assert records and all(r["status"] == "ok" for r in records)
    labels = {r["label"] for r in records}
    assert labels == set(ROWS)
    assert {r["board"] for r in records} == {"domain"}
    # every fine-tuning run of a row starts from that row's checkpoint, every seed twice
    seeds = {(r["label"], r["task"], r["seed"]) for r in records
             if r["task"] == "scibert_tc/chemprot"}
    assert {(label, seed) for label, _, seed in seeds} == {
        (label, seed) for label, tasks in ROWS.items() if "ChemProt (micro-F1)" in tasks
        for seed in (0, 1)}


def test_the_domain_board_shows_all_four_alternatives_with_seeds(study):
    _, results = study
    board = (results / "domain.md").read_text()
    records = list(iter_records(results))
    table = build_table(records + baseline_records(records, "domain"), "domain")
    rows = {row.label: row for row in table.rows}
    assert set(rows) == {*ROWS, "baseline (no training)"}
    for label, tasks in ROWS.items():
        for task in tasks:
            assert rows[label].cells[task].n == 2, (label, task)  # two seeds
            assert label in board
        # every model is scored on both domains' held-out text, and its vocabulary measured
        assert {"pubmed ppl", "cs ppl", "pubmed sub-tokens/word", "cs sub-tokens/word",
                "vocabulary ∩ general (%)"} <= set(rows[label].cells), label
        assert rows[label].cells["pretraining tokens"].mean > 0  # every row has pretraining
    # TAPT: one model per end task, each scored; its cost is the mean of its runs
    assert rows["bert-tiny-scratch/tapt"].cells["pretraining tokens"].n == 2
    assert rows["bert-tiny-scratch/tapt"].cells["pubmed ppl"].n == 2
    # the general vocabulary is the general model's own; an in-domain one shares part of it
    assert rows["bert-tiny-scratch/dapt-pubmed"].cells["vocabulary ∩ general (%)"].mean == 1.0
    for label in ("bert-tiny-scratch/scratch-pubmed", "bert-tiny-scratch/scratch-cs"):
        assert 0 < rows[label].cells["vocabulary ∩ general (%)"].mean < 1
    # from scratch spends the general model's token budget: same steps, same sequence length
    general = rows["bert-tiny-scratch/off-the-shelf"].cells["pretraining tokens"].mean
    for label in ("bert-tiny-scratch/scratch-pubmed", "bert-tiny-scratch/scratch-cs"):
        assert rows[label].cells["pretraining tokens"].mean == pytest.approx(general, rel=0.35)


def test_further_pretraining_lowers_the_in_domain_perplexity_it_started_from(study):
    _, results = study
    records = list(iter_records(results))

    def perplexity(label: str, corpus: str) -> float:
        (record,) = [r for r in records
                     if r["label"] == label and r["task"] == "perplexity/domains"]
        return record["metrics"][corpus]["perplexity"]

    for corpus in ("pubmed", "cs"):
        (dapt,) = [r for r in records if r["task"] == f"pretrain/{corpus}"
                   and r["label"] == f"bert-tiny-scratch/dapt-{corpus}"]
        (general,) = [r for r in records if r["task"] == "pretrain/wikipedia"]
        assert dapt["init_from"] == f"ckpt:{general['run_dir']}"  # it continued the general model
        before = perplexity("bert-tiny-scratch/off-the-shelf", corpus)
        after = perplexity(f"bert-tiny-scratch/dapt-{corpus}", corpus)
        assert after < before, (corpus, before, after)


def test_a_study_run_again_reruns_nothing(study):
    """Each entry is an ordinary run: `plmbench run` of one finds it done and skips it."""
    _, results = study
    (general,) = [r for r in iter_records(results) if r["task"] == "pretrain/wikipedia"]
    entry = study_runs(composed(["experiment=domain_tiny"]))["general"]
    again = plmbench("run", "experiment=domain_tiny_runs", f"results_dir={results}", *entry)
    assert again.rc == 0
    assert read(Path(general["run_dir"]))["run_id"] == general["run_id"]


def test_sweep_points_are_hydras():
    assert points(["a=1", "seed=0,1", "task=x,y"]) == [
        ["a=1", "seed=0", "task=x"], ["a=1", "seed=0", "task=y"],
        ["a=1", "seed=1", "task=x"], ["a=1", "seed=1", "task=y"]]
    assert points(["task.splits.eval=[pubmed,cs]"]) == [["task.splits.eval=[pubmed,cs]"]]


def test_a_configuration_without_a_study_is_one_line():
    result = plmbench("study", "experiment=quickstart")
    assert result.rc == 2 and "holds no study" in result.err


def test_a_reference_to_a_later_or_unknown_entry_is_one_line(tmp_path):
    with pytest.raises(PlmbenchError, match="names {general}, which is no earlier single run"):
        _resolve("init_from=ckpt:{general}", {}, "dapt")
    (tmp_path / "record.json").write_text(json.dumps({"status": "failed", "error": "boom"}))
    with pytest.raises(PlmbenchError, match="did not finish \\(boom\\)"):
        _resolve("init_from=ckpt:{general}", {"general": [tmp_path]}, "dapt")


def test_an_entry_that_does_not_compose_is_one_line(tmp_path):
    result = plmbench("study", "experiment=domain_tiny", f"results_dir={tmp_path}",
                      'study.runs.general.general=["task=glue/nope"]')
    assert result.rc == 2 and len(result.err_lines) == 1
    assert "task=glue/nope: there is no conf/task/glue/nope.yaml" in result.err


def test_a_reference_of_its_own_seed_pairs_the_seeds(tmp_path):
    """``{entry@seed}``: each seed of the entry starts from the earlier entry's run of that seed
    (each fine-tuned seed pruned); without ``seed=`` in the entry, or for a seed the earlier entry
    did not run, one line."""
    from bench.record import write_record
    from bench.studies.study import _by_seed
    from tests.bench.boards.test_leaderboard import record

    runs = []
    for seed in (0, 1, 2):  # each from its own seed's run: configs that differ, as grid points do
        run_dir = tmp_path / f"seed{seed}"
        made = record("m", "glue/rte", seed, {"validation": {"accuracy": 0.6 + seed / 10}},
                      run_dir=str(run_dir))
        made["config"]["init_from"] = f"ckpt:tuned/seed{seed}"
        made["protocol_hash"] = f"{seed}" * 16  # init_from is in a run's protocol hash
        write_record(run_dir, made)
        runs.append(run_dir)
    entry = ["task=analysis/head_pruning", "init_from=ckpt:{tuned@seed}", "seed=2,0"]
    parts = _by_seed(entry, "pruning")
    assert [seed for seed, _ in parts] == [2, 0]
    assert parts[0][1] == ["task=analysis/head_pruning", "init_from=ckpt:{tuned@seed}", "seed=2"]
    done = {"tuned": runs}
    assert _resolve(parts[0][1][1], done, "pruning", 2) == f"init_from=ckpt:{runs[2]}"
    assert _resolve(parts[1][1][1], done, "pruning", 0) == f"init_from=ckpt:{runs[0]}"
    assert _resolve(parts[1][1][1], done, "pruning", 1) == f"init_from=ckpt:{runs[1]}"
    # without @seed: the sweep's point best on dev (the seed-2 run's), whichever seed refers
    assert _resolve("init_from=ckpt:{tuned}", done, "pruning", 0) == f"init_from=ckpt:{runs[2]}"
    assert _by_seed(["init_from=ckpt:{tuned}", "seed=0,1"], "x") == [
        (None, ["init_from=ckpt:{tuned}", "seed=0,1"])]
    with pytest.raises(PlmbenchError, match="give it its seeds once"):
        _by_seed(["init_from=ckpt:{tuned@seed}"], "pruning")
    with pytest.raises(PlmbenchError, match="for seed 7, which tuned did not run"):
        _resolve("init_from=ckpt:{tuned@seed}", done, "pruning", 7)
