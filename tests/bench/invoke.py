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

from bench import cli
from bench.config_identity import run_variant
from bench.record import record_paths
from bench.run import execute as run

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


def mirror_with(dataset: str) -> Path:
    """The data mirror that holds ``dataset``. No mirror: the test fails in CI, else it is
    skipped."""
    from tests.conftest import MIRROR_CANDIDATES, in_ci

    root = next((p for p in MIRROR_CANDIDATES if (p / dataset).is_dir()), None)
    if root is None:
        (pytest.fail if in_ci() else pytest.skip)(f"the data mirror with {dataset} is needed "
                                                  "(PLMBENCH_DATA)")
    return root


def plmbench_on_mirror(tmp_path_factory, dataset: str, *args: str) -> tuple[Result, Path]:
    """``plmbench ARGS results_dir=<fresh dir>`` with PLMBENCH_DATA at the data mirror that holds
    ``dataset`` and a fresh datasets cache, for a module's fixture: (what it returned, the results
    directory)."""
    import datasets

    root = mirror_with(dataset)
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLMBENCH_DATA", str(root))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE",
                      str(tmp_path_factory.mktemp("hf_datasets")))
        return plmbench(*args, f"results_dir={results}"), results


def plmbench_exit(*args: str) -> Result:
    """``plmbench ARGS`` where it ends in SystemExit (Hydra's compose errors, --help)."""
    with pytest.raises(SystemExit) as info:
        plmbench(*args)
    return info.value.result


def read(run_dir: Path) -> dict:
    return json.loads((run_dir / "record.json").read_text())


def records_under(root: Path) -> list[Path]:
    return record_paths(root)


def run_dir(results: Path, task: str, *overrides: str, label: str = "bert-tiny-scratch",
            seed: int = 0) -> Path:
    """Where ``plmbench run ... task=TASK OVERRIDES`` writes its record (bench.run.run_dir): named
    by the overrides that change the configuration, not those equal to their defaults."""
    from omegaconf import OmegaConf

    from bench.compose import compose_config, normalize
    from bench.config_identity import config_hash
    from bench.run.run_dir import effective_overrides

    args = [f"task={task}", *overrides]
    cfg = compose_config(args, "a test's overrides")
    normalize(cfg)
    current = config_hash(OmegaConf.to_container(cfg, resolve=True))
    return results / task / label / run_variant(effective_overrides(args, cfg, current)) / (
        f"seed{seed}")
