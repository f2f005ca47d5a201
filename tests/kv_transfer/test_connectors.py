"""kvlab.kv_transfer: the P/D asynchronous load and CPU offloading, step by step, exact block ids."""

from __future__ import annotations

import os

import pytest

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    SlidingWindowSpec,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.core.sched import Scheduler, SchedulerConfig
from kvlab.kv_transfer import (
    ConnectorScheduler,
    CPUOffloadingConnector,
    KVConnector,
    RemotePrefillConnector,
    RequestStatus,
)
from kvlab.trace import Recorder

SPEC = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")


@pytest.fixture(autouse=True)
def _seeded() -> None:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)


def _manager(num_blocks: int) -> KVCacheManager:
    config = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec(["layers"], SPEC)])
    return KVCacheManager(config, max_model_len=128, hash_block_size=4)


def _request(request_id: str, prompt: list[int], max_tokens: int = 3) -> Request:
    return Request(request_id, prompt, SamplingParams(max_tokens=max_tokens), None,
                   block_hasher=get_request_block_hasher(4, sha256))  # fmt: skip


def _run(scheduler: Scheduler, watch: str | None = None) -> list[tuple]:
    """Run to the end; per step: (scheduled tokens, watch's status and num_computed_tokens)."""
    seen = []
    while scheduler.has_unfinished_requests():
        out = scheduler.schedule()
        req = scheduler.requests.get(watch) if watch else None
        seen.append((dict(out.num_scheduled_tokens),
                     (req.status.name, req.num_computed_tokens) if req else None))  # fmt: skip
        scheduler.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})
    return seen


def test_a_remote_prefill_waits_for_its_load_then_computes_one_token() -> None:
    manager = _manager(16)
    recorder = Recorder().attach(manager)
    config = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=16, max_model_len=128)
    scheduler = ConnectorScheduler(manager, config, RemotePrefillConnector(remote_prefilled={"c"}, load_steps=2),
                                   recorder=recorder)  # fmt: skip
    scheduler.add_request(_request("a", list(range(20))))
    scheduler.add_request(_request("c", list(range(100, 112))))
    seen = _run(scheduler, "c")
    assert seen[:4] == [
        ({"a": 16}, ("WAITING", 0)),
        ({"a": 4}, ("WAITING_FOR_REMOTE_KVS", 12)),      # blocks allocated, nothing computed
        ({"a": 1}, ("WAITING_FOR_REMOTE_KVS", 12)),      # the load takes 2 steps
        ({"a": 1, "c": 1}, ("RUNNING", 12)),             # cached, then the last token recomputed
    ]
    trace = recorder.trace()
    load, last = trace.calls("allocate_slots", request="c")[:2]
    assert (load.step, load.args["num_new_tokens"], load.args["num_external_computed_tokens"],
            load.args["delay_cache_blocks"], load.result["allocated"]) == (1, 0, 12, 1, 1)  # fmt: skip
    assert (last.step, last.args["num_computed_tokens"], last.args["num_new_tokens"]) == (3, 11, 1)
    stored = [e for e in trace if e.kind.name == "BLOCK_STORED" and e.request == "c"]
    assert [(e.step, e.fields["block_ids"]) for e in stored] == [(3, [6, 7, 8])]   # at cache_blocks
    assert scheduler.transfer_log == [
        (1, "load 12 tokens of c into blocks [6, 7, 8]"),
        (1, "c: WAITING_FOR_REMOTE_KVS (local hit 0, loading 12 tokens)"),
        (3, "c: KV arrived, cache_blocks(c, 12), num_computed_tokens = 11"),
    ]
    assert [r.describe() for r in scheduler.step_log][3] == "step 3: a decode 1 tok, c new prefill 1 tok (hit 11) | finished a"


def _preempting_pair(num_blocks: int, connector: KVConnector | None):
    manager = _manager(num_blocks)
    config = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=64, max_model_len=128)
    scheduler = ConnectorScheduler(manager, config, connector) if connector else Scheduler(manager, config)
    for name, start in (("A", 100), ("B", 200)):
        scheduler.add_request(_request(name, list(range(start, start + 20)), max_tokens=10))
    _run(scheduler)
    return scheduler


