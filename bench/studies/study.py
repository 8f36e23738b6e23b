"""Studies: runs that depend on one another, in order, from one command.

    plmbench study experiment=domain [overrides...]

Hydra's multirun sweeps a product of values and orders nothing, while a study needs order: the
domain-adaptation studies (``conf/experiment/domain*.yaml``) pretrain a general model, continue
it on in-domain text, pretrain another from scratch, fine-tune every checkpoint on the domain's
end tasks over several seeds, and score every checkpoint on every corpus, each run starting from
a checkpoint an earlier one left. A study is its experiment's ``study`` block::

    study:
      experiment: domain_runs   # what its runs compose (their settings without this plan)
      board: domain             # printed at the end, and written to <results_dir>/<board>.md
      runs:                     # in order: each entry the overrides of one run or one sweep
        general: [model=bert-small-scratch, task=pretrain/wikipedia, trainer.max_steps=10000]
        bio:                    # a group: entries in order; `bio: null` drops them all
          dapt: [model=bert-small-scratch, task=pretrain/pubmed, "init_from=ckpt:{general}"]

Each entry is ``plmbench run experiment=<study.experiment> <overrides> <entry>`` (the command's
overrides of the plan, ``study.*``, stay with the plan; an entry that names an experiment composes
that one instead, as the smoke study's do), a sweep's points one after another as Hydra's basic
launcher runs them, through the same code (``bench.run.execute.run_one``): every run leaves its
record, a re-run skips what already ended, a killed run resumes. ``{name}`` in an entry is the run
directory of the earlier entry ``name``, whose record must say ok: its one run, or, for a sweep of
one model on one task (a grid over settings and seeds), the first seed of the grid point best on dev
(ModernBERT's round two starts from the MNLI run so chosen:
``conf/experiment/published_glue_modernbert.yaml``); an entry may hold lists (interpolated from
elsewhere in the block: flattened), and a null entry or group is left out (a smaller preset drops
runs that way). ``{name@seed}`` pairs seeds: each seed of the entry (its ``seed=0,1,2``) starts
from the run of ``name`` with the same seed (of its grid point best on dev), as the pruning of
each fine-tuned seed does (``conf/claims/head_pruning.yaml``). A failed run stops the study after
its entry; ``plmbench rerun <record>`` repeats it, and the study then picks up where it stopped.
The runs go one after another in this process: to use a cluster, submit the study command as one
job.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bench.compose import check_given_once, compose_config, points
from bench.record import Record, check_writable, record_at
from bench.run import execute as run
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text

log = logging.getLogger(__name__)
#: "{name}" in an override: the run directory of the study's entry ``name``; "{name@seed}": its
#: run of the referring run's own seed
REFERENCE = re.compile(r"\{(\w+)(@seed)?\}")


def composed(overrides: list[str]) -> DictConfig:
    """The run config ``plmbench run OVERRIDES`` composes (before it runs)."""
    return compose_config(overrides, "fix the study's entry or the command's overrides")


def _flat(entry: object, where: str) -> Iterator[str]:
    if isinstance(entry, list):
        for item in entry:
            yield from _flat(item, where)
    elif isinstance(entry, str | int | float | bool):
        yield str(entry)
    else:
        raise PlmbenchError(f"{where}: an entry is a list of overrides (key=value), not {entry!r}")


def _entries(runs: dict, where: str, found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Entries by name, in order, groups (mappings) opened, null entries and groups left out."""
    for name, entry in runs.items():
        if entry is None:
            continue
        if isinstance(entry, dict):
            _entries(entry, f"{where}.{name}", found)
            continue
        if name in found:
            raise PlmbenchError(f"{where}.{name}: a second entry named {name}; rename one")
        found[name] = list(_flat(entry, f"{where}.{name}"))
    return found


