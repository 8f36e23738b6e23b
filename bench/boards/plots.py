"""The HTML board's plots, drawn here as inline SVG (nothing is fetched): what a reader compares.

- ``forest``: per task, the rows as points on one axis with their 95% intervals as whiskers,
  sorted best first, one row per line (labels in a left margin sized to the longest, so none
  overlaps or runs off; a label over ``MAX_LABEL`` characters is cut, whole in its tooltip, so
  the plot keeps a readable width); baseline rows drawn as grey squares, published reference
  rows as open diamonds, measured rows as filled dots.
- ``scatter``: the score against a cost (parameters, pretraining FLOPs; log scale), the Pareto
  frontier drawn (the rows no other row beats on both: a higher score at a lower cost), every
  point labelled where its label fits without touching another label, a point or the frame,
  else numbered and named in a legend under the plot; a label (or number) placed away from
  its point is joined to it by a leader line, and a point with no free place even for its
  number is named in the legend alone (its tooltip names it on the plot).
- ``heatmap``: rows x tasks as an HTML table, each cell coloured by its place between the task's
  worst and best row.

Text widths are upper bounds (``char_width``: per character class, at least DejaVu Sans's
advance, the widest of the common sans-serif faces), so a label drawn in any of them fits the
box it was placed in; the browser test measures the drawn labels
(tests/bench/boards/test_board_html.py).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

FONT = 11  # px, every label
CHAR_WIDTH = 0.66 * FONT  # the most a lower-case letter, digit or punctuation mark takes
#: characters wider than ``CHAR_WIDTH``, by their upper bound in ems (DejaVu Sans: W 0.99,
#: m 0.97, = and + 0.84, M 0.86, O 0.79); any other capital 0.8, any non-ASCII character 1
WIDE = {**dict.fromkeys("mwMW@%&=+~<>…", 1.0), **dict.fromkeys("#", 0.84)}
MAX_LABEL = 48  # characters of a forest plot's label; a longer one is cut (whole in its tooltip)
LINE = 18  # px between forest rows
PAD = 12
KINDS = ("model", "baseline", "reference")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def char_width(char: str) -> float:
    """An upper bound of one character's width at ``FONT`` px."""
    if char in WIDE:
        return WIDE[char] * FONT
    if not char.isascii():
        return FONT
    return 0.8 * FONT if char.isupper() else CHAR_WIDTH


def text_width(text: str) -> float:
    return sum(char_width(char) for char in text)


def cut(label: str) -> str:
    """``label``, cut to ``MAX_LABEL`` characters (ending in "…") where longer."""
    return label if len(label) <= MAX_LABEL else label[:MAX_LABEL - 1] + "…"


@dataclass(frozen=True)
class Item:
    """One row of a forest plot: its value and interval (None: no interval), and its kind."""

    label: str
    value: float
    low: float | None = None
    high: float | None = None
    kind: str = "model"  # one of KINDS


def _ticks(low: float, high: float) -> list[float]:
    """About five round values spanning [low, high]."""
    if high <= low:
        return [low]
    step = 10 ** math.floor(math.log10((high - low) / 4))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= 5:
            step *= factor
            break
    start = math.ceil(low / step) * step
    return [start + i * step for i in range(int((high - start) / step + 1e-9) + 1)]


def _marker(kind: str, x: float, y: float, title: str) -> str:
    tip = f"<title>{esc(title)}</title>"
    if kind == "baseline":
        return (f'<rect class="baseline" x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" '
                f'fill="#999">{tip}</rect>')
    if kind == "reference":
        points = f"{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} {x:.1f},{y + 5:.1f} {x - 5:.1f},{y:.1f}"
        return (f'<polygon class="reference" points="{points}" fill="white" stroke="#c0392b" '
                f'stroke-width="1.5">{tip}</polygon>')
    return f'<circle class="model" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#3465a4">{tip}</circle>'


