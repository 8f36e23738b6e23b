"""Which protocol made each row of a board (DESIGN.md contract 8; ``conf/protocol/``).

A protocol is how a model is fine-tuned for a benchmark: each paper's own recipe (``paper``),
ModernBERT's two rounds with RTE, MRPC and STS-B from the MNLI checkpoint and its grid selected on
dev (``modernbert``), cramming's one setting for every task (``glue_sane``). A record names its
protocol (``Record.protocol``); records of different protocols never share a row, since a
protocol changes the configuration its rows are grouped by (the protocol hash).

A board says which protocol made its rows: where they are of one protocol, its footnote names it;
where they are of several, a ``protocol`` column beside the model's name says which row is which,
and the footnote says what each one is. A record of before protocols had names names none, and a
board of such records says nothing of protocols, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

#: where the protocols live: <repo>/conf/protocol/<name>.yaml
PROTOCOL_DIR = Path(__file__).resolve().parents[2] / "conf" / "protocol"
#: the text column that names each row's protocol, where a board's rows are of several
PROTOCOL_COLUMN = "protocol"


@functools.cache
def describe(name: str) -> str:
    """What protocol ``name`` is, in its YAML's words (``protocol.description``); "" for one
    this checkout does not know (a record of another version or of a --config-dir's own)."""
    from omegaconf import OmegaConf

    path = PROTOCOL_DIR / f"{name}.yaml"
    if not path.is_file():
        return ""
    protocol = OmegaConf.load(path).get("protocol") or {}
    return str(protocol.get("description") or "")


def named(protocols: Iterable[str | None]) -> list[str]:
    """The protocol names among ``protocols``, sorted, each once (None: a record naming none)."""
    return sorted({p for p in protocols if p})


def row_text(protocols: Iterable[str | None]) -> str:
    """A row's protocol as its column shows it: its records' one name ("a / b" should a row
    ever hold several, "unnamed" for records that name none)."""
    return " / ".join(named(protocols)) or "unnamed"


def reported_statistic(records: Iterable, board) -> str:
    """The statistic over seeds a board shows when none is asked for: the one the protocol of
    every finished run of the board reports (``protocol.statistic``: glue_sane's median,
    modernbert's mean), else the mean (rows of protocols reporting different statistics, or of
    the paper protocol, whose papers differ)."""
    found = set()
    for record in records:
        if record.status != "ok" or record.baseline or not board.holds(record):
            continue
        protocol = record.config.get("protocol")
        found.add(protocol.get("statistic") if isinstance(protocol, Mapping) else None)
    return found.pop() if len(found) == 1 and None not in found else "mean"


def note(protocols: Iterable[str | None], column: bool) -> str:
    """The footnote's sentence on the rows' protocols ("" where no record names one): the one
    protocol of every row, or what each of several is, whose name the ``protocol`` column
    gives."""
    names = named(protocols)
    if not names:
        return ""

    def said(name: str) -> str:
        what = describe(name)
        return f"{name} ({what})" if what else name

    if len(names) == 1 and not column:
        return f"Protocol of every row: {said(names[0])}."
    return (f"Protocols (the {PROTOCOL_COLUMN} column says which made each row): "
            + "; ".join(said(name) for name in names) + ".")
