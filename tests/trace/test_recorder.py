"""Recorder: hooks become exact rows; interning, steps, nesting, chunking, attach/detach."""

from __future__ import annotations

import numpy as np
import pytest
from _trace_helpers import admit, init_hashing, make_manager, make_request

from kvlab.core.kv_cache_utils import make_block_hash_with_group_id
from kvlab.core.recorder import KVRecorder
from kvlab.trace import EventKind, KVState, Recorder
from kvlab.trace.events import CALL_SPECS

K = EventKind
H1, H2 = b"\x01" * 32, b"\x02" * 32


def _stream(rec: Recorder) -> None:
    rec.begin_call("allocate_slots", "r0", (0, 0, 0, 8, 0, 0, 0, 0))
    rec.req_blocks_add("r0", 0, [])
    rec.popleft_n([1, 2])
    rec.get_new_blocks([1, 2])
    rec.req_blocks_add("r0", 0, [1, 2])
    rec.cache_full_blocks(
        "r0",
        0,
        0,
        2,
        [1, 2],
        [make_block_hash_with_group_id(H1, 0), make_block_hash_with_group_id(H2, 0)],
    )
    rec.end_call("allocate_slots", (1, 2))
    rec.mark_step(1)
    rec.begin_call("get_computed_blocks", "r1", (9, 2))
    rec.lookup(H1, 0, 1)
    rec.lookup(H2, 0, -1)
    rec.end_call("get_computed_blocks", (4,))
    rec.begin_call("free", "r0", ())
    rec.req_free("r0", 0)
    rec.free_blocks([2, 1])
    rec.append_n([2, 1])
    rec.end_call("free", ())


def test_recorder_satisfies_the_protocol() -> None:
    assert isinstance(Recorder(initial_state=KVState.fresh(4)), KVRecorder)


def test_hooks_become_exact_rows() -> None:
    rec = Recorder(initial_state=KVState.fresh(8))
    _stream(rec)
    t = rec.trace()
    c = t.cols
    assert [K(k).name for k in c.kind] == [
        "CALL_BEGIN",
        "REQ_BLOCKS_ADDED",
        "POPLEFT_N",
        "GET_NEW_BLOCKS",
        "REQ_BLOCKS_ADDED",
        "BLOCK_STORED",
        "CALL_END",
        "STEP",
        "CALL_BEGIN",
        "LOOKED_UP",
        "LOOKED_UP",
        "CALL_END",
        "CALL_BEGIN",
        "REQ_FREED",
        "FREE_BLOCKS",
        "APPEND_N",
        "CALL_END",
    ]
    assert c.depth.tolist() == [0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0]
    assert t.payload(2) == [1, 2]
    # BLOCK_STORED: block ids then hash indexes; H1 -> 0, H2 -> 1 (interned once)
    assert t.payload(5) == [1, 2, 0, 1]
    assert (c.a[5], c.b[5]) == (0, 2)
    assert (c.a[9], c.b[9], c.a[10], c.b[10]) == (0, 1, 1, -1)
    assert t.tables.requests == ["r0", "r1"]
    assert c.request.tolist()[:3] == [0, 0, -1]
    # CALL_END carries its call's request and the packed result
    assert c.request[6] == 0 and c.request[11] == 1
    assert (c.group[0], c.a[0], c.b[0]) == (CALL_SPECS["allocate_slots"].call_id, 0, 8)
    assert (c.a[6], c.b[6]) == (1, 2)


def test_steps_from_mark_step_and_attribute() -> None:
    rec = Recorder(initial_state=KVState.fresh(8))
    rec.popleft(1)
    rec.mark_step(3)
    rec.append(1)
    rec.step = 5  # a scheduler may set the attribute without a STEP event
    rec.popleft(1)
    rec.step = 5
    rec.append(1)
    t = rec.trace()
    assert t.steps().tolist() == [0, 3, 3, 5, 5]
    assert [t.step_of(i) for i in range(5)] == [0, 3, 3, 5, 5]
    assert t[1].kind is K.STEP and t[1]["step"] == 3


def test_chunked_columnarisation_gives_the_same_trace() -> None:
    big, small = (
        Recorder(initial_state=KVState.fresh(8)),
        Recorder(initial_state=KVState.fresh(8), chunk_size=2),
    )
    for rec in (big, small):
        _stream(rec)
        _stream(rec)
    assert big._store.n == 0 and small._store.n == len(small)  # columnarised along the way
    a, b = big.trace(), small.trace()
    for name, arr in a.cols.arrays().items():
        np.testing.assert_array_equal(arr, b.cols.arrays()[name], err_msg=name)