def forest(title: str, name: str, items: Sequence[Item], higher_is_better: bool = True,
           width: int = 420) -> str:
    """A forest plot of ``items``, best first (module docstring)."""
    head = f'<figure><figcaption>{esc(title)}</figcaption>'
    if not items:
        return f'{head}<p class="note" data-plot="{esc(name)}">no values</p></figure>'
    sign = -1 if higher_is_better else 1
    items = sorted(items, key=lambda it: (sign * it.value, it.label))
    left = PAD + max(text_width(cut(it.label)) for it in items) + 10
    plot = max(200.0, width - left - PAD)
    bounds = [v for it in items for v in (it.value, it.low, it.high) if v is not None]
    low, high = min(bounds), max(bounds)
    low, high = (low - 0.5, high + 0.5) if low == high else (low, high)
    margin = 0.05 * (high - low)
    low, high = low - margin, high + margin

    def x(v: float) -> float:
        return left + (v - low) / (high - low) * plot

    top, total = 20, left + plot + PAD
    height = top + LINE * len(items) + 34
    axis_y = top + LINE * len(items) + 4
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot forest" '
             f'data-plot="{esc(name)}" width="{total:.0f}" height="{height}">',
             f'<line x1="{left:.1f}" y1="{axis_y}" x2="{left + plot:.1f}" y2="{axis_y}" '
             'stroke="#888"/>']
    for tick in _ticks(low, high):
        parts.append(f'<line x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{axis_y}" '
                     f'stroke="#eee"/><text class="tick" x="{x(tick):.1f}" y="{axis_y + 14}" '
                     f'font-size="{FONT}" text-anchor="middle">{tick:.4g}</text>')
    for i, item in enumerate(items):
        y = top + LINE * i + LINE / 2
        parts.append(f'<g><title>{esc(item.label)}</title><text class="label" '
                     f'x="{left - 10:.1f}" y="{y + FONT / 3:.1f}" font-size="{FONT}" '
                     f'text-anchor="end">{esc(cut(item.label))}</text></g>')
        if item.low is not None and item.high is not None:
            parts.append(f'<line class="interval" x1="{x(item.low):.1f}" y1="{y:.1f}" '
                         f'x2="{x(item.high):.1f}" y2="{y:.1f}" stroke="#3465a4" '
                         'stroke-width="1.5"/>')
        spread = "" if item.low is None else f" [{item.low:.4g}, {item.high:.4g}]"
        parts.append(_marker(item.kind, x(item.value), y, f"{item.label}: {item.value:.4g}"
                                                           f"{spread}"))
    return head + "".join(parts) + "</svg></figure>"


def pareto(points: Sequence[tuple[float, float, str]], higher_is_better: bool = True
           ) -> list[tuple[float, float, str]]:
    """The points no other point beats: none has a lower-or-equal cost (x) and a better score
    (y), strictly better on one; by increasing cost."""
    sign = 1 if higher_is_better else -1
    front, best = [], -math.inf
    for x, y, label in sorted(points, key=lambda p: (p[0], -sign * p[1])):
        if sign * y > best:
            front.append((x, y, label))
            best = sign * y
    return front


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def scatter(title: str, name: str, points: Sequence[tuple[float, float, str]], x_label: str,
            y_label: str, higher_is_better: bool = True, width: int = 560, height: int = 320
            ) -> str:
    """The score (y) against a cost (x, log scale) with the Pareto frontier and labels placed
    without overlaps (module docstring)."""
    head = f'<figure><figcaption>{esc(title)}</figcaption>'
    points = sorted(p for p in points if p[0] > 0)
    if not points:
        return (f'{head}<p class="note" data-plot="{esc(name)}">no runs with a known '
                f'{esc(x_label)}</p></figure>')
    left, right, top, bottom = 56, PAD, PAD, 44
    xs = [math.log10(p[0]) for p in points]
    ys = [p[1] for p in points]
    (x0, x1), (y0, y1) = (min(xs), max(xs)), (min(ys), max(ys))
    x0, x1 = (x0 - 0.5, x1 + 0.5) if x0 == x1 else (x0 - 0.08 * (x1 - x0), x1 + 0.08 * (x1 - x0))
    y0, y1 = (y0 - 0.5, y1 + 0.5) if y0 == y1 else (y0 - 0.1 * (y1 - y0), y1 + 0.1 * (y1 - y0))

    def at(x: float, y: float) -> tuple[float, float]:
        return (left + (math.log10(x) - x0) / (x1 - x0) * (width - left - right),
                top + (y1 - y) / (y1 - y0) * (height - top - bottom))

    frame = (left, top, width - right, height - bottom)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot scatter" '
             f'data-plot="{esc(name)}" width="{width}" height="{height}">',
             f'<rect x="{left}" y="{top}" width="{width - left - right}" '
             f'height="{height - top - bottom}" fill="none" stroke="#888"/>',
             f'<text x="{(left + width - right) / 2:.0f}" y="{height - 8}" font-size="{FONT}" '
             f'text-anchor="middle">{esc(x_label)} (log)</text>',
             f'<text x="12" y="{(top + height - bottom) / 2:.0f}" font-size="{FONT}" '
             f'transform="rotate(-90 12 {(top + height - bottom) / 2:.0f})" '
             f'text-anchor="middle">{esc(y_label)}</text>']
    for exponent in range(math.ceil(x0), math.floor(x1) + 1):
        tx = at(10 ** exponent, y0)[0]
        parts.append(f'<text class="tick" x="{tx:.1f}" y="{height - bottom + 14}" '
                     f'font-size="{FONT}" text-anchor="middle">1e{exponent}</text>')
    for tick in _ticks(y0, y1):
        ty = at(10 ** x0, tick)[1]
        parts.append(f'<text class="tick" x="{left - 4}" y="{ty + FONT / 3:.1f}" '
                     f'font-size="{FONT}" text-anchor="end">{tick:.4g}</text>')
    front = pareto(points, higher_is_better)
    if len(front) > 1:
        path = " ".join(f"{u:.1f},{v:.1f}" for u, v in (at(x, y) for x, y, _ in front))
        parts.append(f'<polyline class="pareto" points="{path}" fill="none" stroke="#c0392b" '
                     'stroke-dasharray="4 3"/>')
    on_front = {(x, y, label) for x, y, label in front}
    taken = [(u - 5, v - 5, u + 5, v + 5) for u, v in (at(x, y) for x, y, _ in points)]
    legend = []
    for x, y, label in sorted(points, key=lambda p: (-p[1], p[2])):
        u, v = at(x, y)
        parts.append(f'<circle cx="{u:.1f}" cy="{v:.1f}" r="4.5" '
                     f'fill="{"#c0392b" if (x, y, label) in on_front else "#3465a4"}">'
                     f'<title>{esc(label)}: {x:.4g}, {y:.4g}</title></circle>')
        placed = _place(label, u, v, taken, frame)
        if placed is None:  # no room: a number here, the name in the legend
            legend.append(label)
            label = str(len(legend))
            placed = _place(label, u, v, taken, frame, NUMBER_DISTANCES)
            if placed is None:  # not even for the number: the legend alone names it
                legend[-1] += f" (unlabelled point at {x:.4g}, {y:.4g})"
                continue
        taken.append(placed)
        parts.append(_leader(u, v, placed))
        # the text hugs the side of its box that faces the point (its box is an upper bound)
        anchor, tx = (("end", placed[2]) if placed[2] <= u else ("start", placed[0])
                      if placed[0] >= u else ("middle", (placed[0] + placed[2]) / 2))
        parts.append(f'<text class="point-label" x="{tx:.1f}" y="{placed[3] - 3:.1f}" '
                     f'font-size="{FONT}" text-anchor="{anchor}" data-x="{u:.1f}" '
                     f'data-y="{v:.1f}">{esc(label)}</text>')
    names = "".join(f"<li>{esc(name_)}</li>" for name_ in legend)
    key = f'<ol class="legend">{names}</ol>' if legend else ""
    return head + "".join(parts) + "</svg>" + key + "</figure>"