def study_runs(cfg: DictConfig) -> dict[str, list[str]]:
    """The study's entries, in order, as flat lists of overrides (interpolations resolved)."""
    study = cfg.get("study")
    if not isinstance(study, DictConfig) or not isinstance(study.get("runs"), DictConfig):
        raise PlmbenchError("this configuration holds no study: pass experiment=NAME of a file "
                            "in conf/experiment with a study.runs block (e.g. experiment=domain)")
    return _entries(OmegaConf.to_container(study.runs, resolve=True), "study.runs", {})


def _finished(run_dir: Path, name: str) -> Record:
    """The ok record of ``run_dir``, which entry ``name`` starts from; else one line saying how
    to finish it."""
    record = record_at(run_dir)
    if record is None or record.status != "ok":
        error = (record.error if record else None) or "no record"
        raise PlmbenchError(f"study.runs.{name} starts from {run_dir}, which did not finish "
                            f"({error}); re-run it with `plmbench rerun {run_dir}`, then the "
                            "study again")
    return record


def best_run(run_dirs: list[Path], source: str, name: str, seed: int | None = None) -> Path:
    """The run of sweep ``source`` (one model on one task: a grid over seeds and settings) that
    entry ``name`` starts from: of the grid point best on dev (``bench.boards.selection``: the
    best mean over seeds of the task's scoring columns), its lowest seed (not the best one: a seed
    chosen on dev would overstate round two), as ModernBERT's glue.py starts round two from its
    first MNLI job's checkpoint; with ``seed``, its run of that seed."""
    from bench.boards.config import get_board
    from bench.boards.selection import best_on_dev

    records = [_finished(run_dir, name) for run_dir in run_dirs]
    if len({(r.label, r.task) for r in records}) > 1:
        raise PlmbenchError(f"study.runs.{name} names {{{source}}}, a sweep of several models "
                            "or tasks; a later entry starts from a sweep of one model on one "
                            "task (its grid and seeds), so split it")
    if seed is not None:  # the seed's own runs (each may start from its seed's run: another
        paired = [r for r in records if r.seed == seed]  # config, so no grid point of the rest)
        if not paired:
            raise PlmbenchError(f"study.runs.{name} names {{{source}@seed}} for seed {seed}, "
                                f"which {source} did not run (its seeds: "
                                f"{sorted({str(r.seed) for r in records})}); give both the same "
                                "seeds")
        return Path(str(best_on_dev(paired, get_board(paired[0].board))[0].run_dir))
    kept = best_on_dev(records, get_board(records[0].board))
    first = min(kept, key=lambda r: (not isinstance(r.seed, int), r.seed if isinstance(
        r.seed, int) else 0, str(r.seed), str(r.run_dir)))
    log.info("study.runs.%s starts from %s: %s", name, source, first.run_dir)
    return Path(str(first.run_dir))


def _resolve(override: str, done: dict[str, list[Path]], name: str,
             seed: int | None = None) -> str:
    """``override`` with each "{entry}" replaced by that earlier entry's run directory: its one
    run, or of a sweep the run best on dev (``best_run``); "{entry@seed}" by its run of
    ``seed``."""
    def run_dir(match: re.Match) -> str:
        source, paired = match.group(1), match.group(2)
        if source not in done:
            raise PlmbenchError(f"study.runs.{name} names {{{source}}}, which is no earlier "
                                "single run or sweep of the study; reorder the entries or fix "
                                "the name")
        if paired:
            return str(best_run(done[source], source, name, seed))
        if len(done[source]) > 1:
            return str(best_run(done[source], source, name))
        _finished(done[source][0], name)
        return str(done[source][0])

    return REFERENCE.sub(run_dir, override)


