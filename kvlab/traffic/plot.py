"""The hit-rate-vs-capacity curve of a what-if sweep, drawn with matplotlib.

One line per (cache, block size) over the capacities swept, on a log x axis (tokens), and one
gray horizontal line per block size for the infinite cache (the most any cache can hit).
Caches that agree draw the same line: each copy keeps its own colour and marker, drawn thinner
and smaller on top of the first (hollow markers, so all show), and its legend entry says
"identical to" the line it repeats.
The knee of a line is the capacity past which more cache buys little: the trace's reused
prefixes fit from there on. Labels are in the current language (``kvlab.i18n``: a Chinese
notebook sets ``KVLAB_LANG=zh``) or in the one ``lang`` names. Chinese labels are drawn with the
font kvlab ships (``kvlab.fonts``: a subset of Noto Sans CJK SC holding every character of
CHART_TEXTS in Chinese), Latin letters and digits with matplotlib's own DejaVu Sans: never a font
of the system, so the figure is the same bytes on every machine. A title is drawn the same way;
Chinese characters of a title that no chart text has are missing from that font (matplotlib
warns and draws a box).

matplotlib is optional (``pip install kvlab[viz]``): importing this module does not need it,
``hit_rate_figure`` says so when it is missing. The figure is a plain ``matplotlib.figure.Figure``
(no pyplot state) that shows itself in a notebook as SVG, and ``save_figure`` writes it
atomically, the same bytes on every run (``kvlab.charts``, shared with kvlab.compare's plots).

Examples:
    >>> rows = [{"cache": "vllm", "capacity_tokens": c, "block_size": 16, "hit_rate": h}
    ...         for c, h in ((1000, 0.1), (10000, 0.5))]
    >>> fig = hit_rate_figure(rows)
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['vllm, block size 16']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvlab.charts import (
    IMAGE_FORMATS,
    figure_class,
    freeze_layout,
    language_rc,
    require_matplotlib,
    save_figure,
)
from kvlab.i18n import N_, _, use_language

__all__ = ["CHART_TEXTS", "IMAGE_FORMATS", "hit_rate_figure", "save_figure"]

CHART_TEXTS = {
    "x_label": N_("cache capacity (tokens, log scale)"),
    "y_label": N_("hit rate (hit tokens / prompt tokens)"),
    "line": N_("{cache}, block size {block_size}"),
    "identical": N_(" (identical to {line})"),
    "infinite": N_("infinite cache, block size {block_size}"),
    "whatif_title": N_("{trace}: {requests} requests, block size {block_sizes}"),
}
"""Every text the curve draws, by role (``whatif_title``: the title ``kvlab whatif`` gives it).
The CJK font kvlab ships holds every character of their translations: after changing one, run
``python -m kvlab.font_subset`` (tests/traffic/test_plot_fonts.py says so)."""

_COLORS = {"vllm": "tab:blue", "nano-vllm": "tab:orange", "nano": "tab:orange",
           "radix": "tab:green"}
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v")


def _text(role: str) -> str:
    # NOTE: not _(CHART_TEXTS["x_label"]): Babel would extract "x_label" as a message
    return _(CHART_TEXTS[role])


def _row(r: Any) -> dict[str, Any]:
    row = r.to_dict() if hasattr(r, "to_dict") else dict(r)
    missing = [k for k in ("cache", "capacity_tokens", "block_size", "hit_rate") if k not in row]
    if missing:
        raise ValueError(f"a result row needs cache, capacity_tokens, block_size and hit_rate; "
                         f"missing {', '.join(missing)} in {row!r:.80}")  # fmt: skip
    return row


def hit_rate_figure(results: Iterable[Any], title: str | None = None, *,
                    lang: str | None = None) -> Any:  # fmt: skip
    """Draw hit rate against capacity (see the module docstring).

    Args:
        results: ReplayResults, or ``kvlab whatif`` JSON rows (dicts with cache,
            capacity_tokens, block_size, hit_rate); infinite-cache rows (cache "infinite")
            become horizontal lines whatever their capacity.
        title: Figure title (None = none).
        lang: Language of the axis labels and the legend, "en" or "zh" (cache names stay
            as they are); None = the current language (``kvlab.i18n.language()``).

    Returns:
        A matplotlib Figure (shown as SVG in a notebook) with one Axes: x = capacity
        (tokens, log scale), y = hit rate.

    Raises:
        ValueError: If a row lacks a field, no row has a finite capacity to draw, or
            ``lang`` is not one of kvlab.i18n.LANGUAGES.
        ImportError: Without matplotlib.
    """
    require_matplotlib("drawing the hit-rate curve")
    with use_language(lang) as lang:
        if lang == "en":  # NOTE: matplotlib's own fonts: the same bytes as ever
            return _figure(results, title)
        from matplotlib import rc_context

        # NOTE: a text keeps the family in force when it is made: no font is looked up later
        with rc_context(language_rc(lang)):
            return _figure(results, title)


def _figure(results: Iterable[Any], title: str | None) -> Any:
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
    sizes = sorted({bs for _name, bs in lines} | set(best))
    style = {bs: _STYLES[i % len(_STYLES)] for i, bs in enumerate(sizes)}
    fig = figure_class("HitRateFigure")(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for line in _line_styles(lines, style):
        ax.plot(line.pop("xs"), line.pop("ys"), **line)
    for bs in sorted(best):
        ax.axhline(best[bs], linestyle=style[bs], color="0.35", linewidth=1,
                   label=_text("infinite").format(
                       block_size=bs))  # fmt: skip
    ax.set_xscale("log")
    top = max([y for pts in lines.values() for _cap, y in pts] + list(best.values()))
    ax.set_ylim(0, min(1.0, max(top * 1.15, 0.01)))  # NOTE: low real hit rates stay readable
    ax.set_xlabel(_text("x_label"))
    ax.set_ylabel(_text("y_label"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    if title:
        ax.set_title(title)
    freeze_layout(fig)  # NOTE: the same SVG bytes at every save
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
        label = _text("line").format(cache=name, block_size=bs)
        if same:
            label += _text("identical").format(line=out[same[0]]["label"])
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