#: how far from its point (px) a label may be placed, nearest first; a number, further
DISTANCES = (7, 16, 28)
NUMBER_DISTANCES = (7, 16, 28, 44, 64, 90)
#: a label whose box is further than this from its point (px) gets a leader line
LEADER = 9


def _gap(u: float, v: float, box: tuple) -> tuple[float, float]:
    """The point of ``box`` nearest to (u, v)."""
    return min(max(u, box[0]), box[2]), min(max(v, box[1]), box[3])


def _leader(u: float, v: float, box: tuple) -> str:
    """A thin line from the point to its label's box where the label sits away from it."""
    gx, gy = _gap(u, v, box)
    if math.hypot(gx - u, gy - v) <= LEADER:
        return ""
    return (f'<line class="leader" x1="{u:.1f}" y1="{v:.1f}" x2="{gx:.1f}" y2="{gy:.1f}" '
            'stroke="#999" stroke-width="0.8"/>')


def _place(label: str, u: float, v: float, taken: list, frame,
           distances: Sequence[float] = DISTANCES) -> tuple | None:
    """A free box for ``label`` near the point (u, v): right, left, above, below, then further
    out; None when every candidate touches a taken box or leaves the frame."""
    w, h = text_width(label), FONT + 4
    for distance in distances:
        for dx, dy in ((distance, -h / 2), (-distance - w, -h / 2), (-w / 2, -distance - h),
                       (-w / 2, distance), (distance, -distance - h), (distance, distance),
                       (-distance - w, -distance - h), (-distance - w, distance)):
            box = (u + dx, v + dy, u + dx + w, v + dy + h)
            inside = (frame[0] + 2 <= box[0] and box[2] <= frame[2] - 2 and
                      frame[1] + 2 <= box[1] and box[3] <= frame[3] - 2)
            if inside and not any(_overlaps(box, other) for other in taken):
                return box
    return None


def heatmap(rows: Sequence[str], tasks: Sequence[str], values: dict[tuple[str, str], float],
            higher_is_better: dict[str, bool], name: str = "heatmap") -> str:
    """An HTML table of ``values`` (row, task), each cell shaded from the task's worst (white)
    to its best (blue)."""
    if not rows or not tasks:
        return ""
    header = "".join(f"<th>{esc(t)}</th>" for t in tasks)
    body = []
    for row in rows:
        cells = [f"<th>{esc(row)}</th>"]
        for task in tasks:
            value = values.get((row, task))
            if value is None:
                cells.append('<td class="num">–</td>')
                continue
            column = [v for (_, t), v in values.items() if t == task]
            low, high = min(column), max(column)
            share = 0.5 if high == low else (value - low) / (high - low)
            share = share if higher_is_better.get(task, True) else 1 - share
            light = 96 - 46 * share
            cells.append(f'<td class="num" data-value="{value!r}" style="background: '
                         f'hsl(215 60% {light:.0f}%); color: {"#fff" if light < 62 else "#222"}">'
                         f"{value:.1f}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<table class="heatmap" id="{esc(name)}"><thead><tr><th></th>{header}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")
