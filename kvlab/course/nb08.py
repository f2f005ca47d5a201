"""Notebook 8's exercises (the scheduler: continuous batching, chunked prefill, preemption)."""

from __future__ import annotations

import os

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.course.check import Exercise, register

SYSTEM_PROMPT = list(range(100, 112))


def arrivals(chat_3_first: bool = False) -> dict[int, list[tuple[str, list[int], int]]]:
    """Notebook 8's workload: step -> [(request_id, prompt, max_tokens)].

    ``chat_3_first`` swaps the arrival steps of chat-2 and chat-3 (exercise 08.4).
    """
    chat_2 = ("chat-2", SYSTEM_PROMPT + [6, 7, 8, 9], 6)
    chat_3 = ("chat-3", SYSTEM_PROMPT + [10, 11, 12, 13, 14, 15], 12)
    burst = ("burst", list(range(600, 628)), 8)
    return {
        0: [("chat-1", SYSTEM_PROMPT + [1, 2, 3, 4, 5], 6), ("long", list(range(500, 540)), 4)],
        1: [chat_3 if chat_3_first else chat_2],
        3: [chat_2 if chat_3_first else chat_3, burst],
    }


def run(num_blocks: int = 20, max_num_batched_tokens: int = 16,
        scheduler_reserve_full_isl: bool = True, chat_3_first: bool = False):
    """Run notebook 8's workload with the stand-in model (always token 7); return the step log."""
    from kvlab.core.sched import Scheduler, SchedulerConfig

    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    manager = KVCacheManager(KVCacheConfig(num_blocks, [], [KVCacheGroupSpec(["layers"], spec)]),
                             max_model_len=128, hash_block_size=4, log_stats=True)  # fmt: skip
    scheduler = Scheduler(manager, SchedulerConfig(
        max_num_seqs=4, max_num_batched_tokens=max_num_batched_tokens, max_model_len=128,
        scheduler_reserve_full_isl=scheduler_reserve_full_isl, log_stats=True))  # fmt: skip
    hasher = get_request_block_hasher(4, sha256)
    workload, step = arrivals(chat_3_first), 0
    while scheduler.has_unfinished_requests() or step in workload:
        for request_id, prompt, max_tokens in workload.get(step, []):
            scheduler.add_request(Request(request_id, prompt, SamplingParams(max_tokens=max_tokens),
                                          None, block_hasher=hasher))  # fmt: skip
        output = scheduler.schedule()
        scheduler.update_from_output(output, {r: [7] for r in output.num_scheduled_tokens})
        step += 1
    return scheduler.step_log


def preempted(**params) -> list[str]:
    """Preempted request ids, in order, over the whole run."""
    return [rid for record in run(**params) for rid in record.preempted_req_ids]


def chunked_and_preempted(max_num_batched_tokens: int = 64) -> tuple[list[str], bool]:
    """(requests whose prompt took more than one step, whether any preemption happened)."""
    log = run(max_num_batched_tokens=max_num_batched_tokens)
    steps: dict[str, int] = {}
    for record in log:
        for s in record.scheduled:
            if s.phase == "prefill" and s.kind != "resumed":
                steps[s.request_id] = steps.get(s.request_id, 0) + 1
    chunked = sorted(rid for rid, n in steps.items() if n > 1)
    return chunked, any(record.preempted_req_ids for record in log)


def smallest_pool_without_preemption() -> int:
    """Fewest blocks (null_block included) with which the run preempts nobody (blocks)."""
    num_blocks = 20
    while preempted(num_blocks=num_blocks):
        num_blocks += 1
    return num_blocks


def chat_3_first() -> tuple[list[str], int]:
    """(preempted ids, prefix hit of the first resume) when chat-3 arrives before chat-2."""
    log = run(chat_3_first=True)
    resumed = [s for record in log for s in record.scheduled if s.kind == "resumed"]
    return [rid for r in log for rid in r.preempted_req_ids], resumed[0].num_cached_tokens if resumed else 0


register(Exercise(
    id="08.1",
    question="Raise max_num_batched_tokens to 64: which requests are still prefilled in more "
    "than one step, and does a preemption still happen? Answer (sorted ids, True/False).",
    solve=chunked_and_preempted,
    hint="read record.scheduled in scheduler.step_log: count each request's non-resumed "
    "prefill steps; and look at record.preempted_req_ids.",
    explain="With a 64-token budget every prompt fits one step, and this schedule never runs "
    "the pool dry.",
    mistakes=(((["burst", "chat-1", "long"], True), "that is the run with a 16-token budget."),),
))  # fmt: skip
register(Exercise(
    id="08.2",
    question="What is the smallest pool (num_blocks, null_block included) with which nobody is "
    "preempted?",
    solve=smallest_pool_without_preemption,
    hint="re-run the workload with num_blocks = 21, 22, ... until no record has preempted_req_ids.",
    explain="Preemption is the price of a pool smaller than the peak demand of the batch.",
    mistakes=((30, "30 blocks suffice, but fewer do too."), (20, "20 is the pool that preempts.")),
))  # fmt: skip
def gate_on_and_off(num_blocks: int = 13) -> tuple[list[str], list[str]]:
    """Preempted ids with scheduler_reserve_full_isl on, then off, for a ``num_blocks`` pool."""
    return (preempted(num_blocks=num_blocks),
            preempted(num_blocks=num_blocks, scheduler_reserve_full_isl=False))  # fmt: skip


register(Exercise(
    id="08.3",
    question="With a 13-block pool, which requests are preempted (in order) with "
    "scheduler_reserve_full_isl on, and with it off? Answer (on, off).",
    solve=gate_on_and_off,
    hint="without the gate a request is admitted when its first chunk fits; collect "
    "record.preempted_req_ids over both step logs.",
    explain="The gate admits a request only when its whole prompt fits in the free blocks, "
    "which here spares the preemption of half-prefilled requests that crowd the pool without "
    "it. It checks, it does not reserve: running requests still take free blocks first, so it "
    "does not rule out preemption (notebook 8's 20-block run has the gate on and preempts "
    "chat-3 before its prompt is done).",
    mistakes=((([], []), "the gate matters here: look at the run without it."),
              ((["chat-3"], ["chat-3"]), "that is the 20-block pool.")),
))  # fmt: skip
register(Exercise(
    id="08.4",
    question="Make chat-3 arrive at step 1 and chat-2 at step 3. Who is preempted, and how many "
    "tokens does the first resume hit? Answer (preempted ids, hit).",
    solve=chat_3_first,
    hint="the scheduler preempts the newest running request; the resume looks up the cache again.",
    explain="The newest running request is the victim; its resume hits what is still cached.",
    mistakes=(((["chat-3"], 12), "chat-3 is no longer the newest request."),),
))  # fmt: skip
