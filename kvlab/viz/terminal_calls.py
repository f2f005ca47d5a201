"""Rich renderers of what calls did: hash chains, the hybrid fixed point, allocate_slots'
token layout, the event list, and ``render_state`` (every view of one event, for the CLI).

Every renderer takes a keyword-only ``lang`` (``"en"``, ``"zh"``; None = the current language of
``kvlab.i18n``), like those of ``kvlab.viz.terminal``.

Examples:
    >>> import rich
    >>> rich.print(render_state(trace, 40))            # doctest: +SKIP
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvlab.i18n import _, language, ngettext, with_language
from kvlab.trace import EventKind
from kvlab.trace import KIND_SCHEMA
from kvlab.viz.calls import (
    block_size_of,
    event_window,
    find_call,
    fixed_point_rows,
    slot_layout,
)
from kvlab.viz.design_header import event_notes, render_cache_header
from kvlab.viz.hash_tree import HashTree, build_hash_tree, cached_blocks_of
from kvlab.viz.palette import HIT, MISS, SEGMENT_COLOURS, SEGMENT_SYMBOLS
from kvlab.trace.untrusted import shown
from kvlab.viz.snapshot import group_label, state_at
from kvlab.viz.terminal import (
    Flow,
    Hanging,
    render_block_table,
    render_free_queue,
    render_pool_grid,
)

__all__ = [
    "focus_requests",
    "render_allocate_slots",
    "render_events",
    "render_fixed_point",
    "render_hash_chain",
    "render_state",
]

K = EventKind


def _hash_chip(tree: HashTree, h: int, cached: dict[int, tuple[int, ...]], num_groups: int) -> Text:
    if not cached:
        return Text(f" {tree.hashes[h]} ✗ ", style=f"bold #ffffff on {MISS}")
    ids = "/".join(str(cached[g][0]) if g in cached else "✗" for g in range(max(num_groups, 1)))
    return Text(f" {tree.hashes[h]} ✓{ids} ", style=f"bold #ffffff on {HIT}")


def _segments(children: dict[int, list[int]], start: int, ends: dict[int, list[str]]) -> list[int]:
    """The unbranched path from ``start``: stops after a node with != 1 child or where a
    request's chain ends (so its name is drawn there)."""
    path = [start]
    while len(children.get(path[-1], ())) == 1 and path[-1] not in ends:
        path.append(children[path[-1]][0])
    return path


@with_language
def render_hash_chain(
    trace: Any, index: int, requests: list[str] | None = None, max_nodes: int = 200
) -> RenderableType:
    """The hash chains of ``requests`` merged into a tree, coloured by the cache at ``index``.

    Each line is an unbranched run of blocks (``[first-last]`` block positions); a fork starts
    indented lines below it, so a shared prefix is drawn once. Green ``✓n`` = cached in block n
    (hybrid: one id per group, ``/``-separated, ``✗`` for a group that misses): a lookup would
    hit; red ``✗`` = cached in no group: it would miss.
    Requests are named where their known chain ends.

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        requests: Request ids to draw (None = every request with a known chain).
        max_nodes: Hashes drawn at most.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        KeyError: If a named request has no known hash chain.
    """
    state = state_at(trace, index)
    tree = build_hash_tree(trace)
    children, ends = tree.children(requests), tree.chain_ends(requests)
    header = [Text(_("hash chains (block_hash, short hex) ·"), style="bold")]
    drawn = {h for kids in children.values() for h in kids}
    if any(cached_blocks_of(state, h) for h in drawn):  # no "hit" key when nothing hits
        header.append(Text(_(" ✓ cached: hit "), style=f"bold #ffffff on {HIT}"))
    header.append(Text(_(" ✗ not cached: miss "), style=f"bold #ffffff on {MISS}"))
    lines: list[RenderableType] = [Flow(header)]
    budget, cut = max_nodes, False
    stack = [(h, 0) for h in reversed(children.get(-1, []))]
    while stack and budget > 0:
        start, level = stack.pop()
        path = _segments(children, start, ends)
        cut = cut or len(path) > budget
        path = path[:budget]
        budget -= len(path)
        lines.append(_chain_line(tree, state, path, level, ends))
        stack.extend((h, level + 1) for h in reversed(children.get(path[-1], [])))
    if stack or cut:
        lines.append(
            Text(_("… more hashes not drawn (max_nodes={max_nodes})").format(max_nodes=max_nodes),
                 style="dim")
        )  # fmt: skip
    if len(lines) == 1:
        lines.append(Text(_("no request hash chain is known from this trace"), style="dim"))
    return Group(*lines)


def _chain_line(
    tree: HashTree, state: Any, path: list[int], level: int, ends: dict[int, list[str]]
) -> Flow:
    """One unbranched run of hashes: indent, block positions, chips, requests ending there."""
    first, last = tree.position[path[0]], tree.position[path[-1]]
    pad = "    " * level
    items = [Text(pad + ("└─ " if level else "NONE_HASH ─ ") + f"[{first}-{last}]", style="dim")]
    chips = [_hash_chip(tree, h, cached_blocks_of(state, h), state.num_groups) for h in path]
    items += [chips[0]] + [Text("→ ") + chip for chip in chips[1:]]
    if path[-1] in ends:
        items.append(Text(f" ⟵ {', '.join(shown(r, 40) for r in ends[path[-1]])}", style="bold"))
    return Flow(items, indent=pad + "      ")


