"""Command-line options parsed as every other input is checked: a bad one is one line.

argparse prints its usage and then the error, several lines, and exits; plmbench's commands
(``bench/cli.py``, ``bench/perf/measure.py``) parse with ``OneLineParser``, whose errors are a
``PlmbenchError`` like any other bad input: one line naming the option and where its help is,
exit status 2.
"""

from __future__ import annotations

import argparse

from datamodules.errors import PlmbenchError


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors (an unknown option, a value of the wrong type) are one line naming
    the fix, exit status 2, as every other bad input (``PlmbenchError``); its subcommands too."""

    def error(self, message: str):
        raise PlmbenchError(f"{self.prog}: {message}; see {self.prog} --help")


def count(minimum: int, maximum: int | None = None):
    """An argparse type: an integer of at least ``minimum`` (and at most ``maximum``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
            raise argparse.ArgumentTypeError(f"{text!r} is no integer {bound}")
        return value
    return parse
