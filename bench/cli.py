"""The ``plmbench`` command: one dispatcher over run, leaderboard, perf and data.

    plmbench run [overrides...]            one run (Hydra; `plmbench run --help` lists the groups)
    plmbench run -m [sweep overrides...]   a Hydra multirun sweep, e.g. seed=0,1,2 task=glue/rte
    plmbench run --rerun-failed -m ...     only the points of a sweep whose record failed
    plmbench rerun RECORD.json             exactly the configuration a record holds, again
    plmbench study experiment=NAME [...]   the runs of a study, in order (e.g. experiment=domain)
    plmbench claims experiment=claims_small [...]   the literature's claims, run and reported
    plmbench leaderboard [RESULTS_DIR] [--board glue] [--format md|csv|json|html] [--out FILE]
                         [--select best-on-dev] [--stat median] [--no-baselines]
                         [--aggregate bert_table1] [--references] [--compare DIR_A DIR_B]
    plmbench significance ROW_A ROW_B [RESULTS_DIR] [--board glue] [--resamples 1000]
                                           is B's score different from A's? (bootstrap, ASO)
    plmbench submit glue|superglue RESULTS_DIR [--model LABEL] [--out FILE.zip] [--allow-missing]
                                           a model's test predictions as the server's zip
    plmbench perf [overrides...]           time our pretraining, fine-tuning and inference steps
                                           against transformers' (sdpa, eager); --lengths: memory
                                           and time against length; --generate: decoding tokens/s
    plmbench neighbours WORD --vectors ckpt:RUN --elmo ckpt:RUN   static vs contextual neighbours
    plmbench models list                   the model presets: architecture, source (scratch, a hub
                                           id, a package), size, in the Hugging Face cache or not
    plmbench models fetch ID... [--to DIR] [--revision REV]
                                           hub checkpoints (org/name or a preset) into the cache;
                                           --to DIR: also DIR/<org>--<name> for offline machines
    plmbench docs [--write] [FILE ...]     the boards in README.md and docs/ rendered again from
                                           their committed records (exit 1: some differ)
    plmbench data list                     what the local mirror ($PLMBENCH_DATA) holds
    plmbench data verify                   every file against the mirror's manifest.json
    plmbench data mirror DATASET [CONFIG] [--hub-id ID]
                                           write the mirror from the hub (needs internet); a
                                           file-published dataset (goodreads_spoilers) from its file

Bad input ends with one line ``error: ...`` naming the fix, and exit status 2; Ctrl-C with one
line naming the run it stopped (its record says ``failure_kind: interrupted``), and 130; SIGTERM
(a scheduler's stop) the same, and 143 (``bench/signals.py``).

Each command imports what it needs when it runs (torch, Lightning, faiss only where a run or a
measurement needs them), so help and the boards answer in a fraction of a second.
"""

import argparse
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.arguments import OneLineParser, count
from bench.signals import described, stop_on_sigterm, stopping_signal
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text

if TYPE_CHECKING:
    from omegaconf import DictConfig

DEFAULT_RESULTS = "results"
#: the board of a results directory that holds no run naming one
DEFAULT_BOARD = "glue"


def cmd_rerun(path: str) -> int:
    """Run again the configuration of the record at ``path`` (a record.json or its run dir),
    replacing the record: its overrides composed as they were, checked against its hash."""
    from bench.record import record_at

    record = record_at(path)
    if record is None or not record.has("overrides"):
        raise PlmbenchError(f"{path} is no readable run record; pass a record.json a run wrote")
    replaying = ("skip_completed=", "only_failed=")
    overrides = [o for o in record.overrides if not o.startswith(replaying)]
    moved = moved_results_dir(record)
    if moved is not None:  # a results folder moved or copied since: re-run it where it is now
        overrides = [o for o in overrides if not o.startswith("results_dir=")]
        overrides.append(f"results_dir={moved}")
    from bench.compose import composed_hash

    now = composed_hash(overrides)
    if now != record.config_hash:
        commit = record.versions.git_commit if record.versions else None
        raise PlmbenchError(
            f"{path}: its overrides compose to another configuration now (config hash {now}, "
            f"the record's {record.config_hash}): the presets changed since; re-run it "
            f"from a checkout of commit {commit}"
        )
    return cmd_run([*overrides, "skip_completed=false"])


