"""The hit-rate-vs-capacity curve of a what-if sweep, drawn with matplotlib.

One line per (cache, block size) over the capacities swept, on a log x axis (tokens), and one
gray horizontal line per block size for the infinite cache (the most any cache can hit).
Caches that agree draw the same line: each copy keeps its own colour and marker, drawn thinner
and smaller on top of the first (hollow markers, so all show), and its legend entry says
"identical to" the line it repeats.
The knee of a line is the capacity past which more cache buys little: the trace's reused
prefixes fit from there on.

matplotlib is optional (``pip install kvlab[viz]``): importing this module does not need it,
``hit_rate_figure`` says so when it is missing. The figure is a plain ``matplotlib.figure.Figure``
(no pyplot state) that shows itself in a notebook as SVG, and ``save_figure`` writes it
atomically.

Examples:
    >>> rows = [{"cache": "vllm", "capacity_tokens": c, "block_size": 16, "hit_rate": h}
    ...         for c, h in ((1000, 0.1), (10000, 0.5))]
    >>> fig = hit_rate_figure(rows)
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['vllm, block size 16']
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from functools import cache
from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["IMAGE_FORMATS", "hit_rate_figure", "save_figure"]

IMAGE_FORMATS = ("svg", "png")
"""File formats ``save_figure`` writes."""

_COLORS = {"vllm": "tab:blue", "nano-vllm": "tab:orange", "nano": "tab:orange",
           "radix": "tab:green"}
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v")


def _row(r: Any) -> dict[str, Any]:
    row = r.to_dict() if hasattr(r, "to_dict") else dict(r)
    missing = [k for k in ("cache", "capacity_tokens", "block_size", "hit_rate") if k not in row]
    if missing:
        raise ValueError(f"a result row needs cache, capacity_tokens, block_size and hit_rate; "
                         f"missing {', '.join(missing)} in {row!r:.80}")  # fmt: skip
    return row


def hit_rate_figure(results: Iterable[Any], title: str | None = None) -> Any:
    """Draw hit rate against capacity (see the module docstring).

    Args:
        results: ReplayResults, or ``kvlab whatif`` JSON rows (dicts with cache,
            capacity_tokens, block_size, hit_rate); infinite-cache rows (cache "infinite")
            become horizontal lines whatever their capacity.
        title: Figure title (None = none).

    Returns:
        A matplotlib Figure (shown as SVG in a notebook) with one Axes: x = capacity
        (tokens, log scale), y = hit rate.

    Raises:
        ValueError: If a row lacks a field, or no row has a finite capacity to draw.
        ImportError: Without matplotlib.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from kvlab.cli_hints import install_hint

        raise ImportError("drawing the hit-rate curve needs matplotlib (the viz extra): "
                          f"{install_hint('viz')}") from None  # fmt: skip
    rows = [_row(r) for r in results]
    lines: dict[tuple[str, int], list[tuple[int, float]]] = {}
    best: dict[int, float] = {}
    for r in rows:
        if r["cache"] == "infinite":
            best[r["block_size"]] = r["hit_rate"]
        else:
            lines.setdefault((r["cache"], r["block_size"]), []).append(
                (r["capacity_tokens"], r["hit_rate"]))  # fmt: skip
    if not lines:
        raise ValueError("no row with a cache other than 'infinite': nothing to draw")
    sizes = sorted({bs for _, bs in lines} | set(best))
    style = {bs: _STYLES[i % len(_STYLES)] for i, bs in enumerate(sizes)}
    fig = _figure_class()(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for line in _line_styles(lines, style):
        ax.plot(line.pop("xs"), line.pop("ys"), **line)
    for bs in sorted(best):
        ax.axhline(best[bs], linestyle=style[bs], color="0.35", linewidth=1,
                   label=f"infinite cache, block size {bs}")  # fmt: skip
    ax.set_xscale("log")
    top = max([y for pts in lines.values() for _, y in pts] + list(best.values()))
    ax.set_ylim(0, min(1.0, max(top * 1.15, 0.01)))  # NOTE: low real hit rates stay readable
    ax.set_xlabel("cache capacity (tokens, log scale)")
    ax.set_ylabel("hit rate (hit tokens / prompt tokens)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    if title:
        ax.set_title(title)
    # NOTE: lay out once, then freeze: a constrained layout re-run at each save moves the
    # clip boxes by float noise, and the SVG's ids (hashes of them) would change.
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    return fig


def _line_styles(lines: dict[tuple[str, int], list[tuple[int, float]]],
                 style: dict[int, str]) -> list[dict[str, Any]]:  # fmt: skip
    """``ax.plot`` arguments per line. Lines with the same points (caches that agree) would
    hide each other: each copy gets its own marker, is drawn thinner and smaller on top of the
    one before (hollow markers, so every colour shows) and says which line it repeats."""
    out: list[dict[str, Any]] = []
    first: dict[tuple, list[int]] = {}
    for i, ((name, bs), points) in enumerate(lines.items()):
        xs, ys = zip(*sorted(points), strict=True)
        key = (xs, tuple(round(y, 9) for y in ys))
        same = first.setdefault(key, [])
        label = f"{name}, block size {bs}"
        if same:
            label += f" (identical to {out[same[0]]['label']})"
        same.append(i)
        out.append({"xs": xs, "ys": ys, "linestyle": style[bs], "label": label, "marker": "o",
                    "color": _COLORS.get(name, "tab:purple")})  # fmt: skip
    for group in first.values():
        if len(group) == 1:
            continue  # NOTE: a line of its own keeps matplotlib's default look
        for rank, i in enumerate(group):  # NOTE: the first copy is the widest, drawn underneath
            left = len(group) - 1 - rank
            out[i].update(marker=_MARKERS[rank % len(_MARKERS)], linewidth=1.5 + 2.0 * left,
                          markersize=6 + 4 * left, zorder=2 + rank, markerfacecolor="none",
                          markeredgewidth=1.5)  # fmt: skip
    return out


@cache
def _figure_class() -> type:
    """A matplotlib Figure that shows itself in a notebook (SVG) without pyplot."""
    from matplotlib.figure import Figure

    class HitRateFigure(Figure):
        """A Figure with ``_repr_svg_``: displayed by Jupyter even when pyplot is never
        imported (no inline backend), with the same bytes on every run."""

        def _repr_svg_(self) -> str:
            buf = io.BytesIO()
            _savefig(self, buf, "svg")
            return buf.getvalue().decode()

    return HitRateFigure


def _savefig(fig: Any, f: Any, fmt: str) -> None:
    from matplotlib import rc_context

    # NOTE: no date, fixed SVG ids: the same sweep writes the same bytes
    meta = {"Date": None} if fmt == "svg" else {"Software": None}
    with rc_context({"svg.hashsalt": "kvlab"}):
        fig.savefig(f, format=fmt, metadata=meta)


def save_figure(fig: Any, path: str | PathLike[str], fmt: str | None = None) -> None:
    """Write ``fig`` to ``path`` atomically (a temporary file, then a rename), with the mode a
    new file gets (0666 minus the umask) or the mode of the file it replaces.

    Args:
        fig: A matplotlib Figure.
        path: The file.
        fmt: "svg" or "png"; None = from the suffix.

    Raises:
        ValueError: If the format is not one of IMAGE_FORMATS.
    """
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".").lower()
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"cannot write {path.name!r} as {fmt!r}; allowed: "
                         f"{', '.join(IMAGE_FORMATS)}")  # fmt: skip
    from kvlab.trace.atomic_file import atomic_write

    with atomic_write(path, "wb") as f:
        _savefig(fig, f, fmt)