def _hit_blocks_text(block_ids: Any, null_block_id: int | None) -> str:
    """One fixed-point turn's hit blocks, one bracket per group: ``[∅ ∅ 7 8]`` (``∅`` = null).

    Args:
        block_ids: Per group, the hit's block ids (FixedPointRow.block_ids); None gives "".
        null_block_id: The null_block's block_id (None = no null block).
    """
    if block_ids is None:
        return ""
    return " ".join(
        "[" + " ".join("∅" if b == null_block_id else str(b) for b in blocks) + "]"
        for blocks in block_ids
    )


@with_language
def render_fixed_point(trace: Any, index: int) -> RenderableType:
    """The hybrid fixed point of the get_computed_blocks call at (or last before) ``index``.

    Rows are iterations, columns attention groups; a cell is ``in → out`` candidate hit length
    (tokens), red with ``✂`` where that group shortened it, over the blocks each group's hit
    holds after the turn (``[∅ ∅ 7 8]``, ``∅`` = null_block; absent in traces without them).

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    call = find_call(trace, index, "get_computed_blocks")
    if call is None:
        return Text(_("no get_computed_blocks call yet"), style="dim")
    rows = fixed_point_rows(trace, call)
    head = _("get_computed_blocks [{request}] at event #{seq}").format(
        request=shown(call.request), seq=call.begin
    )
    if not rows:
        return Text(_("{head}: one attention type, no fixed point").format(head=head), style="dim")
    columns = list(dict.fromkeys(r.kv_cache_group_ids for r in rows))
    table = Table(
        title=Text(_("hybrid fixed point · {head}").format(head=head)), title_style="bold"
    )
    table.add_column(_("iteration"), justify="right")
    for ids in columns:
        table.add_column(", ".join(group_label(trace.config, g) for g in ids), justify="center")
    for it in sorted({r.iteration for r in rows}):
        cells: list[Any] = [str(it)]
        for ids in columns:
            row = next((r for r in rows if r.iteration == it and r.kv_cache_group_ids == ids), None)
            if row is None:
                cells.append("")
                continue
            text = f"{row.hit_length_in} → {row.hit_length_out}"
            style = f"bold {MISS}" if row.shortened else ""
            text += (" ✂" if row.shortened else "") + (_(" (reused)") if row.reused else "")
            blocks = _hit_blocks_text(row.block_ids, trace.initial_state.null_block_id)
            cells.append(Text(text + ("\n" + blocks if blocks else ""), style=style))
        table.add_row(*cells)
    result = call.result.get("num_new_computed_tokens")
    table.caption = Text(
        _("tokens · result: num_new_computed_tokens = {result}").format(result=result)
    )
    return table


@with_language
def render_allocate_slots(trace: Any, index: int, max_width: int = 72) -> RenderableType:
    """allocate_slots' token layout (comp | new_comp | ext_comp | new | lookahead), to scale.

    Every block gets the same number of characters; the ruler below numbers the blocks.

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index; the allocate_slots call containing it, else the last one before.
        max_width: Characters for the bar at most.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    call = find_call(trace, index, "allocate_slots")
    if call is None:
        return Text(_("no allocate_slots call yet"), style="dim")
    layout = slot_layout(call, block_size_of(trace))
    bs, nb = layout.block_size, max(layout.num_blocks, 1)
    cpb = max(2, min(bs, max_width // nb))  # characters per block
    bar, ruler = Text(), Text(style="dim")
    for c in range(nb * cpb):
        token = (c * bs) // cpb
        seg = next((s for s in layout.segments if s.start <= token < s.end), None)
        bar.append(  # a symbol per segment, so the bar keeps its meaning without colour
            "▏" if c % cpb == 0 else (SEGMENT_SYMBOLS[seg.name] if seg else " "),
            style=f"#ffffff on {SEGMENT_COLOURS[seg.name]}" if seg else "",
        )
    for b in range(nb):
        ruler.append(f"{b:<{cpb}}"[:cpb])
    if layout.allocated is None:
        res = _("unfinished")
    else:
        res = _("{outcome}, num_blocks_to_allocate = {n}").format(
            outcome=_("allocated") if layout.allocated else _("refused (None)"),
            n=layout.num_blocks_to_allocate,
        )
    title = Text(
        _("allocate_slots [{request}] at event #{seq} · {result}").format(
            request=shown(call.request), seq=call.begin, result=res
        ),
        style="bold",
    )
    legend = Flow(
        [
            Text(
                f" {SEGMENT_SYMBOLS[s.name] * 2} {s.name} ",
                style=f"bold #ffffff on {SEGMENT_COLOURS[s.name]}",
            )
            + Text(
                ngettext(" {n} token: {meaning}", " {n} tokens: {meaning}", s.num_tokens).format(
                    n=s.num_tokens, meaning=_(s.meaning)
                )
            )
            for s in layout.segments
        ],
        "   ",
    )
    note = Text(
        _("block_size = {bs} tokens; ruler = logical block index").format(bs=bs), style="dim"
    )
    return Group(title, bar, ruler, legend, note)


_EVENT_HEAD = re.compile(r"^(?:▶ |  )#\d+ (?:step -?\d+|第 -?\d+ 步) +")
"""The marker, event index and step of an event line: its continuation lines hang past it."""


@with_language
def render_events(trace: Any, index: int, before: int = 6, after: int = 6) -> RenderableType:
    """The events around ``index``, nested calls indented, ``index`` highlighted.

    A nano-vllm trace's events carry notes where nano-vllm differs from vLLM V1 (a
    re-activation with its O(n) deque scan, a token-id mismatch, a stale-entry hit).

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        ValueError: If before or after is negative.
    """
    state_at(trace, index)  # NOTE: validates index the same way every view does
    lines = [
        Text(
            _("events {first}..{last} of {total}").format(
                first=f"{max(index - before, 0):,}",
                last=f"{min(index + after, len(trace) - 1):,}",
                total=f"{len(trace):,}",
            ),
            style="bold",
        )
    ]
    if index < 0:
        lines.append(Text(_("▶ (before event 0: the initial state)"), style="reverse bold"))
    window = event_window(trace, index, before, after)
    notes = event_notes(trace, window[0].seq, window[-1].seq) if window else {}
    for e in window:
        text = _event_text(e) + (f"  ⟵ {notes[e.seq]}" if e.seq in notes else "")
        if e.seq == index:
            line = Text("▶ " + text, style="reverse bold")
        elif e.kind in (K.CALL_BEGIN, K.CALL_END, K.STEP):
            line = Text("  " + text, style="bold")
        elif e.kind in (K.LOOKED_UP, K.FIXED_POINT_ITERATED):
            line = Text("  " + text, style="dim")
        else:
            line = Text("  " + text)
        # NOTE: a long event wraps under its kind, two cells in, not back to column 0
        head = _EVENT_HEAD.match(line.plain)
        lines.append(Hanging(line, (head.end() if head else 2) + 2))
    if language() != "en" and window:  # NOTE: the kinds are identifiers; say what each means
        lines.append(Text(_("event kinds: {kinds}").format(kinds=""), style="dim"))
        lines += [Text("  " + _("{kind} = {meaning}").format(kind=k.name,
                                                             meaning=_(KIND_SCHEMA[k].doc)),
                       style="dim") for k in sorted({e.kind for e in window})]
    return Group(*lines)


def _event_text(e: Any) -> str:
    """An event's line (``#12 step 1 CALL_BEGIN ...``) with its step in the current language."""
    text, head = str(e), f"#{e.seq} step {e.step}"
    if not text.startswith(head):
        return text
    return _("#{seq} step {step}").format(seq=e.seq, step=e.step) + text[len(head):]


def focus_requests(trace: Any, index: int, limit: int = 8) -> list[str]:
    """The requests whose hash chains a summary shows: every request with a known chain when
    there are at most ``limit``, else those holding blocks at ``index`` (at most ``limit``).

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
    """
    state = state_at(trace, index)
    chains = build_hash_tree(trace).chains
    if len(chains) <= limit:
        return list(chains)
    holding = sorted({r for g in state.req_to_blocks for r in g})
    names = [state.tables.request_id(r) for r in holding]
    return [r for r in names if r in chains][:limit]


@with_language
def render_state(trace: Any, index: int, requests: list[str] | None = None) -> RenderableType:
    """Every view of event ``index``: header (with the cache design), pool grid, free queue, block table, the current
    allocate_slots layout, the hybrid fixed point (hybrid traces), hash chains and events.

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        requests: Requests for the hash chains (None = ``focus_requests``).

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        KeyError: If a named request has no known hash chain.
    """
    state_at(trace, index)
    what = _event_text(trace[index]) if index >= 0 else _("initial state (before event 0)")
    parts: list[RenderableType] = [
        Group(
            Text(
                _("event {index} of {total} · {what}").format(
                    index=f"{index:,}", total=f"{len(trace):,}", what=what
                ),
                style="bold reverse",
            ),
            render_cache_header(trace, index),
        ),
        render_pool_grid(trace, index),
        render_free_queue(trace, index),
        render_block_table(trace, index),
        render_allocate_slots(trace, index),
    ]
    if int(trace.config.get("num_groups") or 1) > 1:
        parts.append(render_fixed_point(trace, index))
    chosen = focus_requests(trace, index) if requests is None else requests
    parts += [render_hash_chain(trace, index, chosen), render_events(trace, index)]
    return Group(*[p for pair in zip(parts, [Text("")] * len(parts)) for p in pair][:-1])
