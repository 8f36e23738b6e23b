"""A board's row: one model under one protocol, its cells by column label, its score and marks, and
the records behind it. The table (``bench/boards/table.py``) builds rows; scoring
(``bench/boards/score.py``), rendering and significance read them."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.boards.cells import Cell
from bench.boards.config import Board
from bench.boards.points import full_name
from bench.boards.stats import Estimate
from bench.record import Record


@dataclass
class Row:
    """One model under one protocol; ``cells`` maps column labels to their aggregates."""

    label: str
    protocol_hash: str
    cells: dict[str, Cell]
    score: float | None  # scaled as the columns are; None when the board has no aggregate
    n_scored: int  # tasks (task_macro) or columns (mean) the score covers
    baseline: bool = False  # computed from the data alone, with no training
    parameters: int | None = None  # the model's parameter count (largest over its records; a
    # fine-tuning record's without its task's head, the same model's size on every task), or
    # on a board of ``size: trained_parameters`` the most its fine-tuning method trained
    compute: float | None = None  # pretraining FLOPs: its own, or those of its init_from run
    share: float | None = None  # score / the board's reference row's score
    parameter_share: float | None = None  # parameters / the reference row's parameters
    #: the score as an estimate over seeds (its interval); None without one
    score_estimate: Estimate | None = None
    texts: dict[str, str] = field(default_factory=dict)  # ``text: column`` values by label
    #: column label (or board_score.SCORE) -> BEST or TIED (bench/boards/score.py)
    marks: dict[str, str] = field(default_factory=dict)
    #: the records behind the row, by task (what ``plmbench significance`` resamples)
    records: dict[str, list[Record]] = field(default_factory=dict, repr=False)
    #: per task, the grid point best-on-dev selection chose (bench.boards.selection: point, dev, n)
    selected: dict[str, dict] = field(default_factory=dict)
    record_label: str = ""  # the records' label (``label`` may add the point's values)
    #: the protocols its records name (conf/protocol/; bench/boards/protocols.py): one, or none
    #: for records of before protocols had names
    protocols: tuple[str, ...] = ()
    settings: dict[str, str] = field(default_factory=dict)  # its config, flat (board_points)
    #: the settings that differ from the other rows of its label, all of them: what its short
    #: name (``label``) abbreviates (bench/boards/points.py)
    point: dict[str, str] = field(default_factory=dict)
    #: the range the score can take (``score.score_bounds``): its interval is cut to it
    score_bounds: tuple[float | None, float | None] = (None, None)

    @property
    def full_name(self) -> str:
        """The row's name with every differing setting (what boards showed before short names,
        still accepted by ``plmbench significance``)."""
        return full_name(self.record_label, self.point)

    def key(self, board: Board) -> tuple[str, str]:
        """What identifies the row whatever other records a table holds: its records' label and,
        unless the board makes a row of a label's every protocol, its protocol."""
        return self.record_label, self.protocol_hash if board.rows == "protocol" else ""

    def score_interval(self) -> tuple[float, float] | None:
        """The score's 95% interval, cut to the range the score can take (None: none)."""
        interval = None if self.score_estimate is None else self.score_estimate.interval()
        if interval is None:
            return None
        low, high = self.score_bounds
        return (interval[0] if low is None else max(low, interval[0]),
                interval[1] if high is None else min(high, interval[1]))