def test_offloading_turns_a_recompute_into_a_load_on_resume() -> None:
    plain = _preempting_pair(13, None)
    resumed = [s for r in plain.step_log for s in r.scheduled if s.kind == "resumed"]
    assert [(s.num_cached_tokens, s.num_scheduled_tokens) for s in resumed] == [(16, 9)]  # recomputes 9
    cpu = CPUOffloadingConnector(block_size=4, num_cpu_blocks=64)
    offloaded = _preempting_pair(13, cpu)
    log = [r.describe() for r in offloaded.step_log]
    assert log[5] == "step 5: A decode 1 tok | preempted B" and log[10] == "step 10: nothing scheduled"
    assert log[11] == "step 11: B resumed decode 1 tok (hit 24)"        # 16 local + 8 from CPU
    assert (10, "load 8 tokens of B into blocks [10, 12]") in offloaded.transfer_log
    assert (11, "B: KV arrived, cache_blocks(B, 24), num_computed_tokens = 24") in offloaded.transfer_log
    assert cpu.loads == {} and cpu.next_stored_block_idx == {}


def test_a_connector_that_never_loads_schedules_exactly_like_core() -> None:
    """ConnectorScheduler.schedule repeats core's running loop and output: with nothing to
    load, every step (scheduled tokens, preemptions, block ids, free blocks) is core's."""
    runs = []
    for connector in (None, RemotePrefillConnector(remote_prefilled=set())):
        manager = _manager(11)
        config = SchedulerConfig(max_model_len=128, max_num_batched_tokens=16, max_num_seqs=4)
        scheduler = ConnectorScheduler(manager, config, connector) if connector else Scheduler(manager, config)
        for i, length in enumerate((13, 9, 17, 6)):
            scheduler.add_request(_request(f"r{i}", [i % 2] * 4 + list(range(50 * i, 50 * i + length)), 6))
        steps = []
        while scheduler.has_unfinished_requests():
            out = scheduler.schedule()
            steps.append((dict(out.num_scheduled_tokens), sorted(out.preempted_req_ids),
                          {r: manager.get_block_ids(r)[0] for r in out.num_scheduled_tokens},
                          manager.block_pool.get_num_free_blocks()))  # fmt: skip
            scheduler.update_from_output(out, {r: [7] for r in out.num_scheduled_tokens})
        runs.append((steps, [r.describe() for r in scheduler.step_log]))
    assert any(pre for _, pre, _, _ in runs[0][0])  # the workload preempts
    assert runs[1] == runs[0]


def test_the_cpu_store_is_an_lru_of_block_hashes() -> None:
    cpu = CPUOffloadingConnector(block_size=4, num_cpu_blocks=2)
    req = _request("r", list(range(14)))                  # 3 full blocks
    req.num_computed_tokens = 14

    class Output:
        num_scheduled_tokens = {"r": 14}
        preempted_req_ids: set = set()

    cpu.build_connector_meta(Output(), {"r": req})
    assert list(cpu.stored) == req.block_hashes[1:3]       # block 0 dropped: 2 fit
    assert cpu.log == ["store 3 block(s) of r to CPU (blocks 0-2)"]
    probe = _request("p", list(range(14)))
    assert cpu.get_num_new_matched_tokens(probe, 0) == (0, False)   # block 0 is gone: no run
    assert cpu.get_num_new_matched_tokens(probe, 4) == (8, True)    # after a 4-token local hit
    assert cpu.get_num_new_matched_tokens(probe, 12) == (0, False)  # less than a block left


def test_bad_input_is_refused_with_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="load_steps must be an int >= 1"):
        RemotePrefillConnector(load_steps=0)
    with pytest.raises(ValueError, match="num_cpu_blocks must be a positive int"):
        CPUOffloadingConnector(num_cpu_blocks=0)
    config = SchedulerConfig(max_model_len=128)
    with pytest.raises(TypeError, match="connector must be a kvlab.kv_transfer connector, got dict"):
        ConnectorScheduler(_manager(8), config, {})
    window = SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32", sliding_window=8)
    two = KVCacheConfig(8, [], [KVCacheGroupSpec(["a"], SPEC), KVCacheGroupSpec(["b"], window)])
    with pytest.raises(ValueError, match="one KV cache group, got 2"):
        ConnectorScheduler(KVCacheManager(two, max_model_len=128, hash_block_size=4), config, KVConnector())
    assert RequestStatus.WAITING_FOR_REMOTE_KVS.name == "WAITING_FOR_REMOTE_KVS"
