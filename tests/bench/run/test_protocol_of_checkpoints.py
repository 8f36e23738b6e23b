"""A run's protocol names the checkpoint it starts from by that run's protocol, not its path
(``bench.run.provenance.protocol_config``): the seeds of a protocol that each start from their own
seed's run of another (each fine-tuned seed pruned, distilled) are one protocol, one board row;
runs from checkpoints of other protocols, or from a checkpoint no plmbench run left, stay apart."""

from __future__ import annotations

from bench.config_identity import config_hash
from bench.record import write_record
from bench.run.provenance import protocol_config
from tests.bench.boards.test_leaderboard import record


def finished(where, seed: int, protocol: str, task: str = "glue/rte"):
    made = record("m", "glue/rte", seed, {"validation": {"accuracy": 0.7}}, run_dir=str(where),
                  protocol_hash=protocol)
    made["task"] = task
    write_record(where, made)
    return f"ckpt:{where}"


def protocol_hash(init_from: str, teacher: str | None = None, pruned=None) -> str:
    config = {"model": {"name": "m", "pruned_heads": pruned}, "init_from": init_from,
              "optim": {"lr": 1e-4}, "task": {"name": "glue/rte", "teacher": teacher}}
    return config_hash(protocol_config(config), ignore_task=True, task_keys=["teacher"])


def test_seeds_from_their_own_seeds_runs_of_one_protocol_are_one_protocol(tmp_path):
    seed0 = finished(tmp_path / "tuned/seed0", 0, "a" * 16)
    seed1 = finished(tmp_path / "tuned/seed1", 1, "a" * 16)
    other = finished(tmp_path / "other/seed0", 0, "b" * 16)
    assert protocol_hash(seed0) == protocol_hash(seed1)
    assert protocol_hash(seed0) != protocol_hash(other)
    # one protocol's checkpoints of other tasks (each end task's TAPT model) stay apart
    tapt = finished(tmp_path / "tapt/seed0", 0, "a" * 16, task="pretrain/tapt/chemprot")
    assert protocol_hash(tapt) != protocol_hash(seed0)
    # a distillation's teacher, and the heads a pruned checkpoint lacks (its own seed's outcome)
    assert protocol_hash(seed0, teacher=seed0, pruned={"0": [1]}) == protocol_hash(
        seed1, teacher=seed1, pruned={"0": [2, 3]})
    assert protocol_hash(seed0, teacher=seed0) != protocol_hash(seed0, teacher=other)
    # no plmbench run's record there: the path itself names the checkpoint, as before
    assert protocol_hash(f"ckpt:{tmp_path / 'nothing'}") != protocol_hash(
        f"ckpt:{tmp_path / 'else'}")
    assert protocol_config({"init_from": "hf:some/dir"}) == {"init_from": "hf:some/dir"}
