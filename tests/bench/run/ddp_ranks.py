"""One process of a gloo world that runs a list of runs in step with the other processes, as
ranks that torchrun starts do (``LOCAL_RANK`` set: Lightning joins the group, it starts no ranks).

``python -m tests.bench.run.ddp_ranks PLAN RANK WORLD PORT``: PLAN is a JSON file ``{"results": dir,
"cases": [{"name", "arch", "task", "overrides"}]}``; every case is composed as the smoke test
composes it (``tests/bench/run/test_smoke.py``'s ``compose_run``), evaluated untrained
(``trainer.max_steps=0``, unless the case gives ``max_steps``) on WORLD CPU processes and recorded
under ``<results>/world<WORLD>/<name>``. WORLD 1 is one plain process (``trainer=cpu``). A run that
fails leaves its failed record and the next one runs, each case in a process group of its own (on
port PORT + its number): a collective that waits for a rank that failed gives up after ``TIMEOUT``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[3]

#: how long a collective waits for the other ranks before it fails (gloo's default: 30 minutes)
TIMEOUT = timedelta(seconds=90)


def join(rank: int, world: int, port: int) -> None:
    """Join the world as ``rank`` (the environment torchrun would give; Lightning reads it)."""
    os.environ.update(LOCAL_RANK=str(rank), NODE_RANK="0", WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world, timeout=TIMEOUT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(cases: list[dict], results: Path, world: int, mirror: Path) -> None:
    """Run ``cases`` on ``world`` processes (this module, once per rank), each recording under
    ``results/world<world>/<name>``; every rank's output in ``results/world<world>.rank<r>.log``."""
    plan = results / f"plan{world}.json"
    plan.write_text(json.dumps({"results": str(results), "cases": cases}))
    env = {**os.environ, "PLMBENCH_DATA": str(mirror), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    port = 20000 + free_port() % 40000  # the first case's; case k listens on port + k
    logs = [(results / f"world{world}.rank{rank}.log").open("w") for rank in range(world)]
    ranks = [subprocess.Popen([sys.executable, "-m", __spec__.name, str(plan), str(rank),
                               str(world), str(port)], env=env, cwd=REPO, stdout=log,
                              stderr=subprocess.STDOUT)
             for rank, log in enumerate(logs)]
    for rank, log in zip(ranks, logs, strict=True):
        rank.wait(timeout=1800)
        log.close()


def main(plan_path: str, rank: str, world: str, port: str) -> None:
    from bench.run.execute import execute
    from tests.bench.run.test_smoke import compose_run

    rank_, world_ = int(rank), int(world)
    torch.set_num_threads(1)
    plan = json.loads(Path(plan_path).read_text())
    for number, case in enumerate(plan["cases"]):
        cfg = compose_run(case["arch"], case["task"], *case["overrides"])
        cfg.trainer.max_steps = case.get("max_steps", 0)
        if world_ > 1:  # a group of its own: a case that failed on one rank ends with its group
            cfg.trainer.strategy = "ddp_find_unused_parameters_true"
            cfg.trainer.devices = world_
            join(rank_, world_, int(port) + number)
        try:
            execute(cfg, Path(plan["results"]) / f"world{world_}" / case["name"])
        except Exception as err:  # noqa: BLE001 - its record says so; the next case runs
            print(f"rank {rank_}: {case['name']} failed: {type(err).__name__}: {err}",
                  file=sys.stderr)
        finally:
            if world_ > 1:
                torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
