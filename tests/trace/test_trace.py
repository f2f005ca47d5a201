"""Trace access: decoded events, calls and the call tree, parents, search and sizes."""

from __future__ import annotations

import numpy as np
import pytest
from _trace_helpers import admit, decode, init_hashing, make_manager, make_request

from kvlab.trace import EventKind, KVState, Recorder

K = EventKind


@pytest.fixture()
def recorded():
    """Two requests sharing a prefix, one decode step, a free; steps 1-3."""
    init_hashing()
    m = make_manager(16)
    rec = Recorder().attach(m)
    a, b = make_request("a", list(range(9))), make_request("b", list(range(8)) + [99, 98])
    rec.mark_step(1)
    assert admit(m, a)
    rec.mark_step(2)
    assert admit(m, b)
    assert decode(m, a, 7)
    rec.mark_step(3)
    m.free(a)
    return rec.trace(), m


def test_events_decode_their_fields(recorded) -> None:
    t, _ = recorded
    first = t[0]
    assert first.kind is K.STEP and first.fields == {"step": 1} and first.seq == 0
    begin = t[1]
    assert begin.kind is K.CALL_BEGIN and begin.request == "a" and begin.depth == 0
    assert begin["name"] == "get_computed_blocks"
    assert begin["num_tokens"] == 9 and begin["num_block_hashes"] == 2
    pop = t[t.find(K.POPLEFT_N)]
    assert (
        pop["block_ids"] == [1, 2, 3] and pop.depth == 1 and pop.parent == t.find(K.CALL_BEGIN, 3)
    )
    stored = t[t.find(K.BLOCK_STORED)]
    assert stored["block_ids"] == [1, 2] and stored["num_full_blocks"] == 2
    assert len(stored["hashes"]) == 2 and all(len(h) == 8 for h in stored["hashes"])
    assert t[-1].kind is K.CALL_END and t[-1].request == "a"
    assert [e.seq for e in t[2:5]] == [2, 3, 4]
    assert "POPLEFT_N block_ids=[1, 2, 3]" in str(pop)
    with pytest.raises(IndexError, match="out of range"):
        t[len(t)]


def test_calls_have_args_results_and_steps(recorded) -> None:
    t, _ = recorded
    calls = t.calls()
    assert [(c.name, c.request, c.step) for c in calls] == [
        ("get_computed_blocks", "a", 1),
        ("allocate_slots", "a", 1),
        ("get_computed_blocks", "b", 2),
        ("allocate_slots", "b", 2),
        ("allocate_slots", "a", 2),
        ("free", "a", 3),
    ]
    hit = calls[2]
    assert hit.result == {"num_new_computed_tokens": 8}
    alloc_b = calls[3]
    assert alloc_b.args["num_new_computed_tokens"] == 8 and alloc_b.args["num_new_tokens"] == 2
    assert alloc_b.result == {"allocated": 1, "num_blocks_to_allocate": 1}
    decode_a = calls[4]
    assert decode_a.args["num_computed_tokens"] == 9 and decode_a.args["num_new_tokens"] == 1
    assert all(c.end > c.begin and c.depth == 0 and c.parent == -1 for c in calls)
    assert t.call(calls[3].begin + 2).begin == calls[3].begin
    assert len(t.calls(name="allocate_slots", request="a")) == 2


def test_call_tree_nests_inner_calls() -> None:
    rec = Recorder(initial_state=KVState.fresh(4))
    rec.begin_call("allocate_slots", "r", (0, 0, 0, 4, 0, 0, 0))
    rec.begin_call("remove_skipped_blocks", "r", (0,))
    rec.end_call("remove_skipped_blocks", ())
    rec.popleft_n([1])
    rec.end_call("allocate_slots", (1, 1))
    t = rec.trace()
    (root,) = t.call_tree()
    assert root.name == "allocate_slots" and (root.begin, root.end) == (0, 4)
    assert [(c.name, c.begin, c.end, c.depth, c.parent) for c in root.children] == [
        ("remove_skipped_blocks", 1, 2, 1, 0)
    ]
    assert [t.parent(i) for i in range(5)] == [-1, 0, 1, 0, 0]
    outside = Recorder(initial_state=KVState.fresh(4))
    outside.popleft(1)
    with pytest.raises(ValueError, match="event 0 is not inside any call"):
        outside.trace().call(0)


def test_unfinished_call_has_no_end() -> None:
    rec = Recorder(initial_state=KVState.fresh(4))
    rec.begin_call("free", "r", ())
    rec.free_blocks([])
    (call,) = rec.trace().calls()
    assert call.end == -1 and call.result == {} and call.num_events == 0


def test_find_and_filter(recorded) -> None:
    t, _ = recorded
    lookups = t.filter(K.LOOKED_UP)
    assert t.cols.kind[lookups].tolist() == [K.LOOKED_UP] * len(lookups)
    assert t.find(K.LOOKED_UP) == lookups[0]
    assert t.find(K.LOOKED_UP, start=int(lookups[-1]) + 1) is None
    assert t.find_prev(K.LOOKED_UP, before=len(t)) == lookups[-1]
    b_events = t.filter(request="b")
    assert {t[i].request for i in b_events} == {"b"} and len(b_events) > 0
    assert set(t.filter(step=3).tolist()) == set(
        range(t.find(K.STEP, 1 + t.find(K.STEP, 1)), len(t))
    )
    # every event that names block 3: allocated to a, requested in its list, freed and appended
    names3 = [t[i].kind.name for i in t.filter(block_id=3)]
    assert names3 == ["POPLEFT_N", "GET_NEW_BLOCKS", "REQ_BLOCKS_ADDED", "FREE_BLOCKS", "APPEND_N"]
    # the stored hashes' indexes are not block ids
    assert "BLOCK_STORED" in [t[i].kind.name for i in t.filter(block_id=1)]
    assert np.array_equal(
        t.filter([K.TOUCH, K.REMOVE]),
        np.sort(np.concatenate([t.filter(K.TOUCH), t.filter(K.REMOVE)])),
    )
    assert len(t.filter(K.REQ_BLOCKS_ADDED, group=0)) == len(t.filter(K.REQ_BLOCKS_ADDED))


def test_sizes_are_reported(recorded) -> None:
    t, _ = recorded
    sizes = t.nbytes()
    assert sizes["total"] == sizes["columns"] + sizes["payload"] + sizes["tables"]
    assert sizes["columns"] >= 20 * len(t)
    assert t.bytes_per_event == sizes["total"] / len(t)
    assert "events" in repr(t)
