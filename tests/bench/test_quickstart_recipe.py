"""The README's first command, ``make quickstart``, ends by printing its leaderboard: the recipe's
``plmbench leaderboard`` line, run on a results folder holding what the quickstart writes (a
pretraining run and GLUE runs: two boards), prints the GLUE board and exits 0. A folder of two
boards without ``--board`` is exit 2 by design, which once made the quick start fail last."""

from __future__ import annotations

import re
import shlex

from bench.record import write_record
from tests.bench.boards.test_leaderboard import record, task_config
from tests.bench.invoke import plmbench
from tests.conftest import REPO


def quickstart_leaderboard() -> list[str]:
    """The arguments of the quickstart recipe's ``plmbench leaderboard`` line (Makefile)."""
    recipe = re.search(r"^quickstart:.*?\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(),
                       re.MULTILINE).group(1)
    (line,) = [line for line in recipe.splitlines() if "plmbench leaderboard" in line]
    return shlex.split(line.split("plmbench", 1)[1])


def test_the_quickstart_prints_its_glue_board_from_a_folder_of_two_boards(tmp_path, monkeypatch):
    args = quickstart_leaderboard()
    assert args[:2] == ["leaderboard", "results/quickstart"]
    results = tmp_path / "results/quickstart"
    sst2 = task_config("glue/sst2", [{"label": "SST-2 (acc)",
                                      "value": "metrics.validation.accuracy"}])
    write_record(results / "glue/sst2/minilm-l6/seed0",
                 record("minilm-l6", "glue/sst2", 0, {"validation": {"accuracy": 0.8}},
                        task_cfg=sst2))
    pretrain = task_config("pretrain/wikitext", [{"label": "MLM loss",
                                                  "value": "metrics.validation.mlm_loss"}],
                           metrics=["mlm_loss"], board="pretrain")
    write_record(results / "pretrain/wikitext/bert-tiny-scratch/seed0",
                 record("bert-tiny-scratch", "pretrain/wikitext", 0,
                        {"validation": {"mlm_loss": 6.1}}, task_cfg=pretrain))
    monkeypatch.chdir(tmp_path)  # the recipe's path is relative to the checkout it runs in
    done = plmbench(*args)
    assert done.rc == 0, done.err
    assert "board 'glue'" in done.out and "| minilm-l6" in done.out
