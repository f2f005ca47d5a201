"""Predict kinds window, fixed_point, preempt (kvlab.viz.predict_decisions): truths recomputed here.

window: from the request's block list replayed at ``ask`` and vLLM's get_num_skipped_tokens;
fixed_point: the turn's hit_length_out, the last turn of a lookup being its result; preempt: the
scheduler's own step log (``preempted_req_ids``), in order. The JavaScript side is checked with
the other kinds in test_predict.py (tests/viz/js/predict.test.mjs).
"""

from __future__ import annotations

import pytest
from _viz_traces import BLOCK_SIZE, hybrid_trace, seeded_hashes

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    sha256,
)
from kvlab.core.sched import Scheduler, SchedulerConfig
from kvlab.trace import Recorder, Trace
from kvlab.viz import quiz_points
from kvlab.viz.calls import fixed_point_rows

_LOGS: dict[str, list] = {}


def preempting_trace() -> Trace:
    """Notebook 8's kind of run: 3 requests in a 10-block pool; the newest is preempted."""
    with seeded_hashes():
        spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype="float32")
        manager = KVCacheManager(KVCacheConfig(10, [], [KVCacheGroupSpec(["l"], spec)]),
                                 max_model_len=128, hash_block_size=BLOCK_SIZE)  # fmt: skip
        recorder = Recorder().attach(manager)
        sched = Scheduler(manager, SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=32,
                                                   max_model_len=128), recorder=recorder)  # fmt: skip
        for rid, start in (("x", 0), ("y", 100), ("z", 200)):
            sched.add_request(Request(rid, list(range(start, start + 10)), SamplingParams(max_tokens=8),
                                      None, block_hasher=get_request_block_hasher(BLOCK_SIZE, sha256)))
        while sched.has_unfinished_requests():
            out = sched.schedule()
            sched.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})
        recorder.detach()
    _LOGS["preempting"] = sched.step_log
    return recorder.trace()


def _truth(p):
    return p.values[p.answer]


def test_preempt_asks_for_the_newest_running_request_in_the_schedulers_order() -> None:
    trace = preempting_trace()
    points = quiz_points(trace, ["preempt"])
    preempted = [rid for record in _LOGS["preempting"] for rid in record.preempted_req_ids]
    assert preempted and [_truth(p) for p in points] == preempted
    for p in points:
        refused, free = trace.call(p.ask), trace.call(p.reveal)
        assert refused.name == "allocate_slots" and not refused.result["allocated"]
        assert free.name == "free" and free.request == _truth(p) and 2 <= len(p.choices) <= 4
        assert f"the most recently admitted request ({_truth(p)})" in p.explanation
    # finishing requests after a refused admission are not preemptions
    assert len(points) == len(preempted) < len(trace.calls("free"))


def test_window_asks_which_blocks_leave_the_window_none_included() -> None:
    trace = hybrid_trace()  # full attention + sliding window 8; b decodes past the window
    points = quiz_points(trace, ["window"])
    assert points and {tuple(_truth(p)) for p in points} >= {()}  # "none" happens
    window = 8
    for p in points:
        call = trace.call(p.reveal)
        state = trace.state_at(p.ask)
        code = trace.tables.find_request(call.request)
        held = state.req_to_blocks[1][code]
        total = call.args["num_computed_tokens"] + call.args["num_new_computed_tokens"]
        skipped = max(0, total - window + 1)
        expected = [i for i in range(min(skipped // BLOCK_SIZE, len(held))) if held[i] != 0]
        assert _truth(p) == expected, (p.question, held, total)
        assert "get_num_skipped_tokens" in p.explanation


def test_fixed_point_asks_each_turn_and_the_last_turn_is_the_hit() -> None:
    trace = hybrid_trace()
    points = quiz_points(trace, ["fixed_point"])
    calls = [c for c in trace.calls("get_computed_blocks") if fixed_point_rows(trace, c)]
    # a turn offered no candidate (0 tokens in) has one possible answer: not asked
    assert len(points) == sum(r.hit_length_in > 0 for c in calls for r in fixed_point_rows(trace, c))
    for call in calls:
        rows = [r for r in fixed_point_rows(trace, call) if r.hit_length_in > 0]
        mine = [p for p in points if call.begin <= p.reveal <= call.end]
        assert [p.reveal for p in mine] == [r.seq for r in rows]
        assert [_truth(p) for p in mine] == [r.hit_length_out for r in rows]
        if mine:
            assert mine[0].ask == call.begin and _truth(mine[-1]) == call.result["num_new_computed_tokens"]
    shortened = [p for p in points if "can vouch for" in p.explanation]
    assert shortened and all(_truth(p) < max(p.values) for p in shortened)


def test_with_hit_and_fixed_point_a_hybrid_lookup_is_asked_turn_by_turn() -> None:
    trace = hybrid_trace()
    both = quiz_points(trace, ["hit", "fixed_point"])
    assert [p.kind for p in both] == [p.kind for p in quiz_points(trace, ["fixed_point"])]
    everything = quiz_points(trace)
    assert all(a.reveal <= b.ask for a, b in zip(everything, everything[1:]))
    assert {p.kind for p in everything} == {"popleft", "fixed_point", "window"}


@pytest.mark.parametrize("lang", ["zh"])
def test_the_new_questions_speak_chinese(lang: str) -> None:
    from kvlab.i18n import use_language

    trace = preempting_trace()
    with use_language(lang):
        (first, *_rest) = quiz_points(trace, ["preempt"])
        (window, *_more) = quiz_points(hybrid_trace(), ["window"])
    assert "抢占" in first.question and "占位块" in window.question
