"""A value the trace columns cannot hold never ruins a recording: stored losslessly (WIDE)."""

from __future__ import annotations

import pytest
from _robust_helpers import busy_manager, make_request, snapshot

from kvlab.trace import KVState, Recorder, load_trace


@pytest.mark.parametrize("num_new_tokens", [10**12, 2**31, 2**63, 10**30])
def test_a_refused_huge_allocate_slots_is_recorded_and_later_calls_keep_working(
    num_new_tokens: int, tmp_path
) -> None:
    m, rec, (_, live) = busy_manager()
    before = snapshot(m)
    assert m.allocate_slots(live, num_new_tokens) is None  # refused: nothing changed
    assert snapshot(m) == before
    # later calls are recorded normally, and the trace still replays to the live state
    extra = make_request("extra", list(range(8)) + [7, 7, 7, 7])
    blocks, hit = m.get_computed_blocks(extra)
    assert hit == 8 and m.allocate_slots(extra, extra.num_tokens - hit, hit, blocks) is not None
    m.free(live)
    after = snapshot(m, rec)  # asserts replay == live
    assert after["replay_equals_live"] and rec.rejected == []
    trace = rec.trace()
    refused = trace.calls(name="allocate_slots", request="live")[-1]
    assert refused.args["num_new_tokens"] == num_new_tokens
    assert refused.result["allocated"] == 0
    # the WIDE row survives a save/load round trip
    trace.save(tmp_path / "t.kvtrace")
    loaded = load_trace(tmp_path / "t.kvtrace")
    assert loaded.calls(name="allocate_slots", request="live")[-1].args == refused.args
    assert loaded.final_state() == KVState.from_manager(m)


def test_hook_values_that_are_not_integers_are_rejected_alone() -> None:
    rec = Recorder(initial_state=KVState.fresh(6), chunk_size=2)
    rec.begin_call("cache_blocks", "r", (None,))
    rec.popleft_n([1, 2])
    rec.end_call("cache_blocks", (1.5,))
    rec.begin_call("remove_skipped_blocks", "r", (12,))
    rec.end_call("remove_skipped_blocks", ())
    trace = rec.trace()
    assert [c.name for c in trace.calls()] == ["cache_blocks", "remove_skipped_blocks"]
    assert trace.calls()[1].args == {"total_computed_tokens": 12}
    assert trace.final_state().free_queue_order() == [3, 4, 5]
    assert len(rec.rejected) == 2 and all("allowed: integers" in r for r in rec.rejected)


@pytest.mark.parametrize("step", [-1, 2**31, "3", 1.5, None, True])
def test_a_bad_step_is_refused_before_recording(step) -> None:
    rec = Recorder(initial_state=KVState.fresh(4))
    rec.mark_step(2)
    with pytest.raises(ValueError, match=r"step must be an int in \[0, 2\*\*31\)"):
        rec.mark_step(step)
    assert rec.step == 2 and len(rec) == 1
    rec.mark_step(3)
    assert [e.step for e in rec.trace()] == [2, 3]
