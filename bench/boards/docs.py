"""Boards in the docs, rendered from committed records: ``plmbench docs [--write] [FILE ...]``.

A board shown in README.md or docs/*.md is never typed by hand. It stands between two markers,
the first naming the plmbench command that renders it (run from the repository's root, over
records committed under ``docs/results/<study>/``)::

    <!-- plmbench leaderboard docs/results/finetune_methods_cpu --board finetune_methods -->
    | Model | ... |
    <!-- end plmbench -->

``plmbench docs`` renders every such block again and names each block whose text differs, with
a unified diff of what its records render now (exit 1); ``--write`` puts the rendered text in
place. A block's paths are the repository's: it renders from the root of the checkout the page
sits in (the nearest folder above it with ``pyproject.toml`` or ``.git``), whatever the current
directory; without FILEs, the pages of the checkout the current directory is in, else of the one
plmbench runs from; a page that is not there is one line, exit 2. The test suite runs the check
over the repository's own docs (tests/bench/boards/test_doc_boards.py), so a change to the
boards' code or to the records that moves a number fails until the docs are rendered again.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text

#: a rendered block: its command (after ``plmbench``) and the text between the markers
BLOCK = re.compile(r"(<!-- plmbench (?P<command>[^\n]*?) -->\n)(?P<body>.*?)"
                   r"(<!-- end plmbench -->)", re.DOTALL)
#: the commands a block may name: they read records and write nothing (claims only with
#: ``--from-records``)
COMMANDS = ("leaderboard", "significance", "claims")


#: what marks a checkout's root, where the blocks' relative paths start
ROOT_MARKS = ("pyproject.toml", ".git")


def doc_files(root: Path) -> list[Path]:
    """README.md and every page of docs/ under ``root``."""
    return [path for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
            if path.is_file()]


def checkout_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``pyproject.toml`` or ``.git``."""
    start = start.resolve()
    return next((d for d in [start, *start.parents]
                 if any((d / mark).exists() for mark in ROOT_MARKS)), None)


def default_files(cwd: Path) -> list[Path]:
    """The pages ``plmbench docs`` checks without FILEs: those of the checkout ``cwd`` is in,
    else of the checkout plmbench runs from; one line where neither has any."""
    for root in (checkout_root(cwd), Path(__file__).resolve().parents[2]):
        if root is not None and (files := doc_files(root)):
            return files
    raise PlmbenchError(f"{cwd} is in no plmbench checkout with README.md or docs/*.md; run "
                        "plmbench docs inside one, or pass the pages to check")


def checked_files(names: list[str]) -> list[Path]:
    """The pages named on the command line; one line for one that is not a readable file."""
    files = [Path(name) for name in names]
    for path in files:
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "does not exist"
            raise PlmbenchError(f"{path} {what}: pass Markdown pages (README.md, docs/*.md), or "
                                "none for the checkout's own")
    return files


@contextlib.contextmanager
def _inside(directory: Path) -> Iterator[None]:
    """The current directory is ``directory`` for the block, as it was after."""
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def render_command(command: str, main: Callable[[list[str]], int]) -> str:
    """What ``plmbench COMMAND`` prints (``main``: the CLI's entry point), run in-process."""
    argv = shlex.split(command)
    if not argv or argv[0] not in COMMANDS or (argv[0] == "claims"
                                                  and "--from-records" not in argv):
        raise PlmbenchError(f"<!-- plmbench {command} -->: a docs block renders "
                            f"leaderboard, significance or claims --from-records; fix the marker")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    if rc != 0:
        raise PlmbenchError(f"plmbench {command} failed ({err.getvalue().strip()}); fix the "
                            "marker or commit the records it reads")
    return out.getvalue().rstrip("\n") + "\n"


@dataclass(frozen=True)
class Stale:
    """A block whose records render other text now: where it is, and the unified diff."""

    path: Path
    line: int  # of its opening marker, 1-based
    command: str
    diff: str

    def header(self) -> str:
        return f"{self.path}:{self.line}: <!-- plmbench {self.command} -->"


def rendered(text: str, main: Callable[[list[str]], int], root: Path | None = None,
             where: Path | None = None) -> tuple[str, list[Stale]]:
    """``text`` with every block's body rendered again (from ``root``, the current directory
    where None), and the blocks that changed (``where``: the page, for their names)."""
    stale: list[Stale] = []

    def body(match: re.Match) -> str:
        with _inside(root) if root is not None else contextlib.nullcontext():
            new = render_command(match.group("command"), main)
        old = match.group("body")
        if new != old:
            line = text.count("\n", 0, match.start()) + 1
            diff = "".join(difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True),
                "committed", "rendered from its records", n=0))
            stale.append(Stale(where or Path("<text>"), line, match.group("command"), diff))
        return match.group(1) + new + match.group(4)

    return BLOCK.sub(body, text), stale


def check(files: list[Path], main: Callable[[list[str]], int], write: bool = False
          ) -> list[Stale]:
    """The blocks that render differently now, file by file (rewritten in place with
    ``write``); each file's blocks render from its checkout's root (module docstring)."""
    stale = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new, changed = rendered(text, main, checkout_root(path.parent) or path.parent, path)
        stale += changed
        if write and new != text:
            atomic_write_text(path, new, fix="make the docs writable")
    return stale
