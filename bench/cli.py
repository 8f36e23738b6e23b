"""The ``plmbench`` command: one dispatcher over run, leaderboard, perf and data.

    plmbench run [overrides...]            one run (Hydra; `plmbench run --help` lists the groups)
    plmbench run -m [sweep overrides...]   a Hydra multirun sweep, e.g. seed=0,1,2 task=glue/rte
    plmbench leaderboard [RESULTS_DIR] [--board glue] [--format md|csv] [--out FILE]
    plmbench perf [overrides...]           MLM training throughput: ours vs transformers
    plmbench data list                     what the local mirror ($PLMBENCH_DATA) holds
    plmbench data mirror DATASET [CONFIG]  write the mirror from the hub (needs internet)

Bad input ends with one line ``error: ...`` naming the fix, and exit status 2.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

from datamodules.errors import PlmbenchError

DEFAULT_RESULTS = "results"


def results_dir_of(overrides: list[str]) -> Path:
    """The results directory a run will write to, as the config composes it (before Hydra runs)."""
    from hydra import compose, initialize_config_dir

    from bench.run import CONF_DIR

    keys = ("results_dir=", "experiment=", "+experiment=")
    relevant = [o for o in overrides if o.startswith(keys) and "," not in o]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=relevant)
    return Path(cfg.results_dir)


def check_writable(directory: Path) -> None:
    """Fail before anything is written if runs could not leave their records in ``directory``."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as err:
        raise PlmbenchError(
            f"results directory {directory} is not writable ({err.strerror}): "
            "choose another with results_dir=DIR"
        ) from None


def cmd_run(args: list[str]) -> int:
    from bench import run

    if not any(a in ("-h", "--help", "--hydra-help", "--cfg", "-c", "--info") for a in args):
        check_writable(results_dir_of([a for a in args if not a.startswith("-")]))
    # argv[0] is a runnable file: Lightning's DDP launcher starts each extra rank by re-running it
    sys.argv = [run.__file__, *args]
    run.main()
    for line, _ in run.FAILURES:
        print(f"error: {line}", file=sys.stderr)
    if not run.FAILURES:
        return 0
    return 2 if all(bad_input for _, bad_input in run.FAILURES) else 1


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from bench.leaderboard import build_table, get_board, render_csv, render_markdown
    from bench.records import iter_records

    board = get_board(args.board)
    table = build_table(iter_records(args.results_dir), board)
    text = render_csv(table) if args.format == "csv" else render_markdown(table, args.results_dir)
    if args.out:
        write_atomically(Path(args.out), text)
        print(f"wrote {args.out}")
    else:
        print(text)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from datamodules.sources import list_mirror, mirror_dataset, mirror_root

    if args.data_cmd == "mirror":
        for path in mirror_dataset(args.dataset, args.config):
            print(path)
        return 0
    entries = list_mirror()
    if not entries:
        print(f"no datasets under {mirror_root()}: point PLMBENCH_DATA at a mirror, or fill one "
              "with `plmbench data mirror DATASET [CONFIG]`")
        return 0
    table = Table("dataset", "config", "split", "rows", "MB", title=f"mirror: {mirror_root()}")
    for entry in entries:
        table.add_row(entry["dataset"], entry["config"], entry["split"], f"{entry['rows']:,}",
                      f"{entry['bytes'] / 1e6:.1f}")
    Console().print(table)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="plmbench",
        description="Compare pretrained language models under one protocol.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n")[1],
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="train/evaluate one config, or a sweep with -m (Hydra overrides)",
                   add_help=False)
    sub.add_parser("perf", help="MLM training throughput vs transformers (Hydra overrides)",
                   add_help=False)
    lb = sub.add_parser("leaderboard", help="tables from the run records")
    lb.add_argument("results_dir", nargs="?", default=DEFAULT_RESULTS,
                    help=f"where the runs wrote their records (default: {DEFAULT_RESULTS})")
    from bench.leaderboard import known_boards

    lb.add_argument("--board", default="glue",
                    help=f"board, one of conf/board/: {', '.join(known_boards())} (default: glue)")
    lb.add_argument("--format", choices=["md", "csv"], default="md")
    lb.add_argument("--out", help="write to this file instead of stdout")
    data = sub.add_parser("data", help="the local data mirror")
    data_sub = data.add_subparsers(dest="data_cmd", required=True)
    data_sub.add_parser("list", help="datasets, configs and splits the mirror holds")
    mirror = data_sub.add_parser("mirror", help="download a dataset from the hub into the mirror")
    mirror.add_argument("dataset", help="hub dataset id, e.g. glue")
    mirror.add_argument("config", nargs="?", help="dataset config, e.g. mnli")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in ("run", "perf"):
            if argv[0] == "run":
                return cmd_run(argv[1:])
            from bench.perf import main as perf_main

            return perf_main(argv[1:])
        args = parser().parse_args(argv)
        return cmd_leaderboard(args) if args.cmd == "leaderboard" else cmd_data(args)
    except PlmbenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