def test_trace_is_a_view_and_later_events_do_not_change_it() -> None:
    rec = Recorder(initial_state=KVState.fresh(8))
    rec.popleft_n([1, 2])
    first = rec.trace()
    rec.get_new_blocks([1, 2])
    second = rec.trace()
    assert (len(first), len(second)) == (1, 2)
    assert first.payload(0) == [1, 2]
    assert not first.cols.kind.flags.writeable


def test_values_that_do_not_fit_are_reported_by_trace_not_by_the_hook() -> None:
    rec = Recorder(initial_state=KVState.fresh(8), chunk_size=1)
    rec.popleft(2**40)  # hooks never raise into core
    rec.begin_call("free", "r", ())  # triggers a columnarisation, which fails
    with pytest.raises(OverflowError, match="does not fit int32"):
        rec.trace()


def test_unknown_call_names_are_interned_and_stored_verbatim() -> None:
    rec = Recorder(initial_state=KVState.fresh(4))
    rec.begin_call("my_call", None, (5, 6, 7))
    rec.end_call("my_call", ())
    t = rec.trace()
    call = t.calls()[0]
    assert call.name == "my_call" and call.args == {"args": [5, 6, 7]}
    assert t.call_names.index("my_call") == len(CALL_SPECS)


def test_attach_snapshots_a_running_manager_and_detach_stops() -> None:
    init_hashing()
    m = make_manager(16)
    first = make_request("a", list(range(10)))
    assert admit(m, first)
    rec = Recorder().attach(m)
    assert rec.initial_state == KVState.from_manager(m)
    assert rec.config["num_gpu_blocks"] == 16 and rec.config["groups"][0]["block_size"] == 4
    second = make_request("b", list(range(10)))
    assert admit(m, second)
    rec.detach()
    assert m.recorder is None
    m.free(first)
    t = rec.trace()
    assert t.calls()[-1].name == "allocate_slots"  # the free after detach is not recorded
    assert t.final_state() != KVState.from_manager(m)
    with pytest.raises(RuntimeError, match="fresh Recorder"):
        rec.attach(m)
    other = Recorder().attach(m)
    with pytest.raises(RuntimeError, match="already has a recorder"):
        Recorder().attach(m)
    other.detach()


def test_attach_rejects_objects_without_set_recorder() -> None:
    with pytest.raises(TypeError, match="set_recorder"):
        Recorder().attach(object())


def test_trace_without_initial_state_is_an_error() -> None:
    rec = Recorder()
    rec.popleft(1)
    with pytest.raises(RuntimeError, match="initial state"):
        rec.trace()


def test_fixed_point_turns_carry_each_groups_hit_blocks() -> None:
    from kvlab.figures import hybrid_trace

    # full + window 8 + window 12, block_size 4; r1's blocks: full 1-4, window 8 5-8,
    # window 12 9-12 (0 is the null block); the window-8 copy of block 2 (id 7) was evicted.
    trace, end = hybrid_trace()
    call = trace.call(trace.parent(end))
    rows = [trace[i].fields for i in trace.filter(EventKind.FIXED_POINT_ITERATED, start=call.begin)]
    assert [(f["iteration"], f["kv_cache_group_ids"], f["block_ids"]) for f in rows] == [
        (0, [0], [[1, 2, 3, 4]]),  # 16 tokens of full attention
        (0, [1], [[6, 7]]),  # window 8 settles at 8: the two blocks before the evicted one
        (0, [2], [[11, 12]]),  # window 12 accepts 8 tokens
        (1, [0], [[1, 2]]),  # full attention's earlier hit, truncated (reused)
        (1, [1], [[6, 7]]),
        (1, [2], [[11, 12]]),
    ]
    assert [f["reused"] for f in rows] == [False, False, False, True, False, False]
    # The last iteration's lists are what r2 was handed: the blocks its allocate_slots adds.
    alloc = trace.calls("allocate_slots", request="r2")[0]
    added = [trace[i] for i in trace.filter(EventKind.REQ_BLOCKS_ADDED, start=alloc.begin)
             if i < alloc.end]  # fmt: skip
    held: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for e in added:
        held[e.group] += e["block_ids"]
    assert [held[g][:2] for g in range(3)] == [f["block_ids"][0] for f in rows[3:]]
