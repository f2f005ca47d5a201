"""Rich renderers: the text they draw lists exactly what the replayed state holds."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from kvlab.trace import EventKind, Trace
from kvlab.viz import (
    render_allocate_slots,
    render_block_table,
    render_events,
    render_fixed_point,
    render_free_queue,
    render_hash_chain,
    render_pool_grid,
    render_state,
    to_text,
)

WIDE = 2000  # no wrapping: one line per row
K = EventKind


def _touched(hybrid: Trace) -> int:
    """The hybrid trace's TOUCH of block 3: b's last full-attention hit is counted."""
    i = hybrid.find(K.TOUCH, block_id=3)
    assert i is not None and hybrid.payload(i) == [3]
    return i


def _queue_ids(text: str) -> tuple[list[int], int]:
    """Block ids between HEAD and TAIL, and the hidden count ('… n more …', 0 if none)."""
    row = text[text.index("HEAD") + 4 : text.index("TAIL")]
    hidden = re.search(r"…\s(\d+)\smore\s…", row)
    if hidden:
        row = row.replace(hidden.group(0), "")
    return [int(x) for x in re.findall(r"\d+", row)], int(hidden.group(1)) if hidden else 0


def test_free_queue_row_is_the_replayed_order_at_every_event(shared: Trace) -> None:
    for i in range(-1, len(shared)):
        ids, hidden = _queue_ids(to_text(render_free_queue(shared, i), WIDE))
        assert (ids, hidden) == (shared.state_at(i).free_queue_order(), 0), f"event {i}"


def test_long_free_queue_keeps_head_and_tail(hybrid: Trace) -> None:
    order = hybrid.state_at(-1).free_queue_order()  # 31 blocks
    text = to_text(render_free_queue(hybrid, -1, max_blocks=8), WIDE)
    assert _queue_ids(text) == (order[:6] + order[-2:], 23)
    assert "free_block_queue · 31 blocks" in text and "evicts first" in text


def test_pool_grid_marks_ref_cnt_and_status(shared: Trace) -> None:
    text = to_text(render_pool_grid(shared, 20, legend=False), WIDE)
    assert text.splitlines()[0] == "10 blocks: 1 null, 4 in_use, 5 free"
    cells = re.findall(r"(\d+)([∅•↔⁰¹²³⁴⁵⁶⁷⁸⁹]*)", text.splitlines()[1])
    assert cells == [("0", "∅"), ("1", "²"), ("2", "²"), ("3", "¹"), ("4", "¹")] + [
        (str(b), "") for b in range(5, 10)
    ]


def test_pool_grid_sections_per_group(hybrid: Trace) -> None:
    end = hybrid.calls("allocate_slots", request="b")[0].end
    lines = to_text(render_pool_grid(hybrid, end, legend=False), WIDE).splitlines()
    g0 = lines[lines.index("group 0 · FullAttention") + 1]
    g1 = lines[lines.index("group 1 · SlidingWindow (window 8)") + 1]
    assert [int(x) for x in re.findall(r"\d+", g0.replace("¹", ""))] == [1, 2, 3, 4, 9, 10]
    assert [int(x) for x in re.findall(r"\d+", g1.replace("¹", ""))] == [5, 6, 7, 11, 12]


def test_pool_grid_limits_cells(hybrid: Trace) -> None:
    text = to_text(render_pool_grid(hybrid, -1, by_group=False, max_blocks=10, legend=False), WIDE)
    assert "… blocks 10..31 not drawn" in text
    assert len(re.findall(r"\d+", text.splitlines()[1])) == 10
    with pytest.raises(ValueError):
        render_pool_grid(hybrid, -1, max_blocks=0)


def test_colours_reach_the_terminal(shared: Trace) -> None:
    console = Console(record=True, width=200, color_system="truecolor", file=io.StringIO())
    console.print(render_free_queue(shared, 62))
    ansi = console.export_text(styles=True)
    assert "48;2;245;158;11" in ansi  # evictable blocks: amber #f59e0b background


def test_block_table_rows(hybrid: Trace) -> None:
    first_decode = hybrid.calls("allocate_slots", request="b")[1]
    text = to_text(render_block_table(hybrid, first_decode.end), WIDE)
    rows = [re.findall(r"\d+∅?", line) for line in text.splitlines() if line.startswith("│ b")]
    assert rows == [
        ["0", "1", "2", "3", "9", "10", "13"],
        ["1", "0∅", "0∅", "0∅", "11", "12", "14"],
    ]
    narrow = to_text(render_block_table(hybrid, first_decode.end, max_columns=4), WIDE)
    assert "+2" in narrow
    assert "no request holds blocks" in to_text(render_block_table(hybrid, -1))


def test_hash_chain_lines(shared: Trace) -> None:
    hexes = [shared.tables.hash_bytes(i)[:4].hex() for i in range(shared.tables.num_hashes)]
    lines = to_text(render_hash_chain(shared, 30), WIDE).splitlines()
    assert lines[1] == f"NONE_HASH ─ [0-1]  {hexes[0]} ✓1  →  {hexes[1]} ✓2   ⟵ a, b, d"
    assert lines[2].startswith(f"NONE_HASH ─ [0-6]  {hexes[2]} ✗ ") and lines[2].endswith("⟵ c")
    only_c = to_text(render_hash_chain(shared, len(shared) - 1, ["c"]), WIDE)
    # c's blocks 5 6 7 8 9 3 are cached; its last block (4) was evicted by d's get_new_blocks
    assert shared[shared.filter(K.BLOCK_REMOVED)[-1]]["block_id"] == 4
    assert "a, b, d" not in only_c and only_c.count("✓") == 6 + 1  # + the legend's ✓


def test_hash_chain_marks_groups_of_a_hybrid_hit(hybrid: Trace) -> None:
    text = to_text(render_hash_chain(hybrid, _touched(hybrid)), WIDE)
    h3 = hybrid.tables.hash_bytes(3)[:4].hex()
    assert f"{h3} ✓4/✗" in text  # cached in group 0 (block 4), evicted from group 1
    assert "⟵ a" in text and "⟵ b" in text


def test_fixed_point_table(hybrid: Trace, shared: Trace) -> None:
    text = to_text(render_fixed_point(hybrid, _touched(hybrid)), WIDE)
    lookup = hybrid.calls("get_computed_blocks", request="b")[0]
    assert f"get_computed_blocks [b] at event #{lookup.begin}" in text
    assert "19 → 16 ✂" in text and "16 → 12 ✂" in text
    # Under each in → out: the blocks that group's hit holds (∅ = null_block, block 0).
    lines = text.splitlines()
    turn = next(k for k, line in enumerate(lines) if "19 → 16 ✂" in line)
    assert [c.strip() for c in lines[turn + 1].split("│")[2:4]] == ["[1 2 3 4]", "[∅ 6 7]"]
    assert "num_new_computed_tokens = 12" in text
    d_lookup = shared.calls("get_computed_blocks", request="d")[0]
    assert "no fixed point" in to_text(render_fixed_point(shared, d_lookup.begin + 1))


def test_fixed_point_table_of_an_old_trace_has_no_block_line() -> None:
    from kvlab.trace import KVState, Recorder

    rec = Recorder(initial_state=KVState.fresh(8, num_groups=2))
    rec.begin_call("get_computed_blocks", "r", (16, 4))
    rec.fixed_point(0, [0], 16, 16, False)  # recorded before block lists existed
    rec.fixed_point(0, [1], 16, 8, False)
    rec.end_call("get_computed_blocks", (8,))
    lines = to_text(render_fixed_point(rec.trace(), 1), WIDE).splitlines()
    turn = next(k for k, line in enumerate(lines) if "16 → 8 ✂" in line)
    assert lines[turn + 1].startswith("└")  # no block line under in → out


def test_allocate_slots_anatomy(hybrid: Trace) -> None:
    view = render_allocate_slots(hybrid, _touched(hybrid), max_width=40)
    lines = to_text(view, WIDE).splitlines()
    begin = hybrid.calls("allocate_slots", request="b")[0].begin
    assert lines[0] == (
        f"allocate_slots [b] at event #{begin} · allocated, num_blocks_to_allocate = 9"
    )
    assert lines[1].rstrip() == "▏+++" * 3 + "▏###▏###"  # 5 blocks of 4 characters each
    assert lines[2].split() == ["0", "1", "2", "3", "4"]
    assert " new_comp  12 tokens: prefix-cache hit" in lines[3] and " new  8 tokens:" in lines[3]


def test_events_window_highlights_the_cursor(shared: Trace) -> None:
    touched = shared.find(K.TOUCH, step=4)  # d's hit on block 1
    lines = to_text(render_events(shared, touched, 2, 1), WIDE).splitlines()
    assert lines[0] == f"events {touched - 2}..{touched + 1} of {len(shared)}"
    assert lines[3].startswith(f"▶ #{touched} step 4   TOUCH") and len(lines) == 5
    assert "before event 0" in to_text(render_events(shared, -1))


def test_render_state_has_every_view(hybrid: Trace) -> None:
    i = _touched(hybrid)
    text = to_text(render_state(hybrid, i), 120)
    for part in (
        f"event {i} of {len(hybrid)}",
        "free_block_queue",
        "block table",
        "allocate_slots [b]",
        "hybrid fixed point",
        "hash chains",
        f"events {i - 6}..{i + 6}",
    ):
        assert part in text, part
    assert (
        text.splitlines()[1]
        == "cache design: vLLM V1 (BlockPool + FreeKVCacheBlockQueue, kvlab.core)"
    )
    with pytest.raises(IndexError):
        render_state(hybrid, len(hybrid))


def test_hash_chain_node_budget(shared: Trace) -> None:
    assert "more hashes not drawn" not in to_text(render_hash_chain(shared, 30, max_nodes=9), WIDE)
    cut = to_text(render_hash_chain(shared, 30, max_nodes=8), WIDE)
    assert "more hashes not drawn (max_nodes=8)" in cut and cut.count("→") == 1 + 5


def test_block_table_shows_an_empty_block_list(hybrid: Trace) -> None:
    # b's touches: both of its lists exist (created empty by the defaultdict), none filled yet
    text = to_text(render_block_table(hybrid, _touched(hybrid)), WIDE)
    assert re.search(r"│ b\s+│ 0\s+│ \(empty\) │", text)
    assert re.search(r"│ b\s+│ 1\s+│ \(empty\) │", text)


def test_wrapping_never_splits_a_cell_or_chip(hybrid: Trace) -> None:
    order = hybrid.state_at(-1).free_queue_order()
    narrow = to_text(render_free_queue(hybrid, -1, max_blocks=64), 30)
    assert _queue_ids(narrow) == (order, 0)  # ids are read back whole from wrapped lines
    lines = narrow.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("evicts first"))
    for line in lines[start + 1 : -1]:
        assert line.startswith("    ⇄") and len(line.rstrip()) <= 30, line
    legend = to_text(render_pool_grid(hybrid, -1, legend=True), 40).splitlines()
    assert "  in transit (mid-operation)" in "\n".join(legend)


def test_focus_requests(shared: Trace) -> None:
    from _viz_traces import serving_trace

    from kvlab.viz import focus_requests

    assert focus_requests(shared, 30) == ["a", "b", "c", "d"]
    big = serving_trace(64, 1500, seed=2)
    state = big.state_at(1000)
    holders = {state.tables.request_id(r) for g in state.req_to_blocks for r in g}
    chosen = focus_requests(big, 1000, limit=3)
    assert 0 < len(chosen) <= 3 and set(chosen) <= holders