def moved_results_dir(record) -> Path | None:
    """The results directory a record's run directory sits in now, where the record was read
    from elsewhere than the run directory it names (its folder moved or copied); else None."""
    from bench.record import Record

    assert isinstance(record, Record)
    home, was = record.home, record.run_dir
    top = record.config.get("results_dir")
    if home is None or not was or not isinstance(top, str):
        return None
    try:
        inside = Path(was).relative_to(top)  # both as the run wrote them
    except ValueError:
        return None
    if home.resolve() == Path(was).resolve() or len(home.parts) <= len(inside.parts):
        return None
    return Path(*home.parts[:len(home.parts) - len(inside.parts)])


def command_configs(args: Sequence[str]) -> Iterator[tuple[list[str], "DictConfig"]]:
    """(overrides, composed config) of every run ``plmbench run ARGS`` would make, each checked
    (``bench.run.config_check.check_config``); nothing for a command that only asks for help."""
    from bench.compose import (
        INFO_FLAGS,
        compose_config,
        config_dirs,
        points,
        resolve_target,
        split_command,
        sweep_params,
    )
    from bench.run.config_check import check_config, check_launcher

    flags, overrides = split_command(args)
    if any(flag.partition("=")[0] in INFO_FLAGS for flag in flags):
        return
    dirs = config_dirs(flags)
    if any(flag in ("-m", "--multirun") for flag in flags):  # the grid an experiment sweeps too
        first = points(overrides)[0]
        check_launcher(compose_config(first, "fix the override", dirs, with_hydra=True).hydra)
        overrides = [*overrides, *sweep_params(first, dirs)]
    for point in points(overrides):
        cfg = compose_config(point, "fix the override", dirs)
        resolve_target(cfg)  # an analysis's target task, which the config's checks resolve
        check_config(cfg, point)
        yield point, cfg


def cmd_run(args: list[str]) -> int:
    from bench.record import check_writable

    if "--rerun-failed" in args:
        args = [a for a in args if a != "--rerun-failed"] + ["only_failed=true"]
    # every configuration composes and passes its checks before the first one runs, and before
    # Lightning and torch load (seconds of CPU), so a config error comes at once
    configs = list(command_configs(args))
    directories = [Path(d) for d in sorted({str(cfg.results_dir) for _, cfg in configs})]
    for directory in directories:
        check_writable(directory)
    from bench.run import execute as run

    # argv[0] is a runnable file: Lightning's DDP launcher starts each extra rank by re-running it
    sys.argv = [run.__file__, *args]
    fresh = [top for top in map(first_missing, directories) if top is not None]
    try:
        with sweep_job_errors(args) as failed:
            run.main()
        if failed:
            print(f"error: {failed[0]}", file=sys.stderr)
            return 1
    finally:  # Hydra makes results_dir at start: a command that wrote nothing leaves none behind
        for top in fresh:
            if top.is_dir() and not any(path.is_file() for path in top.rglob("*")):
                shutil.rmtree(top)
    for line, _ in run.FAILURES:
        print(f"error: {line}", file=sys.stderr)
    if not run.FAILURES:
        return 0
    return 2 if all(bad_input for _, bad_input in run.FAILURES) else 1


@contextlib.contextmanager
def sweep_job_errors(args: Sequence[str]) -> Iterator[list[str]]:
    """A sweep whose job a cluster ended without a result (``scancel``, a node failure, a job that
    raised): submitit raises at the first such job, which Hydra would print as a traceback; here
    it is one line (put in the yielded list) naming the job, its state and log, and the fix."""
    if "hydra/launcher=slurm" not in args:
        yield []
        return
    from submitit.core.utils import UncompletedJobError

    failed: list[str] = []
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises what the launcher raised, unprinted
    try:
        yield failed
    except UncompletedJobError as err:
        lines = str(err).splitlines()
        head = " ".join(lines[:2]) if lines else type(err).__name__
        failed.append(f"a job of the sweep ended without a result: {' '.join(head.split())}; its "
                      "record (if it started) says why, and the job's log is under the sweep's "
                      ".submitit folder; run the same command again to run only the points whose "
                      "record is not ok")
    finally:
        if before is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = before


