"""Boards in the docs, rendered from committed records: ``plmbench docs [--write] [FILE ...]``.

A board shown in README.md or docs/*.md is never typed by hand. It stands between two markers,
the first naming the plmbench command that renders it (run from the repository's root, over
records committed under ``docs/results/<study>/``)::

    <!-- plmbench leaderboard docs/results/finetune_methods_cpu --board finetune_methods -->
    | Model | ... |
    <!-- end plmbench -->

``plmbench docs`` renders every such block again and lists the files whose text differs (exit
1); ``--write`` puts the rendered text in place. The test suite runs the check over the
repository's own docs (tests/bench/boards/test_doc_boards.py), so a change to the boards' code or to
the records that moves a number fails until the docs are rendered again.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text

#: a rendered block: its command (after ``plmbench``) and the text between the markers
BLOCK = re.compile(r"(<!-- plmbench (?P<command>[^\n]*?) -->\n)(?P<body>.*?)"
                   r"(<!-- end plmbench -->)", re.DOTALL)
#: the commands a block may name: they read records and write nothing (claims only with
#: ``--from-records``)
COMMANDS = ("leaderboard", "significance", "claims")


def doc_files(root: Path) -> list[Path]:
    """README.md and every page of docs/ under ``root``."""
    return [path for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
            if path.is_file()]


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


def rendered(text: str, main: Callable[[list[str]], int]) -> str:
    """``text`` with every block's body rendered again."""
    def body(match: re.Match) -> str:
        return match.group(1) + render_command(match.group("command"), main) + match.group(4)

    return BLOCK.sub(body, text)


def check(files: list[Path], main: Callable[[list[str]], int], write: bool = False
          ) -> list[Path]:
    """The files whose blocks render differently now (rewritten in place with ``write``)."""
    stale = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = rendered(text, main)
        if new != text:
            stale.append(path)
            if write:
                atomic_write_text(path, new, fix="make the docs writable")
    return stale
