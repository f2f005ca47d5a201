"""Scheduler: budgets, chunked prefill, prefix hits, preemption, stops, frees — exact outcomes.

A fake worker keeps a paged "KV cache" of token ids (written through the scheduler's block ids,
read back to "attend"), and a fake model hashes what it read into the next token. Outputs of a
tiny pool (with preemptions) must equal those of a big pool, token for token.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from _sched_helpers import (
    BLOCK_SIZE,
    FakeWorker,
    GenParams,
    free_ids,
    make_request,
    make_scheduler,
    run_to_completion,
    step,
)

from kvlab.core.request import Request, RequestStatus
from kvlab.core.sched import Scheduler, SchedulerConfig, check_stop


# --------------------------------------------------------------------------- budgets and chunks
def test_token_budget_and_chunked_prefill_exact():
    sched = make_scheduler(num_blocks=32, max_num_batched_tokens=10)
    worker = FakeWorker(BLOCK_SIZE)
    r0, r1, r2 = (
        make_request(f"r{i}", range(100 * (i + 1), 100 * (i + 1) + n))
        for i, n in enumerate((7, 6, 5))
    )
    for r in (r0, r1, r2):
        sched.add_request(r)
    out0 = step(sched, worker)
    assert out0.num_scheduled_tokens == {"r0": 7, "r1": 3}  # r1 chunked by the budget
    assert [(n.req_id, n.block_ids, n.num_computed_tokens) for n in out0.scheduled_new_reqs] == [
        ("r0", ([1, 2],), 0),
        ("r1", ([3],), 0),
    ]
    assert (r0.num_output_tokens, r1.num_output_tokens) == (1, 0)  # no sample for a partial prefill
    out1 = step(sched, worker)
    assert out1.num_scheduled_tokens == {"r0": 1, "r1": 3, "r2": 5}
    cached = out1.scheduled_cached_reqs
    assert (cached.req_ids, cached.new_block_ids, cached.num_computed_tokens) == (
        ["r0", "r1"],
        [None, ([4],)],
        [7, 3],
    )
    assert out1.scheduled_new_reqs[0].block_ids == ([5, 6],)
    out2 = step(sched, worker)
    assert out2.num_scheduled_tokens == {"r0": 1, "r1": 1, "r2": 1}
    assert out2.scheduled_cached_reqs.new_block_ids == [([7],), None, None]  # r0 crosses position 8
    for out in (out0, out1, out2):
        assert out.total_num_scheduled_tokens == sum(out.num_scheduled_tokens.values()) <= 10
    assert [s.phase for s in sched.step_log[1].scheduled] == ["decode", "prefill", "prefill"]


def test_long_prefill_threshold_splits_exactly():
    sched = make_scheduler(long_prefill_token_threshold=4)
    worker = FakeWorker(BLOCK_SIZE)
    req = make_request("a", range(10, 20), max_tokens=3)
    sched.add_request(req)
    out = sched.schedule()
    assert worker.execute(out) == {}  # partial prefill: the worker samples nothing ...
    # ... and a token sampled anyway is discarded (vLLM's model runner drops it).
    assert sched.update_from_output(out, {"a": [7]}).outputs == []
    outputs = [req.num_output_tokens]
    for _ in range(4):
        out = step(sched, worker)
        outputs.append(req.num_output_tokens)
        assert out.num_scheduled_tokens["a"] <= 4
    assert [r.tokens_by_request() for r in sched.step_log] == [
        {"a": 4},
        {"a": 4},
        {"a": 2},
        {"a": 1},
        {"a": 1},
    ]
    assert outputs == [0, 0, 1, 2, 3]
    assert (
        req.status == RequestStatus.FINISHED_LENGTH_CAPPED and not sched.has_unfinished_requests()
    )


def test_chunked_prefill_disabled_waits_for_whole_prompt():
    sched = make_scheduler(max_num_batched_tokens=10, enable_chunked_prefill=False)
    worker = FakeWorker(BLOCK_SIZE)
    for rid, base in (("a", 10), ("b", 30)):
        sched.add_request(make_request(rid, range(base, base + 6)))
    assert step(sched, worker).num_scheduled_tokens == {"a": 6}  # b (6) > leftover 4: stop
    assert step(sched, worker).num_scheduled_tokens == {"a": 1, "b": 6}


def test_max_num_seqs_limits_running():
    sched = make_scheduler(max_num_seqs=2)
    worker = FakeWorker(BLOCK_SIZE)
    for i in range(3):
        sched.add_request(make_request(f"r{i}", range(10 * i, 10 * i + 3), max_tokens=2))
    assert list(step(sched, worker).num_scheduled_tokens) == ["r0", "r1"]
    assert sched.get_request_counts() == (2, 1)
    assert step(sched, worker).num_scheduled_tokens == {"r0": 1, "r1": 1}  # both finish now
    assert step(sched, worker).num_scheduled_tokens == {"r2": 3}


# --------------------------------------------------------------------------- prefix cache
def test_shared_system_prompt_hits_full_blocks():
    sched = make_scheduler(num_blocks=32, log_stats=True)
    worker = FakeWorker(BLOCK_SIZE)
    system = list(range(500, 510))  # 10 tokens: 2 full blocks + 2 tokens
    r0 = make_request("r0", system + [1000, 1001, 1002])
    r1 = make_request("r1", system + [2000, 2001])
    sched.add_request(r0)
    step(sched, worker)
    sched.add_request(r1)
    out = sched.schedule()
    new = out.scheduled_new_reqs[0]
    assert (new.req_id, new.num_computed_tokens, out.num_scheduled_tokens["r1"]) == ("r1", 8, 4)
    assert new.block_ids == ([1, 2, 5],)  # r0 holds [1, 2, 3, 4]: blocks 1, 2 are shared
    assert r1.num_cached_tokens == 8 and r0.num_cached_tokens == 0
    assert [sched.kv_cache_manager.block_pool.blocks[b].ref_cnt for b in (1, 2, 3, 5)] == [
        2,
        2,
        1,
        1,
    ]
    assert sched.step_log[-1].scheduled[-1].num_cached_tokens == 8
    stats = sched.update_from_output(out, worker.execute(out)).scheduler_stats.prefix_cache_stats
    assert (stats.requests, stats.queries, stats.hits) == (1, 12, 8)
    run_to_completion(sched, worker)
    assert r1.num_output_tokens == 4


def test_hit_capped_below_num_tokens_and_free_queue_order():
    sched = make_scheduler(num_blocks=10)
    worker = FakeWorker(BLOCK_SIZE)
    prompt = list(range(40, 52))  # exactly 3 full blocks
    r0 = make_request("r0", prompt, max_tokens=1)
    sched.add_request(r0)
    step(sched, worker)  # prefill + one token: finished, freed tail first
    assert r0.status == RequestStatus.FINISHED_LENGTH_CAPPED
    assert free_ids(sched) == [4, 5, 6, 7, 8, 9, 3, 2, 1]
    r1 = make_request("r1", prompt, max_tokens=1)
    sched.add_request(r1)
    out = sched.schedule()
    # The hit is capped at num_tokens - 1 = 11 tokens -> 2 whole blocks; the last block recomputes.
    assert out.scheduled_new_reqs[0].num_computed_tokens == 8
    assert out.num_scheduled_tokens == {"r1": 4}
    assert out.scheduled_new_reqs[0].block_ids == ([1, 2, 4],)
    assert free_ids(sched) == [5, 6, 7, 8, 9, 3]


def test_finished_requests_free_blocks_in_order():
    sched = make_scheduler(num_blocks=12)
    worker = FakeWorker(BLOCK_SIZE)
    a = make_request("a", range(10, 18), max_tokens=1)
    b = make_request("b", range(30, 38), max_tokens=1)
    c = make_request("c", range(50, 60), max_tokens=3)
    for r in (a, b, c):
        sched.add_request(r)
    res = sched.update_from_output(out := sched.schedule(), worker.execute(out))
    assert res.finished_requests == {"a", "b"}
    assert [(o.request_id, o.finish_reason) for o in res.outputs] == [
        ("a", "length"),
        ("b", "length"),
        ("c", None),
    ]
    # a = [1, 2], b = [3, 4], c = [5, 6, 7]; each request frees its tail first, in step order.
    assert free_ids(sched) == [8, 9, 10, 11, 2, 1, 4, 3]
    assert sched.step_log[0].finished_req_ids == ["a", "b"]
    assert sched.schedule().finished_req_ids == {"a", "b"}


# --------------------------------------------------------------------------- preemption
def test_preemption_takes_newest_running_request():
    sched = make_scheduler(num_blocks=7)  # 6 usable blocks
    worker = FakeWorker(BLOCK_SIZE)
    reqs = [make_request(f"r{i}", range(20 * i, 20 * i + 8), max_tokens=2) for i in range(3)]
    for r in reqs:
        sched.add_request(r)
    step(sched, worker)  # r0 [1, 2], r1 [3, 4], r2 [5, 6]: pool empty
    assert free_ids(sched) == []
    out = step(sched, worker)
    assert sched.step_log[1].preempted_req_ids == ["r2"] and out.preempted_req_ids == {"r2"}
    # r2's blocks went back tail first ([6, 5]); r0 then r1 took them for position 8.
    assert out.scheduled_cached_reqs.new_block_ids == [([6],), ([5],)]
    assert out.num_scheduled_tokens == {"r0": 1, "r1": 1}
    assert (reqs[2].status, reqs[2].num_computed_tokens, reqs[2].num_preemptions) == (
        RequestStatus.PREEMPTED,
        0,
        1,
    )
    assert sched.waiting[0] is reqs[2]
    out = step(sched, worker)  # r0, r1 finished last step: r2 resumes
    cached = out.scheduled_cached_reqs
    assert (cached.req_ids, cached.resumed_req_ids, out.scheduled_new_reqs) == (["r2"], {"r2"}, [])
    assert cached.all_token_ids["r2"] == list(reqs[2].all_token_ids)[:9]
    # r0 and r1 took (and re-hashed) both of r2's blocks: no hit, all 9 tokens recompute.
    assert (out.num_scheduled_tokens, cached.num_computed_tokens) == ({"r2": 9}, [0])


def test_self_preemption_and_recompute_with_prefix_hit():
    sched = make_scheduler(num_blocks=7)
    worker = FakeWorker(BLOCK_SIZE)
    r0 = make_request("r0", range(100, 108), max_tokens=8)
    r1 = make_request("r1", range(200, 211), max_tokens=4)
    sched.add_request(r0)
    sched.add_request(r1)
    run_to_completion(sched, worker)
    log = sched.step_log
    assert [r.tokens_by_request() for r in log] == (
        [{"r0": 8, "r1": 11}, {"r0": 1, "r1": 1}] + [{"r0": 1}] * 6 + [{"r1": 5}, {"r1": 1}]
    )
    assert [r.preempted_req_ids for r in log][:3] == [[], [], ["r1"]]  # r1 preempted itself
    resumed = log[8].scheduled[0]
    # r0 reused block 5; r1's first two blocks survived in the free queue: an 8-token hit.
    assert (resumed.kind, resumed.num_cached_tokens, resumed.new_block_ids) == (
        "resumed",
        8,
        ([3, 4, 5, 6],),
    )
    assert (r1.num_preemptions, r1.num_cached_tokens, r0.num_preemptions) == (1, 0, 0)
    big = make_scheduler(num_blocks=64)
    b0, b1 = (
        make_request("r0", range(100, 108), max_tokens=8),
        make_request("r1", range(200, 211), max_tokens=4),
    )
    big.add_request(b0)
    big.add_request(b1)
    run_to_completion(big, FakeWorker(BLOCK_SIZE))
    assert (list(r0.output_token_ids), list(r1.output_token_ids)) == (
        list(b0.output_token_ids),
        list(b1.output_token_ids),
    )


def _random_workload(seed: int) -> list[tuple[str, list[int], int]]:
    rng = random.Random(seed)
    system = [rng.randrange(1000, 2000) for _ in range(rng.randrange(4, 13))]
    work = []
    for i in range(6):
        prompt = (system if rng.random() < 0.6 else []) + [
            rng.randrange(3000, 4000) for _ in range(rng.randrange(1, 12))
        ]
        work.append((f"q{i}", prompt, rng.randrange(1, 9)))
    return work


def _run_workload(work, num_blocks, check_invariants=False, **cfg):
    sched = make_scheduler(num_blocks=num_blocks, **cfg)
    worker = FakeWorker(BLOCK_SIZE)
    reqs = [make_request(rid, prompt, max_tokens=m) for rid, prompt, m in work]
    pending = list(reqs)
    steps = 0
    while pending or sched.has_unfinished_requests():
        if pending:  # one arrival per step
            sched.add_request(pending.pop(0))
        running_before = [r.request_id for r in sched.running]
        out = step(sched, worker)
        steps += 1
        assert steps < 500
        if check_invariants:
            rec = sched.step_log[-1]
            assert rec.total_num_scheduled_tokens <= sched.scheduler_config.max_num_batched_tokens
            assert len(sched.running) <= sched.scheduler_config.max_num_seqs
            # Preemption order: the newest running requests, newest first.
            assert rec.preempted_req_ids == running_before[::-1][: len(rec.preempted_req_ids)]
            assert not (set(rec.preempted_req_ids) & set(out.num_scheduled_tokens))
    return reqs


@pytest.mark.parametrize("seed", range(4))
def test_tiny_pool_outputs_equal_big_pool(seed):
    work = _random_workload(seed)
    cfg = {"max_num_batched_tokens": 16, "max_num_seqs": 4}
    tiny = _run_workload(work, num_blocks=9, check_invariants=True, **cfg)
    big = _run_workload(work, num_blocks=200, **cfg)
    assert sum(r.num_preemptions for r in tiny) > 0  # the tiny pool really preempts
    assert [list(r.output_token_ids) for r in tiny] == [list(r.output_token_ids) for r in big]
    assert all(r.num_output_tokens == m for r, (_, _, m) in zip(tiny, work))


# --------------------------------------------------------------------------- stops and aborts
def _truncate_at(tokens: list[int], stop_ids: set[int], min_tokens: int = 0) -> list[int]:
    """Reference stop rule: end at the first stop token once min_tokens are out."""
    for i, t in enumerate(tokens):
        if i + 1 >= min_tokens and t in stop_ids:
            return tokens[: i + 1]
    return tokens


def test_stop_conditions_against_reference():
    sched = make_scheduler()
    worker = FakeWorker(BLOCK_SIZE)
    prompt = list(range(60, 66))
    ref = make_request("ref", prompt, max_tokens=10)
    sched.add_request(ref)
    run_to_completion(sched, worker)
    tokens = list(ref.output_token_ids)
    assert len(tokens) == 10 and ref.status == RequestStatus.FINISHED_LENGTH_CAPPED
    t0, t1 = tokens[0], tokens[1]
    eos = make_request("eos", prompt, max_tokens=10, eos_token_id=t1)
    stop = make_request("stop", prompt, max_tokens=10, stop_token_ids=[t0])
    late = make_request("late", prompt, max_tokens=10, eos_token_id=t0, min_tokens=2)
    short = make_request("short", prompt, max_tokens=3)
    for r in (eos, stop, late, short):
        sched.add_request(r)
    run_to_completion(sched, worker)
    assert list(eos.output_token_ids) == _truncate_at(tokens, {t1})
    assert eos.status == RequestStatus.FINISHED_STOPPED and eos.stop_reason is None
    assert (list(stop.output_token_ids), stop.stop_reason) == ([t0], t0)
    assert list(late.output_token_ids) == _truncate_at(tokens, {t0}, min_tokens=2)
    assert len(late.output_token_ids) >= 2
    assert (list(short.output_token_ids), short.status) == (
        tokens[:3],
        RequestStatus.FINISHED_LENGTH_CAPPED,
    )


def test_multi_token_output_is_trimmed_at_stop():
    sched = make_scheduler()
    req = make_request("x", [5, 6, 7], max_tokens=10, eos_token_id=9)
    sched.add_request(req)
    out = sched.schedule()
    res = sched.update_from_output(out, {"x": [4, 9, 8]})
    assert [(o.new_token_ids, o.finish_reason) for o in res.outputs] == [([4, 9], "stop")]
    assert list(req.output_token_ids) == [4, 9] and res.finished_requests == {"x"}
    capped = make_request("y", [1] * 7, max_tokens=10)
    capped.append_output_token_ids(3)
    assert (
        check_stop(capped, max_model_len=8)
        and capped.status == RequestStatus.FINISHED_LENGTH_CAPPED
    )
    assert free_ids(sched)[-1] == 1  # x's only block went back


def test_finish_requests_aborts_running_and_waiting():
    sched = make_scheduler(num_blocks=12, max_num_seqs=1)
    worker = FakeWorker(BLOCK_SIZE)
    a = make_request("a", range(10, 17))
    b = make_request("b", range(30, 33))
    sched.add_request(a)
    sched.add_request(b)
    step(sched, worker)  # a runs with [1, 2]; b waits (one seat)
    assert sched.finish_requests(["b", "a", "b", "zz"]) == ["b", "a"]
    assert (a.status, b.status) == (RequestStatus.FINISHED_ABORTED, RequestStatus.FINISHED_ABORTED)
    assert free_ids(sched) == [3, 4, 5, 6, 7, 8, 9, 10, 11, 2, 1]
    assert sched.get_request_counts() == (0, 0)
    assert sched.schedule().finished_req_ids == {"a", "b"}
    with pytest.raises(ValueError, match="FINISHED_"):
        sched.finish_requests("a", RequestStatus.RUNNING)


# --------------------------------------------------------------------------- errors, recorder
def test_bad_input_is_rejected_without_changes():
    sched = make_scheduler()
    worker = FakeWorker(BLOCK_SIZE)
    sched.add_request(make_request("a", range(5)))
    with pytest.raises(ValueError, match="already in the scheduler"):
        sched.add_request(make_request("a", range(5)))
    with pytest.raises(ValueError, match="block hashes"):
        sched.add_request(Request("nohash", list(range(8)), GenParams(max_tokens=2), None))
    with pytest.raises(ValueError, match="prompt tokens"):
        sched.add_request(make_request("long", range(129)))
    with pytest.raises(TypeError, match="Request"):
        sched.add_request("a")
    out = sched.schedule()
    with pytest.raises(RuntimeError, match="update_from_output was not called"):
        sched.schedule()
    with pytest.raises(ValueError, match="not scheduled"):
        sched.update_from_output(out, {"zz": [1]})
    with pytest.raises(ValueError, match="ints >= 0"):
        sched.update_from_output(out, {"a": [-1]})
    assert sched.requests["a"].num_output_tokens == 0
    sched.update_from_output(out, worker.execute(out))
    with pytest.raises(ValueError, match="latest schedule"):
        sched.update_from_output(out, {})
    with pytest.raises(ValueError, match="max_model_len"):
        Scheduler(sched.kv_cache_manager, SchedulerConfig(max_model_len=64))
    with pytest.raises(ValueError, match="long_prefill_token_threshold"):
        SchedulerConfig(long_prefill_token_threshold=-1)
    with pytest.raises(TypeError, match="mark_step"):
        make_scheduler(recorder=object())


@dataclass
class _Recorder:
    calls: list = field(default_factory=list)

    def mark_step(self, step_index):
        self.calls.append(("mark_step", step_index))

    def begin_call(self, name, request_id, args):
        self.calls.append(("begin_call", name, request_id))

    def __getattr__(self, name):  # every other KVRecorder hook: ignored
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


def test_recorder_marks_steps_before_manager_calls():
    rec = _Recorder()
    sched = make_scheduler(recorder=rec)
    worker = FakeWorker(BLOCK_SIZE)
    sched.add_request(make_request("a", range(6), max_tokens=2))
    run_to_completion(sched, worker)
    assert rec.calls == [
        ("mark_step", 0),
        ("begin_call", "new_step_starts", None),
        ("begin_call", "get_computed_blocks", "a"),
        ("begin_call", "allocate_slots", "a"),
        ("mark_step", 1),
        ("begin_call", "new_step_starts", None),
        ("begin_call", "allocate_slots", "a"),
        ("begin_call", "free", "a"),
    ]
    assert sched.step_log[0].describe() == "step 0: a new prefill 6 tok"
    assert sched.step_log[1].describe() == "step 1: a decode 1 tok | finished a"


# --------------------------------------------------------------------------- reset, stats, queries
def test_reset_prefix_cache_preempts_running_in_admission_order():
    sched = make_scheduler(num_blocks=16)
    worker = FakeWorker(BLOCK_SIZE)
    a, b = make_request("a", range(10, 19)), make_request("b", range(30, 35))
    sched.add_request(a)
    sched.add_request(b)
    step(sched, worker)
    assert sched.reset_prefix_cache() is False  # a and b hold blocks
    assert sched.reset_prefix_cache(reset_running_requests=True) is True
    assert ([r.request_id for r in sched.waiting], sched.running) == (["a", "b"], [])
    assert (a.status, a.num_computed_tokens, a.num_preemptions) == (RequestStatus.PREEMPTED, 0, 1)
    assert sched.prev_step_scheduled_req_ids == set()
    assert free_ids(sched) == [6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 5, 4, 3, 2, 1]  # b first: [5, 4]
    out = sched.schedule()
    cached = out.scheduled_cached_reqs
    # Nothing is cached any more: both recompute everything (prompt + the sampled token).
    assert (cached.req_ids, cached.resumed_req_ids, cached.num_computed_tokens) == (
        ["a", "b"], {"a", "b"}, [0, 0]
    )
    assert out.num_scheduled_tokens == {"a": 10, "b": 6}
    assert cached.all_token_ids["a"] == list(a.all_token_ids)


def test_first_output_carries_the_prefill_stats():
    sched = make_scheduler(num_blocks=32, log_stats=True)
    worker = FakeWorker(BLOCK_SIZE)
    system = list(range(500, 510))
    sched.add_request(make_request("r0", system + [1, 2], max_tokens=2))
    sched.update_from_output(out := sched.schedule(), worker.execute(out))
    sched.add_request(make_request("r1", system + [3]))
    res = sched.update_from_output(out := sched.schedule(), worker.execute(out))
    stats = {o.request_id: o.prefill_stats for o in res.outputs}
    assert stats["r0"] is None  # its second output
    r1 = stats["r1"]
    assert (r1.num_prompt_tokens, r1.num_computed_tokens, r1.num_cached_tokens) == (11, 3, 8)
    assert sched.requests["r1"].prefill_stats is None  # taken once


def test_has_requests_until_the_worker_is_told():
    sched = make_scheduler()
    worker = FakeWorker(BLOCK_SIZE)
    assert not sched.has_requests()
    sched.add_request(make_request("a", range(6), max_tokens=1))
    assert (sched.has_requests(), sched.has_unfinished_requests()) == (True, True)
    step(sched, worker)  # a finishes
    assert (sched.has_unfinished_requests(), sched.has_finished_requests()) == (False, True)
    assert sched.has_requests() and sched.get_num_unfinished_requests() == 0
    assert sched.schedule().finished_req_ids == {"a"}  # the worker is told; nothing is left
    assert (sched.has_finished_requests(), sched.has_requests()) == (False, False)
