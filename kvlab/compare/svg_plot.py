"""A small SVG line plot written as plain text (no plotting library needed).

One polyline per series, shared axes starting at 0, about five "nice" ticks per axis, a legend
top-left. Series may have different lengths (runs that take different numbers of steps).

Examples:
    >>> svg = line_plot_svg({"a": [0, 2, 4], "b": [1, 1]}, title="demo", x_label="step")
    >>> svg.startswith("<svg") and svg.count("<polyline") == 2
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape

__all__ = ["PALETTE", "line_plot_svg", "nice_ticks"]

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")
"""Series colours, in order."""


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Ticks 0, d, 2d, ... covering [0, high] with d a 1/2/5 x 10^k step.

    Raises:
        ValueError: If count < 1 or high is negative or not finite.
    """
    if count < 1 or not math.isfinite(high) or high < 0:
        raise ValueError(f"need count >= 1 and a finite high >= 0, got {count}, {high}")
    if high == 0:
        return [0.0, 1.0]
    raw = high / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    n = math.ceil(high / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _fmt(v: float) -> str:
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"


def line_plot_svg(
    series: Mapping[str, Sequence[float]],
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 320,
) -> str:
    """Plot ``series`` (name -> y values at x = 0, 1, 2, ...) as an SVG document.

    Args:
        series: Series by name (at least one, each with at least one value).
        title: Plot title.
        x_label, y_label: Axis labels (put units in them).
        width, height: Size (pixels), at least 200 x 120.

    Returns:
        The SVG text.

    Raises:
        ValueError: If there is no series, one is empty or holds a non-finite value, or the
            size is too small.
    """
    _check_plot_args(series, width, height)
    left, right, top, bottom = 64, 16, 32, 44
    pw, ph = width - left - right, height - top - bottom
    x_ticks = nice_ticks(max(len(v) - 1 for v in series.values()))
    y_ticks = nice_ticks(max(max(float(x) for x in v) for v in series.values()))
    x_max, y_max = x_ticks[-1], y_ticks[-1]

    def px(x: float) -> float:
        return left + pw * x / x_max

    def py(y: float) -> float:
        return top + ph * (1 - y / y_max)

    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
        ),
        f'<rect width="{width}" height="{height}" fill="white"/>',
        (
            f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="13">'
            f"{escape(title)}</text>"
        ),
    ]
    out += _axes(x_ticks, y_ticks, px, py, left, top, pw, ph)
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle">'
               f"{escape(x_label)}</text>")  # fmt: skip
    out.append(f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + ph / 2:.1f})">{escape(y_label)}</text>')  # fmt: skip
    out += _lines(series, px, py, left, top)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _check_plot_args(series: Mapping[str, Sequence[float]], width: int, height: int) -> None:
    if not series or any(len(v) == 0 for v in series.values()):
        raise ValueError("line_plot_svg needs at least one non-empty series")
    if any(not math.isfinite(float(x)) for v in series.values() for x in v):
        raise ValueError("line_plot_svg: every value must be finite")
    if width < 200 or height < 120:
        raise ValueError(f"size must be at least 200 x 120 pixels, got {width} x {height}")


def _lines(series: Mapping[str, Sequence[float]], px, py, left: int, top: int) -> list[str]:
    """One polyline per series, and its legend entry (top-left)."""
    out = []
    for i, (name, values) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        points = " ".join(f"{px(x):.1f},{py(float(y)):.1f}" for x, y in enumerate(values))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{points}"><title>{escape(name)}</title></polyline>')  # fmt: skip
        ly = top + 8 + 14 * i
        out.append(f'<line x1="{left + 8}" y1="{ly}" x2="{left + 28}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')  # fmt: skip
        out.append(f'<text x="{left + 32}" y="{ly + 4}">{escape(name)}</text>')
    return out


def _axes(x_ticks: list[float], y_ticks: list[float], px, py, left, top, pw, ph) -> list[str]:
    out = [f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    for y in y_ticks:
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + pw}" y2="{py(y):.1f}" '
                   f'stroke="#eee"/>')  # fmt: skip
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_fmt(y)}</text>')
    for x in x_ticks:
        out.append(f'<text x="{px(x):.1f}" y="{top + ph + 16}" text-anchor="middle">'
                   f"{_fmt(x)}</text>")  # fmt: skip
    return out
