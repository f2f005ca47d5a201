"""columnarise: batch packing equals CallSpec packing; interning; depth carry; overflow."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.trace import KVState, Recorder
from kvlab.trace.events import CALL_SPECS, VERBATIM, WIDE

ARGS = st.lists(st.integers(0, 5), min_size=8, max_size=8).map(tuple)


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.tuples(ARGS, st.sampled_from([1, 0])), min_size=1, max_size=12))
def test_batch_packing_equals_callspec_packing(calls: list) -> None:
    spec = CALL_SPECS["allocate_slots"]
    rec = Recorder(initial_state=KVState.fresh(4), chunk_size=5)
    for args, ok in calls:
        rec.begin_call("allocate_slots", "r", args)
        rec.end_call("allocate_slots", (ok, args[3]))
    t = rec.trace()
    for k, (args, ok) in enumerate(calls):
        begin, end = 2 * k, 2 * k + 1
        a, b, rest = spec.pack_args(args)
        assert (int(t.cols.a[begin]), int(t.cols.b[begin]), tuple(t.payload(begin))) == (a, b, rest)
        assert t.calls()[k].args == dict(zip(spec.args, args, strict=True))
        assert (int(t.cols.a[end]), int(t.cols.b[end]), t.payload(end)) == (ok, args[3], [])


def test_unexpected_arity_and_unknown_calls_are_verbatim() -> None:
    rec = Recorder(initial_state=KVState.fresh(4))
    rec.begin_call("get_computed_blocks", "r", (9, 2, 5))  # one arg too many
    rec.end_call("get_computed_blocks", (4,))
    rec.begin_call("evict_blocks", None, (3, 1, 2))
    rec.end_call("evict_blocks", ())
    t = rec.trace()
    assert (int(t.cols.a[0]), int(t.cols.b[0]), t.payload(0)) == (VERBATIM, 3, [9, 2, 5])
    assert t.calls()[0].args == {"args": [9, 2, 5]}
    assert t.calls()[1].args == {"block_ids": [3, 1, 2]}


def test_depth_is_carried_across_chunks() -> None:
    rec = Recorder(initial_state=KVState.fresh(4), chunk_size=1)
    rec.begin_call("free", "r", ())
    rec.begin_call("cache_blocks", "r", (4,))
    rec.popleft(1)
    rec.end_call("cache_blocks", ())
    rec.end_call("free", ())
    t = rec.trace()
    assert t.cols.depth.tolist() == [0, 1, 2, 1, 0]
    assert t.cols.request.tolist() == [0, 0, -1, 0, 0]


def test_call_values_beyond_int32_are_stored_wide_and_losslessly() -> None:
    rec = Recorder(initial_state=KVState.fresh(4), chunk_size=1)
    rec.begin_call("cache_blocks", "r", (2**33,))
    rec.end_call("cache_blocks", ())
    rec.begin_call("evict_blocks", None, (3, -(10**30)))
    rec.end_call("evict_blocks", ())
    rec.begin_call("allocate_slots", "r", (0, 0, 0, 10**12, 0, 0, 0, 0))
    rec.end_call("allocate_slots", (0, 250_000_000_000))
    rec.begin_call("allocate_slots", "r", (0, 0, 0, 4, 0, 0, 0, 0))  # same chunk, fits
    t = rec.trace()
    assert int(t.cols.a[0]) == WIDE
    calls = t.calls()
    assert calls[0].args == {"num_computed_tokens": 2**33}
    assert calls[1].args == {"block_ids": [3, -(10**30)]}
    assert calls[2].args["num_new_tokens"] == 10**12
    assert calls[2].result == {"allocated": 0, "num_blocks_to_allocate": 250_000_000_000}
    assert calls[3].args["num_new_tokens"] == 4 and int(t.cols.a[6]) == 0
    assert rec.rejected == []


def test_non_integer_call_values_are_rejected_alone() -> None:
    rec = Recorder(initial_state=KVState.fresh(4), chunk_size=1)
    rec.begin_call("cache_blocks", "r", ("four",))
    rec.popleft(1)
    rec.end_call("cache_blocks", ())
    rec.begin_call("cache_blocks", "r", (8,))
    rec.end_call("cache_blocks", ())
    t = rec.trace()
    assert [c.args for c in t.calls()] == [{}, {"num_computed_tokens": 8}]
    assert len(rec.rejected) == 1 and "allowed: integers" in rec.rejected[0]
    assert t.state_at(len(t) - 1).free_queue_order() == [2, 3]
