"""Published results a board shows beside its measured rows, never among them.

``conf/references/<name>.yaml`` (a board names it with ``references:``) lists rows of figures
read in papers and official repositories, each with its source (paper and table). A figure goes
under the board column it is (``values``, by column label) when the source says which metric it
is, or under its task (``unstated``) when the source gives one number without saying: such a
figure is shown marked "?" in its task's first column and never set beside a measured value of
a particular metric. ``bench/boards/text.py`` renders them as their own table, the HTML page also
as marked points of its forest plots; ``plmbench leaderboard --references`` asks for them.

Every figure says how it was made and on what (DESIGN.md contract 8): its ``protocol`` (a name of
``conf/protocol/``, ``unstated`` where the source does not say: ModernBERT's figures come from its
own protocol, RTE, MRPC and STS-B started from the MNLI checkpoint) and its ``split`` (the file's,
``dev`` for GLUE's, unless a row says otherwise). A figure of the test set that its source prints
as a dev figure says so (``split: test``, ``presented_as: dev``), and the board marks it: such a
figure is no dev result to set beside the measured rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.boards.protocols import PROTOCOL_DIR
from datamodules.errors import PlmbenchError

#: where the reference files live: <repo>/conf/references/<name>.yaml
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "conf" / "references"


@dataclass(frozen=True)
class Reference:
    """One published row: figures as printed (0..100 for GLUE), with where they come from."""

    label: str
    source: str
    values: dict[str, float] = field(default_factory=dict)  # board column label -> figure
    unstated: dict[str, float] = field(default_factory=dict)  # task -> figure, metric unsaid
    score: float | None = None
    score_definition: str = ""
    parameters: int | None = None
    notes: str = ""
    #: how the figures were made (a conf/protocol/ name: ``paper``, ``modernbert``,
    #: ``glue_sane``; ``unstated`` where the source does not say) and on which split
    protocol: str = "paper"
    split: str = "dev"
    #: the split the source presents the figures as, where it is not theirs (a test-set
    #: figure printed in a dev table): "" where it presents them as what they are
    presented_as: str = ""

    @property
    def misplaced(self) -> bool:
        """Whether the source presents figures of one split as another's (test as dev)."""
        return bool(self.presented_as) and self.presented_as != self.split


def _numbers(mapping: object, where: str) -> dict[str, float]:
    if not isinstance(mapping, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in mapping.values()):
        raise PlmbenchError(f"{where} must map names to numbers")
    return {str(k): float(v) for k, v in mapping.items()}


def load_references(name: str) -> list[Reference]:
    """The rows of ``conf/references/<name>.yaml``, checked; one line naming a bad key."""
    from omegaconf import OmegaConf

    path = REFERENCE_DIR / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in REFERENCE_DIR.glob("*.yaml"))
        raise PlmbenchError(f"no reference file {path}; known: {', '.join(known)}")
    config = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    # the file's split and protocol, which a row may set for itself
    split = _split(config.get("split", "dev"), f"{path} split")
    protocol = _protocol(config.get("protocol", "paper"), f"{path} protocol")
    rows = []
    for i, row in enumerate(config.get("rows") or []):
        where = f"{path} rows[{i}]"
        known = {"label", "source", "values", "unstated", "score", "score_definition",
                 "parameters", "notes", "protocol", "split", "presented_as"}
        if unknown := sorted(set(row) - known):
            raise PlmbenchError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
        if not row.get("label") or not row.get("source"):
            raise PlmbenchError(f"{where} needs a label and a source (paper and table)")
        rows.append(Reference(
            label=str(row["label"]), source=" ".join(str(row["source"]).split()),
            values=_numbers(row.get("values") or {}, f"{where} values"),
            unstated=_numbers(row.get("unstated") or {}, f"{where} unstated"),
            score=row.get("score"), score_definition=str(row.get("score_definition") or ""),
            parameters=row.get("parameters"), notes=str(row.get("notes") or ""),
            protocol=_protocol(row.get("protocol", protocol), f"{where} protocol"),
            split=_split(row.get("split", split), f"{where} split"),
            presented_as=_split(row.get("presented_as", ""), f"{where} presented_as", empty=True)))
    return rows


#: the splits a published figure is of (or presented as)
SPLITS = ("dev", "test")
#: a figure whose source does not say how it was fine-tuned
UNSTATED = "unstated"


def _split(value: object, where: str, empty: bool = False) -> str:
    if value in SPLITS or (empty and value in ("", None)):
        return str(value or "")
    raise PlmbenchError(f"{where} is {value!r}; use {' or '.join(SPLITS)}")


def _protocol(value: object, where: str) -> str:
    """A protocol name of conf/protocol/ (``unstated`` where the source does not say)."""
    known = sorted(p.stem for p in PROTOCOL_DIR.glob("*.yaml"))
    if value == UNSTATED or value in known:
        return str(value)
    raise PlmbenchError(f"{where} is {value!r}; use one of {', '.join(known)} (conf/protocol/) "
                        f"or {UNSTATED}")