def first_missing(directory: Path) -> Path | None:
    """The outermost directory on ``directory``'s path that does not exist yet (None: it exists),
    what making it would create."""
    missing = None
    for path in [directory, *directory.parents]:
        if path.exists():
            return missing
        missing = path
    return missing


def board_tables(results_dir: str, board, args: argparse.Namespace) -> list:
    """The board's tables of the records under ``results_dir``, as the options ask: one per
    evaluation set its runs were scored on (``bench/boards/sections.py``), usually one."""
    from bench.boards.references import load_references
    from bench.boards.selection import selection_lines
    from bench.boards.tables import View, tables_of
    from bench.record import records_in

    records, unused = records_in(results_dir)
    others = sorted({r.board for r in records if isinstance(r.board, str)} - {board.records_of})
    if others and not any(board.holds(r) for r in records):
        raise PlmbenchError(f"{results_dir} holds no run of board {board.name!r}, only of "
                            f"{', '.join(others)}; pass --board with one of them")
    tasks = getattr(args, "tasks", None)
    # no --stat: the statistic the runs' protocol reports (glue_sane: the median), else the mean
    view = View(stat=getattr(args, "stat", None), baselines=getattr(args, "baselines", True),
                tasks=tuple(tasks.split(",")) if tasks else (),
                select=getattr(args, "select", "all"))
    tables = tables_of(records, board, view, unused, where=results_dir)
    for table in tables:
        for line in selection_lines(table):  # which grid point each row and task stands for
            print(f"best-on-dev: {line}", file=sys.stderr)
        for record in table.unused:  # CSV has no place for them; the other formats list them
            print(f"warning: {record.source}: not used on board {board.name}: {record.why}",
                  file=sys.stderr)
    if getattr(args, "references", False):
        if not board.references:
            raise PlmbenchError(f"board {board.name!r} names no published references "
                                "(references: in its YAML); leave out --references")
        for table in tables:
            table.references = load_references(board.references)
    return tables


def boards_found(results_dir: str) -> list[str]:
    """The boards the runs under ``results_dir`` were written for, sorted."""
    from bench.record import records_in

    return sorted({r.board for r in records_in(results_dir)[0]
                   if isinstance(r.board, str) and not r.baseline})


def chosen_board(args: argparse.Namespace):
    """The board ``--board`` names; without it, the one board the records under the results
    directory were written for (several: one line listing them; none: ``DEFAULT_BOARD``)."""
    from bench.boards.config import get_board

    name = args.board
    if name is None:
        found = boards_found(args.results_dir) if Path(args.results_dir).is_dir() else []
        if len(found) > 1:
            raise PlmbenchError(f"{args.results_dir} holds runs of {len(found)} boards "
                                f"({', '.join(found)}); pass --board with one of them")
        name = found[0] if found else DEFAULT_BOARD
    return get_board(name).with_aggregate(args.aggregate)


def cmd_significance(args: argparse.Namespace) -> int:
    """``plmbench significance ROW_A ROW_B``: B - A per task and on the aggregate, tested."""
    from bench.boards.significance import compare, find_rows, render
    from bench.boards.trivial import baseline_notes

    board = chosen_board(args)
    if board.aggregate == "none":
        raise PlmbenchError(f"board {board.name!r} has no score to compare rows by; use a "
                            "board with an aggregate (glue, squad, tagging, ...)")
    tables = board_tables(args.results_dir, board, args)
    table, *rows = find_rows(tables, args.row_a, args.row_b)
    lines = compare(*rows, table.columns, board, args.resamples, args.seed, args.aso_iterations,
                    args.correction)
    text = render(lines, args.row_a, args.row_b, f"{board.title}, {board.score_label}",
                  args.resamples, table.score_higher_is_better, correction=args.correction)
    text += "\n" + baseline_notes(rows, table.columns, board, args.resamples,
                                  table.score_higher_is_better)
    return _emit(text, args.out)


