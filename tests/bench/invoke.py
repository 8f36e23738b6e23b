"""Run the ``plmbench`` command in this test process and read what it leaves behind."""

import contextlib
import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra

from bench import cli, run
from bench.records import run_variant

#: variables Lightning's seed_everything leaves in os.environ
LIGHTNING_ENV = ("PL_GLOBAL_SEED", "PL_SEED_WORKERS")


@dataclass
class Result:
    """What one ``plmbench`` invocation returned and printed."""

    rc: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def reset_cli_state() -> None:
    """Hydra's global config search state and the failure list are per process: clear both."""
    GlobalHydra.instance().clear()
    run.FAILURES.clear()


def plmbench(*args: str) -> Result:
    """``plmbench ARGS`` in this process; SystemExit (Hydra, argparse) propagates."""
    out, err = io.StringIO(), io.StringIO()
    argv, env = list(sys.argv), {name: os.environ.get(name) for name in LIGHTNING_ENV}
    reset_cli_state()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(list(args))
            except SystemExit as exit_:  # re-raised with what was printed, for pytest.raises
                exit_.result = Result(exit_.code, out.getvalue(), err.getvalue())
                raise
    finally:
        reset_cli_state()
        sys.argv = argv  # cmd_run points sys.argv at the Hydra overrides
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return Result(rc, out.getvalue(), err.getvalue())


def plmbench_exit(*args: str) -> Result:
    """``plmbench ARGS`` where it ends in SystemExit (Hydra's compose errors, --help)."""
    with pytest.raises(SystemExit) as info:
        plmbench(*args)
    return info.value.result


def read(run_dir: Path) -> dict:
    return json.loads((run_dir / "record.json").read_text())


def records_under(root: Path) -> list[Path]:
    return sorted(root.rglob("record.json"))


def run_dir(results: Path, task: str, *overrides: str, label: str = "bert-tiny",
            seed: int = 0) -> Path:
    """Where ``plmbench run ... task=TASK OVERRIDES`` writes its record (bench.run.run_dir_of)."""
    return results / task / label / run_variant(list(overrides)) / f"seed{seed}"
