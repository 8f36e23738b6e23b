"""Inline SVG figures and the self-contained HTML page that holds them: what the leaderboards
(``bench/boards/html.py``) and the analyses (attention maps, pruning and probing curves) draw.
Nothing is fetched, so every page opens offline; a figure is a function of its data alone, so
the same data give the same bytes.

- ``plot``: points (x, y) per series, joined by lines where a series asks (a curve), on linear
  or logarithmic x;
- ``heatmap``: a matrix of values as coloured cells (layer x head statistics, attention maps),
  each cell's value in its tooltip and in ``data-value``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT, PAD = 520, 260, 48
#: a series' colour, by its index (a colour-blind-safe qualitative palette, Okabe & Ito 2008)
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; } th, td { padding: .3em .7em; border-bottom: 1px solid #ddd; }
th { background: #f4f4f4; } td.num { text-align: right; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5em; } svg { border: 1px solid #ddd; }
.note { color: #555; max-width: 60em; }
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclass(frozen=True)
class Series:
    """Named points of one plot; ``line``: joined in x order (a curve), else dots only."""

    name: str
    points: Sequence[tuple[float, float, str]]  # (x, y, the point's label)
    line: bool = False


def _axis(values: list[float], log: bool) -> tuple[float, float]:
    points = [math.log10(v) for v in values] if log else values
    low, high = min(points), max(points)
    return (low - 0.5, high + 0.5) if low == high else (low, high)


def plot(title: str, name: str, series: Sequence[Series], x_label: str, y_label: str,
         log_x: bool = False, label_points: bool = True) -> str:
    """A figure: the series' points on shared axes (``data-plot`` is ``name``), a legend when
    there are several; a note instead when no point has a usable x."""
    head = f'<figure><figcaption>{esc(title)}</figcaption>'
    series = [Series(s.name, [p for p in s.points if p[0] > 0 or not log_x], s.line)
              for s in series]
    every = [p for s in series for p in s.points]
    if not every:
        note = f"no runs with a known {x_label}"
        return f'{head}<p class="note" data-plot="{name}">{note}</p></figure>'
    (x0, x1), (y0, y1) = _axis([p[0] for p in every], log_x), _axis([p[1] for p in every], False)

    def at(x: float, y: float) -> tuple[float, float]:
        u = (math.log10(x) if log_x else x) - x0
        return (PAD + u / (x1 - x0) * (WIDTH - 2 * PAD),
                HEIGHT - PAD - (y - y0) / (y1 - y0) * (HEIGHT - 2 * PAD))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{name}" '
             f'width="{WIDTH}" height="{HEIGHT}">',
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
             'stroke="#888"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#888"/>',
             f'<text x="{WIDTH / 2}" y="{HEIGHT - 10}" text-anchor="middle">{esc(x_label)}'
             f'{" (log)" if log_x else ""}</text>',
             f'<text x="12" y="{HEIGHT / 2}" transform="rotate(-90 12 {HEIGHT / 2})" '
             f'text-anchor="middle">{esc(y_label)}</text>',
             f'<text x="{PAD}" y="{PAD - 8}" font-size="11">{y1:.4g}</text>',
             f'<text x="{PAD}" y="{HEIGHT - PAD + 14}" font-size="11">{y0:.4g}</text>']
    for index, one in enumerate(series):
        colour = COLOURS[index % len(COLOURS)] if len(series) > 1 else "#3465a4"
        points = sorted(one.points)
        if one.line and len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (at(p[0], p[1]) for p in points))
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                         f'stroke-width="1.5" data-series="{esc(one.name)}"/>')
        for x, y, label in points:
            cx, cy = at(x, y)
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}" '
                         f'data-series="{esc(one.name)}"><title>{esc(label)}: {x:.4g}, {y:.4g}'
                         '</title></circle>')
            if label_points:
                parts.append(f'<text x="{cx + 7:.1f}" y="{cy - 7:.1f}" font-size="11">'
                             f'{esc(label)}</text>')
    if len(series) > 1:
        for index, one in enumerate(series):
            y = PAD + 14 * index
            parts.append(f'<text x="{WIDTH - PAD + 4}" y="{y}" font-size="10" '
                         f'fill="{COLOURS[index % len(COLOURS)]}">{esc(one.name)}</text>')
    return head + "".join(parts) + "</svg></figure>"


def _shade(value: float, low: float, high: float) -> str:
    """White (low) to dark blue (high)."""
    t = 0.0 if high == low or math.isnan(value) else (value - low) / (high - low)
    r, g, b = (round(255 + (c - 255) * t) for c in (8, 48, 107))
    return f"rgb({r},{g},{b})"


def heatmap(title: str, name: str, values: Sequence[Sequence[float]], rows: Sequence[str],
            columns: Sequence[str], row_title: str = "", column_title: str = "",
            cell: int = 22, value_format: str = ".3f") -> str:
    """A matrix as coloured cells (white = its smallest value, dark blue = its largest), each
    with its value in a tooltip and in ``data-value``; row and column labels on the sides."""
    flat = [v for row in values for v in row if not math.isnan(v)]
    low, high = (min(flat), max(flat)) if flat else (0.0, 0.0)
    left = 8 + 7 * max((len(str(r)) for r in rows), default=1)
    top = 8 + 7 * max((len(str(c)) for c in columns), default=1)
    width, height = left + cell * len(columns) + 8, top + cell * len(rows) + 24
    parts = [f'<figure><figcaption>{esc(title)}</figcaption>'
             f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" data-plot="{name}" '
             f'width="{width}" height="{height}">']
    for j, label in enumerate(columns):
        x = left + cell * j + cell / 2
        parts.append(f'<text x="{x:.1f}" y="{top - 4}" font-size="10" '
                     f'transform="rotate(-60 {x:.1f} {top - 4})">{esc(label)}</text>')
    for i, label in enumerate(rows):
        y = top + cell * i + cell / 2 + 4
        parts.append(f'<text x="{left - 4}" y="{y:.1f}" font-size="10" text-anchor="end">'
                     f'{esc(label)}</text>')
        for j, value in enumerate(values[i]):
            text = "n/a" if math.isnan(value) else format(value, value_format)
            parts.append(f'<rect x="{left + cell * j}" y="{top + cell * i}" width="{cell}" '
                         f'height="{cell}" fill="{_shade(value, low, high)}" '
                         f'data-value="{text}"><title>{esc(rows[i])}, {esc(columns[j])}: '
                         f'{text}</title></rect>')
    caption = " ".join(part for part in (row_title and f"rows: {row_title}",
                                         column_title and f"columns: {column_title}") if part)
    parts.append(f'<text x="4" y="{height - 6}" font-size="10">{esc(caption)} '
                 f'(white {low:.3g}, dark {high:.3g})</text>')
    return "".join(parts) + "</svg></figure>"


def page(title: str, sections: Sequence[str], note: str = "") -> str:
    """A self-contained HTML document of ``sections`` (HTML fragments, figures among them)."""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>", f'<p class="note">{esc(note)}</p>' if note else "",
        *sections, "</body></html>", "",
    ])