def _emit(text: str, out: str | None) -> int:
    if out:
        atomic_write_text(Path(out), text, fix="pass --out a path in a writable directory")
        print(f"wrote {out}")
    else:
        print(text)
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from bench.boards.sections import render_tables

    if args.compare:
        args.results_dir = args.compare[0]  # the board of DIR_A's runs, without --board
    board = chosen_board(args)
    if args.compare:
        from bench.boards.compare import one_table, render_comparison  # numpy and scipy's tests

        a, b = (one_table(board_tables(where, board, args), where) for where in args.compare)
        text = render_comparison(a, b, *args.compare, resamples=args.resamples,
                                 aso_iterations=args.aso_iterations)
    else:
        tables = board_tables(args.results_dir, board, args)
        for note in (n for t in tables for n in t.notes) if args.format == "csv" else ():
            print(f"note: {note}", file=sys.stderr)  # CSV has no place for them
        text = render_tables(tables, args.format, args.results_dir)
    return _emit(text, args.out)


def aligned(header: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    """A plain-text table: every name whole (never cut to a terminal's width), the ``numeric``
    columns right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) if i in numeric else c.ljust(w)
                  for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(padded).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def cmd_data(args: argparse.Namespace) -> int:
    from datamodules.sources import list_mirror, mirror_dataset, mirror_root

    if args.data_cmd == "mirror":
        for path in mirror_dataset(args.dataset, args.config, args.hub_id):
            print(path)
        return 0
    if args.data_cmd == "verify":
        return verify_data(mirror_root())
    entries = list_mirror()
    if not entries:
        print(f"no datasets under {mirror_root()}: point PLMBENCH_DATA at a mirror, or fill one "
              "with `plmbench data mirror DATASET [CONFIG]`")
        return 0
    rows = [[e["dataset"], e["config"], e["split"], f"{e['rows']:,}", f"{e['bytes'] / 1e6:.1f}"]
            for e in entries]
    print(f"mirror: {mirror_root()}")
    print(aligned(["dataset", "config", "split", "rows", "MB"], rows, numeric={3, 4}))
    return 0


def verify_data(root: Path) -> int:
    """``plmbench data verify``: 0 when every file matches the mirror's manifest, else 1."""
    from datamodules.mirror_manifest import MANIFEST, verify_mirror

    listed, differing = verify_mirror(root)
    print(f"mirror: {root}")
    if not differing:
        print(f"all {listed} files match {MANIFEST}")
        return 0
    print(aligned(["file", "problem", "detail"],
                  [[d.file, d.problem, d.detail] for d in differing], numeric=set()))
    print(f"{len(differing)} file(s) differ from {MANIFEST} ({listed} listed): restore them from "
          f"the sources {MANIFEST} names, or mirror them again")
    return 1


def cmd_docs(args: argparse.Namespace) -> int:
    from bench.boards.docs import check, checked_files, default_files

    files = checked_files(args.files) if args.files else default_files(Path.cwd())
    stale = check(files, main, write=args.write)
    for block in stale:
        print(f"{'rendered' if args.write else 'differs from its records'}: {block.header()}")
        if not args.write:
            print(block.diff, end="" if block.diff.endswith("\n") else "\n")
    return 1 if stale and not args.write else 0


def cmd_models(args: argparse.Namespace) -> int:
    from bench.run.models import fetch_all, list_rows
    from datamodules.hub import cache_dir

    if args.models_cmd == "fetch":
        for hub_id, where in fetch_all(args.ids, args.revision, args.to):
            print(f"{hub_id}: {where}")
        return 0
    print(f"Hugging Face cache: {cache_dir()}")
    print(aligned(["preset", "arch", "source", "parameters", "cached"], list_rows(),
                  numeric={3}))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from bench.boards.submit import BENCHMARKS, submit

    entries = BENCHMARKS[args.benchmark][1]
    out, sources, missing = submit(args.benchmark, args.results_dir, args.model, args.out,
                                   args.allow_missing)
    for entry in entries:
        if entry.file in sources:
            source = sources[entry.file]
            print(f"{entry.file:<12} {entry.rows:>7} rows  from {source.run_dir} "
                  f"(seed {source.seed}: {source.reason})")
    if missing:
        print(f"warning: {len(missing)} of {len(entries)} files missing (--allow-missing): "
              f"{', '.join(missing)}; the server scores complete submissions", file=sys.stderr)
    print(f"wrote {out} (sources: {out.name}.sources.json)")
    return 0


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="plmbench",
        description="Compare pretrained language models under one protocol.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n")[1],
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="train/evaluate one config, or a sweep with -m (Hydra overrides)",
                   add_help=False)
    sub.add_parser("perf", help="time pretraining, fine-tuning and inference steps against "
                   "transformers (--lengths, --generate; plmbench perf --help)", add_help=False)
    sub.add_parser("study", help="a study's runs in order, then its board (experiment=NAME)",
                   add_help=False)
    sub.add_parser("neighbours", help="a word's static and contextual (biLM) nearest neighbours",
                   add_help=False)
    sub.add_parser("claims", help="the literature's claims: their arms run, claims.md and "
                   "claims.html written (experiment=claims_small|claims_tiny)", add_help=False)
    lb = sub.add_parser("leaderboard", help="tables from the run records")
    lb.add_argument("results_dir", nargs="?", default=DEFAULT_RESULTS,
                    help=f"where the runs wrote their records (default: {DEFAULT_RESULTS})")
    from bench.boards.config import known_boards

    lb.add_argument("--board",
                    help=f"board, one of conf/board/: {', '.join(known_boards())} (default: the "
                         "board the records were written for)")
    lb.add_argument("--format", choices=["md", "csv", "json", "html"], default="md",
                    help="html: one self-contained page with sortable tables and plots")
    lb.add_argument("--out", help="write to this file instead of stdout")
    lb.add_argument("--select", choices=["all", "best-on-dev"], default="all",
                    help="best-on-dev: per model and task, the grid point best on dev "
                         "(experiment=glue_paper)")
    lb.add_argument("--stat", choices=["mean", "median"], default=None,
                    help="the statistic over seeds in cells and scores: mean ± its 95%% "
                         "interval, or median [min, max] as cramming reports; by default the "
                         "one the runs' protocol reports (glue_sane: median), else the mean")
    lb.add_argument("--no-baselines", dest="baselines", action="store_false",
                    help="leave out the rows computed from the data alone (majority class)")
    lb.add_argument("--tasks", help="only the runs of these tasks: comma-separated patterns "
                    "(probing/pos, glue/*), e.g. one task of a board too wide to read whole")
    lb.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"),
                    help="the difference of two results directories, cell by cell, each row "
                         "tested per task and on the score (Markdown)")
    lb.add_argument("--aggregate", help="the score: the board's own (glue: the GLUE "
                    "leaderboard's), or another it names (glue: bert_table1, BERT's Table 1 "
                    "average)")
    lb.add_argument("--references", action="store_true",
                    help="show the board's published reference rows (glue: dev results of "
                         "BERT-base, DistilBERT, ELECTRA-Small, RoBERTa-base, DeBERTa-v3-base, "
                         "ModernBERT-base), apart from the measured rows")
    lb.add_argument("--resamples", type=count(1), default=1000,
                    help="paired bootstrap replicates of --compare (default: 1000)")
    lb.add_argument("--aso-iterations", type=count(0), default=1000,
                    help="ASO's bootstrap iterations in --compare (deepsig; 0: skip the test)")
    sig = sub.add_parser("significance", help="B - A per task and on the score: paired "
                         "bootstrap over examples and seeds, almost stochastic order")
    sig.add_argument("row_a", help="a row label of the board (A)")
    sig.add_argument("row_b", help="another row label (B)")
    sig.add_argument("results_dir", nargs="?", default=DEFAULT_RESULTS,
                     help=f"where the runs wrote their records (default: {DEFAULT_RESULTS})")
    sig.add_argument("--board", help="the board whose rows are compared (default: the board "
                     "the records were written for)")
    sig.add_argument("--aggregate", help="the score to compare (default: the board's own)")
    sig.add_argument("--select", choices=["all", "best-on-dev"], default="all",
                     help="best-on-dev: per model and task, the grid point best on dev")
    sig.add_argument("--resamples", type=count(1), default=1000,
                     help="paired bootstrap replicates (default: 1000)")
    sig.add_argument("--seed", type=count(0, 2**32 - 1), default=0,
                     help="the bootstrap's random seed (0 to 2**32 - 1, as NumPy takes)")
    sig.add_argument("--aso-iterations", type=count(0), default=1000,
                     help="ASO's bootstrap iterations (deepsig; 0: skip the test)")
    sig.add_argument("--correction", choices=["holm", "bh", "none"], default="holm",
                     help="adjust the tasks' p-values for each other: holm (default), bh "
                          "(Benjamini-Hochberg) or none (bench/boards/corrections.py)")
    sig.add_argument("--out", help="write to this file instead of stdout")
    submit = sub.add_parser("submit", help="test predictions as a benchmark server's submission")
    submit.add_argument("benchmark", choices=["glue", "superglue"],
                        help="glue: the zip gluebenchmark.com takes; superglue: its diagnostics "
                             "AX-b and AX-g as super.gluebenchmark.com takes them")
    submit.add_argument("results_dir", help="where the runs wrote their records")
    submit.add_argument("--model", help="the runs' label (default: the only one with the "
                                        "benchmark's predictions)")
    submit.add_argument("--out", help="the zip to write (default: RESULTS_DIR/submissions/"
                                      "BENCHMARK-LABEL.zip)")
    submit.add_argument("--allow-missing", action="store_true",
                        help="write the zip even when tasks lack test predictions (named)")
    docs = sub.add_parser("docs", help="render the boards in README.md and docs/ again from "
                          "their committed records; exit 1 where one differs")
    docs.add_argument("files", nargs="*", help="markdown files (default: README.md, docs/*.md)")
    docs.add_argument("--write", action="store_true", help="put the rendered boards in place")
    rerun = sub.add_parser("rerun", help="run again exactly the configuration a record holds")
    rerun.add_argument("record", help="a record.json (or its run directory)")
    from bench.run.models import add_parser as add_models_parser

    add_models_parser(sub)
    data = sub.add_parser("data", help="the local data mirror")
    data_sub = data.add_subparsers(dest="data_cmd", required=True)
    data_sub.add_parser("list", help="datasets, configs and splits the mirror holds")
    data_sub.add_parser("verify", help="check every file against the mirror's manifest.json "
                        "(sha256); exit 1 naming each file missing, altered or unlisted")
    mirror = data_sub.add_parser("mirror", help="download a dataset from the hub into the mirror")
    mirror.add_argument("dataset", help="hub dataset id, e.g. glue")
    mirror.add_argument("config", nargs="?", help="dataset config, e.g. mnli")
    mirror.add_argument("--hub-id", help="the hub repository when it is not DATASET (a task "
                        "YAML's hub_id, e.g. aps/super_glue); the mirror keeps DATASET's name")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("run", "study", "claims", "rerun"):  # commands that run: SIGTERM
        stop_on_sigterm()  # records an interrupted run, as Ctrl-C does (bench/signals.py)
    try:
        if argv and argv[0] == "claims":
            from bench.studies.claims import cmd_claims

            return cmd_claims(argv[1:])
        if argv and argv[0] in ("run", "perf", "study", "neighbours"):
            if argv[0] == "run":
                return cmd_run(argv[1:])
            if argv[0] == "study":
                from bench.studies.study import cmd_study

                return cmd_study(argv[1:])
            if argv[0] == "neighbours":
                from bench.boards.neighbours import main as neighbours_main

                return neighbours_main(argv[1:])
            from bench.perf.options import parse

            options = parse(argv[1:])  # --help answers here, before torch loads
            from bench.perf.measure import main as perf_main

            return perf_main(*options)
        args = parser().parse_args(argv)
        if args.cmd == "rerun":
            return cmd_rerun(args.record)
        if args.cmd == "significance":
            return cmd_significance(args)
        if args.cmd == "submit":
            return cmd_submit(args)
        if args.cmd == "models":
            return cmd_models(args)
        if args.cmd == "docs":
            return cmd_docs(args)
        return cmd_leaderboard(args) if args.cmd == "leaderboard" else cmd_data(args)
    except PlmbenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # Ctrl-C or SIGTERM: a run's record says so (bench.run.execute.Interrupted)
    except KeyboardInterrupt as err:
        signum = stopping_signal(err) or signal.SIGINT
        print(f"error: {str(err) or f'interrupted by {described(signum)}'}", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
