"""The boards of the BERT-era tasks as the shipped task YAMLs compose them: SuperGLUE's score is the
mean of the eight task scores, a task with two metrics (CB, MultiRC, ReCoRD) scoring their mean
(Wang et al. 2019); the multiple-choice board shows RACE's levels and scores nothing."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from bench.boards.table import build_table
from bench.run.execute import CONF_DIR
from tests.bench.boards.test_leaderboard import record

#: the validation metrics of one model on each SuperGLUE task
SUPERGLUE = {
    "boolq": {"accuracy": 0.80}, "cb": {"accuracy": 0.90, "macro_f1": 0.70},
    "copa": {"accuracy": 0.60}, "multirc": {"f1a": 0.70, "exact_match": 0.30},
    "record": {"f1": 0.62, "exact_match": 0.60}, "rte": {"accuracy": 0.70},
    "wic": {"accuracy": 0.65}, "wsc": {"accuracy": 0.63},
}


def task_config(name: str) -> dict:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return OmegaConf.to_container(compose("config", [f"task={name}"]), resolve=True)["task"]


def test_superglue_score_averages_each_tasks_metrics_first():
    records = [record("bert-tiny-scratch", f"superglue/{task}", 0, {"validation": metrics},
                      task_cfg=task_config(f"superglue/{task}"))
               for task, metrics in SUPERGLUE.items()]
    table = build_table(records, "superglue")
    assert table.labels == ["BoolQ (acc)", "CB (acc)", "CB (F1)", "COPA (acc)", "MultiRC (F1a)",
                            "MultiRC (EM)", "ReCoRD (F1)", "ReCoRD (EM)", "RTE (acc)",
                            "WiC (acc)", "WSC (acc)"]
    task_scores = [sum(m.values()) / len(m) for m in SUPERGLUE.values()]
    assert table.rows[0].score == pytest.approx(100 * sum(task_scores) / 8)
    assert table.rows[0].n_scored == 8


def test_multiple_choice_board_shows_race_by_level():
    metrics = {split: {"accuracy": value} for split, value in
               (("validation", 0.5), ("test", 0.4), ("middle/test", 0.45), ("high/test", 0.38))}
    table = build_table([record("bert-tiny-scratch", "mc/race", 0, metrics,
                                task_cfg=task_config("mc/race"))], "multiple_choice")
    assert table.labels == ["RACE dev (acc)", "RACE (acc)", "RACE-M (acc)", "RACE-H (acc)"]
    assert table.rows[0].score is None
