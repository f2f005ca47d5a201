"""Bookkeeping of one ``Scheduler.schedule()`` call: its working state and what it reports.

Split out of ``scheduler.py`` (which holds the scheduling decisions). Mirrors the local
variables of vllm/v1/core/sched/scheduler.py::Scheduler.schedule and its
``_make_cached_request_data``; ``make_step_record`` is kvlab's (``Scheduler.step_log``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvlab.core.sched.output import CachedRequestData, SchedulerOutput
from kvlab.core.sched.step_log import ScheduledRequest, StepRecord

if TYPE_CHECKING:
    from kvlab.core.kv_cache_manager import KVCacheBlocks
    from kvlab.core.request import Request
    from kvlab.core.sched.scheduler import Scheduler

__all__ = ["StepState", "make_cached_request_data", "make_step_record"]


@dataclass
class StepState:
    """The working state of one schedule() call (vLLM keeps these as local variables).

    Attributes:
        token_budget: Tokens still unassigned this step (tokens).
        scheduled_new_reqs: Admitted for the first time, in order.
        scheduled_resumed_reqs: Re-admitted after a preemption, in order.
        scheduled_running_reqs: Already running and scheduled again, in order.
        preempted_reqs: Preempted this step, in preemption order.
        req_to_new_blocks: req_id -> blocks added this step (all blocks for admissions).
        num_scheduled_tokens: req_id -> tokens scheduled (tokens), in scheduling order.
        num_cached_tokens: req_id -> prefix-cache hit at admission (tokens).
        computed_before: req_id -> num_computed_tokens before this step's tokens (tokens).
    """

    token_budget: int
    scheduled_new_reqs: list[Request] = field(default_factory=list)
    scheduled_resumed_reqs: list[Request] = field(default_factory=list)
    scheduled_running_reqs: list[Request] = field(default_factory=list)
    preempted_reqs: list[Request] = field(default_factory=list)
    req_to_new_blocks: dict[str, KVCacheBlocks] = field(default_factory=dict)
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    num_cached_tokens: dict[str, int] = field(default_factory=dict)
    computed_before: dict[str, int] = field(default_factory=dict)


def make_cached_request_data(scheduler: Scheduler, state: StepState) -> CachedRequestData:
    """The running and resumed requests of this step as the worker needs them.

    Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._make_cached_request_data (without
    pipeline parallelism, so ``new_token_ids`` stays empty). Called before
    num_computed_tokens advances.
    """
    data = CachedRequestData.make_empty()
    num_running = len(state.scheduled_running_reqs)
    reqs = itertools.chain(state.scheduled_running_reqs, state.scheduled_resumed_reqs)
    for idx, req in enumerate(reqs):
        req_id = req.request_id
        data.req_ids.append(req_id)
        scheduled_in_prev_step = req_id in scheduler.prev_step_scheduled_req_ids
        if idx >= num_running:
            data.resumed_req_ids.add(req_id)
        if not scheduled_in_prev_step:
            data.all_token_ids[req_id] = list(req.all_token_ids)
        data.new_block_ids.append(state.req_to_new_blocks[req_id].get_block_ids(allow_none=True))
        data.num_computed_tokens.append(req.num_computed_tokens)
        data.num_output_tokens.append(req.num_output_tokens)
    return data


def make_step_record(scheduler: Scheduler, state: StepState, output: SchedulerOutput) -> StepRecord:
    """Summarise a finished schedule() call for ``Scheduler.step_log`` (after the advance)."""
    new_ids = {r.request_id for r in state.scheduled_new_reqs}
    resumed_ids = {r.request_id for r in state.scheduled_resumed_reqs}
    scheduled = []
    for req_id, num_tokens in state.num_scheduled_tokens.items():
        request = scheduler.requests[req_id]
        before = state.computed_before[req_id]
        # Decode: computing exactly the one token sampled last step.
        is_decode = request.num_output_tokens > 0 and before == request.num_tokens - 1
        kind = "new" if req_id in new_ids else "resumed" if req_id in resumed_ids else "running"
        block_ids = state.req_to_new_blocks[req_id].get_block_ids()
        scheduled.append(
            ScheduledRequest(
                request_id=req_id,
                num_scheduled_tokens=num_tokens,
                num_computed_tokens=before,
                num_cached_tokens=state.num_cached_tokens.get(req_id, 0),
                kind=kind,
                phase="decode" if is_decode else "prefill",
                new_block_ids=tuple(list(ids) for ids in block_ids),
            )
        )
    return StepRecord(
        step=output.step,
        scheduled=scheduled,
        preempted_req_ids=[r.request_id for r in state.preempted_reqs],
        total_num_scheduled_tokens=output.total_num_scheduled_tokens,
        num_running=len(scheduler.running),
        num_waiting=len(scheduler.waiting),
        num_free_blocks=scheduler.kv_cache_manager.block_pool.get_num_free_blocks(),
    )
