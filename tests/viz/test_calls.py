"""allocate_slots layout, the hybrid fixed point rows, find_call and the event window."""

from __future__ import annotations

import pytest

from kvlab.trace import EventKind, Trace, explain
from kvlab.viz import event_window, find_call, fixed_point_rows, slot_layout
from kvlab.viz.calls import block_size_of


def test_find_call_prefers_the_enclosing_call(shared: Trace) -> None:
    c_alloc = shared.calls("allocate_slots", request="c")[0]
    inside = c_alloc.begin + 2  # c's POPLEFT_N
    assert shared.cols.kind[inside] == EventKind.POPLEFT_N
    assert find_call(shared, inside, "allocate_slots").begin == c_alloc.begin
    assert find_call(shared, inside).begin == c_alloc.begin
    step_4 = int(shared.filter(EventKind.STEP)[-1])
    assert step_4 == c_alloc.end + 1  # the STEP right after c's allocate_slots
    assert find_call(shared, step_4, "allocate_slots").begin == c_alloc.begin  # last one before
    d_lookup = shared.calls("get_computed_blocks", request="d")[0]
    assert find_call(shared, d_lookup.end, "get_computed_blocks").begin == d_lookup.begin
    assert find_call(shared, 0, "allocate_slots") is None and find_call(shared, -1) is None
    with pytest.raises(IndexError):
        find_call(shared, len(shared))


def test_slot_layout_of_a_prefix_hit(hybrid: Trace) -> None:
    layout = slot_layout(find_call(hybrid, 45, "allocate_slots"), block_size_of(hybrid))
    spans = [(s.name, s.start, s.num_tokens) for s in layout.segments]
    assert spans == [
        ("comp", 0, 0),
        ("new_comp", 0, 12),
        ("ext_comp", 12, 0),
        ("new", 12, 8),
        ("lookahead", 20, 0),
    ]
    assert (layout.num_tokens, layout.num_blocks, layout.block_size) == (20, 5, 4)
    assert (layout.allocated, layout.num_blocks_to_allocate) == (True, 9)


def test_slot_layout_of_a_decode_step(hybrid: Trace) -> None:
    first_decode = hybrid.calls("allocate_slots", request="b")[1]
    assert first_decode.args["num_new_tokens"] == 1
    layout = slot_layout(find_call(hybrid, first_decode.begin + 1, "allocate_slots"), 4)
    assert [s.num_tokens for s in layout.segments] == [20, 0, 0, 1, 0]
    assert layout.num_blocks == 6 and layout.num_blocks_to_allocate == 2


def test_slot_layout_rejects_other_calls(shared: Trace) -> None:
    with pytest.raises(ValueError, match="needs an allocate_slots call"):
        slot_layout(find_call(shared, 2), 4)
    with pytest.raises(ValueError, match="block_size must be >= 1"):
        slot_layout(find_call(shared, 5), 0)


def test_fixed_point_rows_agree_with_explain(hybrid: Trace) -> None:
    call = find_call(hybrid, 35, "get_computed_blocks")
    rows = fixed_point_rows(hybrid, call)
    assert [
        (r.iteration, r.kv_cache_group_ids, r.hit_length_in, r.hit_length_out, r.block_ids)
        for r in rows
    ] == [
        (0, (0,), 19, 16, ((1, 2, 3, 4),)),
        (0, (1,), 16, 12, ((0, 6, 7),)),  # window 8 at 12 tokens: block 0 is the null block
    ]
    turns = explain(hybrid, call).shortened_by
    assert [(t.kv_cache_group_ids, t.hit_length_out) for t in turns] == [
        (list(r.kv_cache_group_ids), r.hit_length_out) for r in rows if r.shortened
    ]


def test_fixed_point_rows_empty_for_one_group(shared: Trace) -> None:
    d_lookup = shared.calls("get_computed_blocks", request="d")[0]
    assert fixed_point_rows(shared, find_call(shared, d_lookup.begin + 1)) == []


def test_event_window_is_clipped(shared: Trace) -> None:
    assert [e.seq for e in event_window(shared, 1, 3, 2)] == [0, 1, 2, 3]
    last = len(shared) - 1
    assert [e.seq for e in event_window(shared, last, 1, 5)] == [last - 1, last]
    with pytest.raises(ValueError, match="must be >= 0"):
        event_window(shared, 5, -1, 2)
