"""The boards in README.md and docs/ are rendered from committed records (bench/boards/docs.py):
the repository's own docs render unchanged, and a stale or broken block is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cli
from bench.boards.docs import BLOCK, check, doc_files
from bench.record import write_record
from datamodules.errors import PlmbenchError
from tests.bench.boards.test_leaderboard import record
from tests.bench.invoke import plmbench

REPO = Path(__file__).resolve().parents[3]


def test_every_board_in_the_docs_is_what_its_committed_records_render(monkeypatch, tmp_path):
    """No number in the docs is typed by hand: each block renders, from the repository's root,
    to exactly the text the docs hold (after a change: plmbench docs --write), from the records
    alone: an empty data mirror changes nothing (their baselines are kept in them)."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PLMBENCH_DATA", str(tmp_path))
    files = doc_files(REPO)
    blocks = [m for path in files for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]
    assert blocks, "README.md and docs/ show no rendered board"
    for match in blocks:  # each reads records that are committed, not a local results/ folder
        where = [word.removeprefix("results_dir=") for word in match.group("command").split()
                 if "docs/results/" in word]
        assert len(where) == 1 and where[0].startswith("docs/results/"), match.group(0)
        assert (REPO / where[0]).is_dir(), match.group(0)
    assert check(files, cli.main) == []


def doc_with_board(tmp_path: Path, accuracy: float) -> tuple[Path, Path]:
    results = tmp_path / "results"
    for seed in (0, 1):
        write_record(results / f"rte/seed{seed}",
                     record("bert-tiny-scratch", "glue/rte", seed,
                            {"validation": {"accuracy": accuracy}}))
    doc = tmp_path / "page.md"
    doc.write_text(f"Intro.\n\n<!-- plmbench leaderboard {results} --no-baselines -->\n"
                   "OLD-BODY\n<!-- end plmbench -->\n\nOutro.\n", encoding="utf-8")
    return doc, results


def test_a_stale_board_is_listed_and_written_in_place(tmp_path, monkeypatch, capsys):
    doc, _ = doc_with_board(tmp_path, 0.625)
    monkeypatch.chdir(tmp_path)
    result = plmbench("docs", str(doc))
    assert result.rc == 1 and f"differs from its records: {doc}" in result.out
    assert plmbench("docs", "--write", str(doc)).rc == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("Intro.\n\n<!-- plmbench leaderboard ") and text.endswith(
        "<!-- end plmbench -->\n\nOutro.\n")
    assert "62.5" in text and "OLD-BODY" not in text  # the records' mean, x100
    assert plmbench("docs", str(doc)).rc == 0  # rendered: nothing differs any more


@pytest.mark.parametrize("command", ["run model=bert-tiny-scratch",
                                     "claims experiment=claims_tiny"])  # runs the arms
def test_a_block_naming_a_command_that_writes_is_refused(tmp_path, command):
    doc = tmp_path / "page.md"
    doc.write_text(f"<!-- plmbench {command} -->\nx\n<!-- end plmbench -->\n")
    with pytest.raises(PlmbenchError, match="renders leaderboard, significance or claims "
                                            "--from-records"):
        check([doc], cli.main)
    assert not (tmp_path / "results").exists()


def test_a_block_over_missing_records_names_its_command(tmp_path):
    doc = tmp_path / "page.md"
    text = "<!-- plmbench leaderboard --board nope -->\nx\n<!-- end plmbench -->\n"
    doc.write_text(text)
    result = plmbench("docs", str(doc))
    assert result.rc == 2 and "plmbench leaderboard --board nope failed" in result.err
    assert doc.read_text() == text  # nothing written


def test_the_quick_start_duration_is_one_measurement_everywhere():
    """README.md, docs/running.md and the experiment's YAML quote the quick start's duration
    from docs/benchmarks.md's latest measurement (its first bold "N min M s"), none of their own."""
    import re

    measured = re.search(r"\*\*(\d+ min \d+ s)\*\* wall",
                         (REPO / "docs/benchmarks.md").read_text(encoding="utf-8")).group(1)
    for page in ("README.md", "docs/running.md", "conf/experiment/quickstart.yaml"):
        text = (REPO / page).read_text(encoding="utf-8")
        quick = [line for line in text.splitlines()
                 if "quickstart" in line and re.search(r"\d+ min", line)]
        assert quick and all(measured in line for line in quick), (page, quick)
