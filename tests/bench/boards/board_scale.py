"""Records at a study's scale, made from committed real ones: the board benchmark's input.

    python -m tests.bench.boards.board_scale RESULTS_DIR [--records 4000] [--measure]

Writes ``--records`` run records (with their predictions files, hard-linked where the file system
allows) under RESULTS_DIR, each a copy of one of the 18 committed records of
``docs/results/minilm_glue_cpu`` (six GLUE tasks x three seeds, 65 KB each on average, per-example
outputs included), as a hyperparameter grid would leave them: 20 labels x as many learning rates
as it takes, each point a protocol of its own, its metrics moved by a deterministic amount. No
model runs; the records are the text runs write (``bench.record.record_text``). ``--measure``
then boards them twice in fresh processes (``measure``): the first read builds the directory's
index (``bench/board_index.py``), the second reads through it.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.record import RECORD_NAME, record_text

TEMPLATES = Path(__file__).resolve().parents[3] / "docs" / "results" / "minilm_glue_cpu"
LABELS = 20


def templates() -> list[tuple[Path, dict]]:
    """(run directory, record) of every committed template, in path order."""
    paths = sorted(TEMPLATES.rglob(RECORD_NAME))
    return [(path.parent, json.loads(path.read_text(encoding="utf-8"))) for path in paths]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def write_scale(results: Path, n: int) -> list[Path]:
    """``n`` records under ``results`` (module docstring); their run directories."""
    found = templates()
    written = []
    for i in range(n):
        source, template = found[i % len(found)]
        point = i // len(found)  # one grid point: every template once
        label, lr = f"model-{point % LABELS}", round(1e-5 * (1 + point // LABELS), 8)
        record = copy.deepcopy(template)
        config = record["config"]
        config["optim"]["lr"] = lr
        config["label"] = config["model"]["name"] = label
        seed = record["seed"]
        run_dir = results / record["task"] / label / f"lr{point // LABELS}" / f"seed{seed}"
        shift = (i % 7 - 3) / 1000
        for values in record["metrics"].values():
            for metric, value in values.items():
                if isinstance(value, float):
                    values[metric] = value + shift
        record.update(
            label=label, model=label, run_dir=str(run_dir), run_id=f"scale-{i:06d}",
            config_hash=_digest(f"{record['task']} {label} {lr}"),
            protocol_hash=_digest(f"{label} {lr}"),
            overrides=[*record["overrides"], f"optim.lr={lr}"])
        for file in record.get("predictions", {}).values():
            _link(source / file, run_dir / file)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / RECORD_NAME).write_text(record_text(record), encoding="utf-8")
        written.append(run_dir)
    return written


def measure(results: Path, board: str = "glue") -> dict[str, float]:
    """CPU seconds (user + system) and peak memory (MB) of ``plmbench leaderboard RESULTS
    --board BOARD`` in a fresh process, and the bytes of Markdown it printed."""
    root = Path(__file__).resolve().parents[3]
    process = subprocess.Popen([sys.executable, "-m", "bench.cli", "leaderboard", str(results),
                                "--board", board], cwd=root, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env={**os.environ,
                                                              "PYTHONPATH": str(root)})
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"plmbench leaderboard {results} failed")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024,
            "bytes": len(out)}

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--measure", action="store_true",
                        help="board them twice, printing CPU seconds and peak memory")
    args = parser.parse_args()
    write_scale(args.results_dir, args.records)
    print(f"wrote {args.records} records under {args.results_dir}")
    for read in ("first read (builds the index)", "second read (through the index)"):
        if args.measure:
            found = measure(args.results_dir)
            print(f"{read}: {found['cpu_s']:.2f} CPU s, {found['peak_mb']:.0f} MB peak, "
                  f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