def _by_seed(entry: list[str], name: str) -> list[tuple[int | None, list[str]]]:
    """The entry as it runs: whole, or where it names a run of its own seed ("{x@seed}"), one
    part per value of its ``seed=`` (each with that seed alone)."""
    if not any(paired for o in entry for _, paired in REFERENCE.findall(o)):
        return [(None, entry)]
    given = [o for o in entry if o.startswith("seed=")]
    if len(given) != 1:
        raise PlmbenchError(f"study.runs.{name} names a run of its own seed ({{entry@seed}}): "
                            "give it its seeds once (seed=0,1,2)")
    try:
        seeds = [int(s) for s in given[0].removeprefix("seed=").split(",")]
    except ValueError:
        raise PlmbenchError(f"study.runs.{name}: {given[0]} is no list of integer seeds "
                            "(seed=0,1,2)") from None
    return [(seed, [f"seed={seed}" if o in given else o for o in entry]) for seed in seeds]


def needed(entries: dict[str, list[str]], names: Iterable[str]) -> set[str]:
    """``names`` and every entry they start from ("{name}" in their overrides), transitively; a
    name that is no entry is one line naming it."""
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in entries:
            raise PlmbenchError(f"study entry {name!r} is not in study.runs; known: "
                                f"{', '.join(entries)}")
        if name not in wanted:
            wanted.add(name)
            todo += [m for o in entries[name] for m, _ in REFERENCE.findall(o)]
    return wanted


def run_study(overrides: list[str], select: Iterable[str] | None = None) -> DictConfig:
    """Run every entry of the study the overrides compose (only those ``select`` names and the
    entries they start from, when given), in order; the composed config."""
    check_given_once(overrides)  # the command line's; an entry may set what its experiment set
    cfg = composed(overrides)
    entries = study_runs(cfg)
    if select is not None:
        keep = needed(entries, select)
        entries = {name: entry for name, entry in entries.items() if name in keep}
    check_writable(Path(cfg.results_dir))
    # the runs compose the study's run settings, not its plan: overrides of the plan stay here
    experiment = cfg.study.get("experiment")
    naming = ("experiment=", "+experiment=")
    plan = ("study.", "+study.", "++study.", *(naming * bool(experiment)))
    shared = [*([f"experiment={experiment}"] if experiment else []),
              *(o for o in overrides if not o.startswith(plan))]
    done: dict[str, list[Path]] = {}  # each entry's run directories
    for name, entry in entries.items():
        own = any(o.startswith(naming) for o in entry)  # its experiment, not the study's
        base = [o for o in shared if not (own and o.startswith(naming))]
        jobs = [job for seed, part in _by_seed(entry, name)
                for job in points([*base, *(_resolve(o, done, name, seed) for o in part)])]
        run.FAILURES.clear()
        # under DDP each run starts its own ranks (bench/run/launch.py)
        done[name] = [run_dir for job in jobs
                      if (run_dir := run.run_one(composed(job), job)) is not None]
        for line, _ in run.FAILURES:
            print(f"error: {line}", file=sys.stderr)
        if run.FAILURES:
            raise PlmbenchError(f"study.runs.{name}: a run failed (listed above); fix it, re-run "
                                "it with `plmbench rerun <its record>`, then the study again")
    return cfg


def render_board(results_dir: Path, board_name: str) -> str:
    """The board's Markdown over the study's records, baseline rows included."""
    from bench.boards.sections import render_tables
    from bench.boards.tables import View, tables_in

    # the statistic the runs' protocol reports (glue_sane: the median), as plmbench leaderboard
    tables = tables_in(results_dir, board_name, View(stat=None))
    return render_tables(tables, "md", str(results_dir))


def cmd_study(overrides: list[str]) -> int:
    """``plmbench study OVERRIDES``: run the study, then print and write its board."""
    # what Hydra's job logging does for `plmbench run`: the runs' progress on stdout
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="[%(asctime)s][%(name)s][%(levelname)s] %(message)s")
    cfg = run_study(overrides)
    results_dir, board = Path(cfg.results_dir), cfg.study.get("board")
    if board:
        text = render_board(results_dir, board)
        atomic_write_text(results_dir / f"{board}.md", text)
        print(text)
        print(f"wrote {results_dir / f'{board}.md'}")
    return 0
