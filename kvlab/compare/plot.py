"""Per-step series of a comparison drawn with matplotlib, one line per cache.

``series_figure`` draws several series (name -> y values at x = 0, 1, 2, ...; they may differ in
length, as runs take different numbers of steps) on shared axes starting at 0, with a legend;
``line_plot_svg`` returns the same figure as SVG text. ``Comparison.figure`` and
``Comparison.to_svg`` use them; ``kvlab compare --svg-dir`` writes their SVG files. The figures
show themselves in a notebook and save the same bytes on every run (``kvlab.charts``, as
``kvlab.traffic``'s hit-rate curve).

matplotlib is optional (``pip install 'kvlab[viz]'``): importing this module does not need it;
the functions say so when it is missing.

Examples:
    >>> svg = line_plot_svg({"a": [0, 2, 4], "b": [1, 1]}, title="demo", x_label="step")
    >>> svg.startswith("<?xml") and svg == line_plot_svg({"a": [0, 2, 4], "b": [1, 1]},
    ...                                                  title="demo", x_label="step")
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kvlab.charts import figure_class, figure_svg, freeze_layout, require_matplotlib

__all__ = ["line_plot_svg", "series_figure"]


def _check_plot_args(series: Mapping[str, Sequence[float]], width: int, height: int) -> None:
    if not series or any(len(v) == 0 for v in series.values()):
        raise ValueError("a plot needs at least one non-empty series")
    if any(not math.isfinite(float(x)) for v in series.values() for x in v):
        raise ValueError("every value of a plotted series must be finite")
    if width < 200 or height < 120:
        raise ValueError(f"size must be at least 200 x 120 pixels, got {width} x {height}")


def series_figure(
    series: Mapping[str, Sequence[float]],
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 320,
) -> Any:
    """Plot ``series`` (name -> y values at x = 0, 1, 2, ...), one line each, in insertion order.

    Args:
        series: Series by name (at least one, each with at least one finite value).
        title: Plot title.
        x_label, y_label: Axis labels (put units in them).
        width, height: Size (pixels at 100 dpi), at least 200 x 120.

    Returns:
        A matplotlib Figure with one Axes (shown as SVG in a notebook); both axes start at 0.

    Raises:
        ValueError: If there is no series, one is empty or holds a non-finite value, or the
            size is too small.
        ImportError: Without matplotlib.
    """
    _check_plot_args(series, width, height)
    require_matplotlib("plotting a comparison")
    fig = figure_class("SeriesFigure")(figsize=(width / 100, height / 100), dpi=100,
                                       layout="constrained")  # fmt: skip
    ax = fig.add_subplot()
    for name, values in series.items():
        ax.plot(range(len(values)), [float(y) for y in values], linewidth=1.5, label=name)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    if title:
        ax.set_title(title)
    freeze_layout(fig)  # NOTE: the same SVG bytes at every save
    return fig


def line_plot_svg(
    series: Mapping[str, Sequence[float]],
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 320,
) -> str:
    """``series_figure`` as SVG text (no date, fixed ids: the same bytes on every run).

    Raises:
        ValueError: See ``series_figure``.
        ImportError: Without matplotlib.
    """
    return figure_svg(series_figure(series, title, x_label, y_label, width, height))
