"""Cursor moves: into / over / out / back / back_over / next_kind / prev_kind."""

from __future__ import annotations

import pytest

from kvlab.trace import EventKind, KVState, Recorder, Trace
from kvlab.viz import Navigator

K = EventKind


def test_moves_on_the_shared_prefix_trace(shared: Trace) -> None:
    # events: 0 STEP, 1-3 get_computed_blocks(a), 4-10 allocate_slots(a), 11-14 gcb(b), ...
    gcb, alloc = shared.calls(request="a")[:2]
    assert (gcb.name, gcb.begin, gcb.end) == ("get_computed_blocks", 1, 3)
    assert (alloc.name, alloc.begin, alloc.end) == ("allocate_slots", 4, 10)
    last = len(shared) - 1
    nav = Navigator(shared)
    assert [nav.into(i) for i in (-1, 0, last - 1, last)] == [0, 1, last, last]
    assert [nav.over(i) for i in (-1, 0, 3, 5, last)] == [0, 3, 10, 6, last]
    assert [nav.out(i) for i in (5, 8)] == [10, 10]
    # outside every call (next is a STEP marker or opens a top-level call): stay put
    assert [nav.out(i) for i in (-1, 0, 10)] == [-1, 0, 10]
    assert [nav.back(i) for i in (-1, 0, 10)] == [-1, -1, 9]
    assert [nav.back_over(i) for i in (10, 9, 3, -1)] == [3, 8, 0, -1]


def test_jump_by_kind(shared: Trace) -> None:
    nav = Navigator(shared)
    first, second = shared.filter(K.BLOCK_REMOVED).tolist()  # c evicts 2, d evicts 4
    assert (shared[first]["block_id"], shared[second]["block_id"]) == (2, 4)
    assert nav.next_kind(-1, K.BLOCK_REMOVED) == first
    assert nav.next_kind(first, "BLOCK_REMOVED") == second
    assert nav.next_kind(second, int(K.BLOCK_REMOVED)) == second  # none after: stay
    assert nav.prev_kind(second, K.BLOCK_REMOVED) == first
    assert nav.prev_kind(first, K.BLOCK_REMOVED) == first
    last_step = shared.filter(K.STEP).tolist()[-1]
    assert shared[last_step]["step"] == 4
    assert nav.next_kind(-1, K.STEP) == 0 and nav.prev_kind(len(shared) - 1, K.STEP) == last_step


def test_over_and_back_over_are_inverse_around_calls(shared: Trace, hybrid: Trace) -> None:
    for trace in (shared, hybrid):
        nav = Navigator(trace)
        for i in range(-1, len(trace) - 1):
            j = nav.over(i)
            if trace.cols.kind[i + 1] == K.CALL_BEGIN:
                assert trace.cols.kind[j] == K.CALL_END and trace.parent(j) == i + 1
                assert nav.back_over(j) == i
            else:
                assert j == i + 1


def _nested() -> Trace:
    rec = Recorder(initial_state=KVState.fresh(6))
    rec.begin_call("allocate_slots", "r", (0, 0, 0, 4, 0, 0, 0))  # 0
    rec.begin_call("remove_skipped_blocks", "r", (0,))  # 1
    rec.req_blocks_add("r", 0, [])  # 2: req_to_blocks["r"] created
    rec.end_call("remove_skipped_blocks", ())  # 3
    rec.popleft_n([1])  # 4
    rec.get_new_blocks([1])  # 5
    rec.end_call("allocate_slots", (1, 1))  # 6
    rec.begin_call("free", "r", ())  # 7: never ends
    rec.free_blocks([1])  # 8
    return rec.trace()


def test_nested_and_unfinished_calls() -> None:
    nav = Navigator(_nested())
    assert nav.over(-1) == 6  # the whole allocate_slots
    assert nav.over(0) == 3  # the nested call only
    assert nav.out(1) == 3 and nav.out(3) == 6  # out of the nested call, then the outer one
    assert nav.back_over(6) == -1 and nav.back_over(3) == 0
    assert nav.over(6) == 7 and nav.out(7) == 8  # an unfinished call: step into it
    assert nav.out(6) == 6  # between calls: nothing to step out of


def test_bad_input_is_refused(shared: Trace) -> None:
    nav = Navigator(shared)
    with pytest.raises(ValueError, match="unknown move 'sideways'"):
        nav.move("sideways", 0)
    with pytest.raises(IndexError, match=rf"outside \[-1, {len(shared)}\)"):
        nav.into(len(shared))
    with pytest.raises(ValueError, match="unknown event kind 'NOPE'"):
        nav.next_kind(0, "NOPE")
    assert nav.move("over", 0) == 3
