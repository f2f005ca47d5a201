"""A continuous-batching scheduler over the KVCacheManager: who runs each step, with which blocks.

Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler, statement for statement in the methods a
learner reads (``schedule``, ``_preempt_request``, ``_update_after_schedule``,
``_make_cached_request_data``, ``update_from_output``, ``_update_request_with_output``,
``add_request``, ``finish_requests``, ``_free_request``, ``_free_blocks``, ...), first-come-
first-served and synchronous. There is no prefill or decode phase: each step gives every
request tokens so that its ``num_computed_tokens`` catches up with its ``num_tokens`` (a
prompt, a chunk of one, or the one token sampled last step)::

    schedule():
      1. running requests, in order, while budget remains:
           n = min(num_tokens - num_computed_tokens, threshold, budget,
                   max_model_len - 1 - num_computed_tokens)
           allocate_slots(req, n); on None preempt running[-1] (the newest) and retry,
           or stop when req itself was preempted
      2. only if nobody was preempted: waiting requests, FIFO, while budget and seats remain:
           hit = get_computed_blocks(req)   # capped at num_tokens - 1
           n = min(num_tokens - hit, threshold, budget)   # chunked prefill when cut
           allocate_slots(req, n, hit, hit_blocks, full_sequence_must_fit); on None stop
      3. num_computed_tokens += n for everyone scheduled (_update_after_schedule)
    update_from_output(): append sampled tokens, check stops, free finished requests

Left out (vLLM features outside the KV cache's story; each has a NOTE where vLLM has it):
priority policy, async scheduling (output placeholders), speculative decoding (draft tokens;
``num_lookahead_tokens`` stays 0), KV and EC connectors, encoder / multimodal budgets and the
encoder cache, LoRA limits, structured output, pipeline parallelism, streaming sessions,
pooling requests, pause states, Mamba block-aligned splitting and KV-cache zeroing, routed
experts, request timestamps (EngineCoreEvents), perf and spec-decoding stats, multiple
front-end clients.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kvlab.core.kv_cache_interface import KVCacheConfig
from kvlab.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from kvlab.core.request import Request, RequestStatus
from kvlab.core.sched.config import SchedulerConfig
from kvlab.core.sched.output import (
    CachedRequestData,
    EngineCoreOutput,
    EngineCoreOutputs,
    NewRequestData,
    SchedulerOutput,
    SchedulerStats,
    StepRecord,
)
from kvlab.core.sched.request_queue import SchedulingPolicy, create_request_queue
from kvlab.core.sched.utils import (
    SchedulerGuard,
    check_stop,
    get_finished_reason,
    guard_scheduler_init,
    remove_all,
)

__all__ = ["Scheduler"]


class Scheduler:
    """First-come-first-served continuous batching with chunked prefill and preemption.

    Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler. What kvlab leaves out is listed in
    the module docstring, with a NOTE at each place vLLM has it. Where kvlab differs on
    purpose (a NOTE says so there too):

    - Synchronous only: ``schedule`` then ``update_from_output`` with that output, then the
      next ``schedule``; the guard refuses anything else.
    - Bad input at a public entry point raises a clear error before anything changes (one
      guard call on the first line; vLLM asserts or trusts its front end).
    - ``update_from_output`` takes the sampled token ids as a dict and returns one
      EngineCoreOutputs (one client); ``finish_requests`` handles ids in the given order.
    - A recorder (``kvlab.trace``) sees each step start (``mark_step``, one recorder line
      before ``new_step_starts``), and ``step_log`` keeps one StepRecord per step for the
      views: built after vLLM's body (``_end_step``, one line at the end of ``schedule``),
      its finished ids added in ``_free_request`` where vLLM fills its per-client sets.

    Examples:
        sched = Scheduler(kv_cache_config, SchedulerConfig(max_num_batched_tokens=16))
        sched.add_request(req)                   # built with block_hasher=... of block size 4
        out = sched.schedule()                   # req: 10 prompt tokens, blocks ([1, 2, 3],)
        sched.update_from_output(out, {req.request_id: [7]})

    Args:
        kv_cache: A KVCacheConfig (a KVCacheManager is built from it and ``config``) or a
            ready KVCacheManager (its max_model_len must equal ``config.max_model_len``).
        config: Budgets and switches.
        recorder: None, or a recorder with ``mark_step(step)`` plus the KVRecorder hooks; it
            is attached to the KVCacheManager (``set_recorder``), and ``mark_step`` is called
            at the start of every step, before the manager's ``new_step_starts``.
        hash_block_size: Block size of the requests' block hashes (tokens); default: the
            GCD of the groups' block sizes. Only used when building the manager.
        enable_kv_cache_events: Queue vLLM KV events (returned by ``update_from_output``).

    Attributes:
        waiting: The waiting queue (an FCFSRequestQueue; ``waiting[0]`` is admitted next).
        running: Running requests in admission order (``running[-1]`` is preempted first).
        requests: request_id -> Request, for every request not finished yet.
        step_log: One StepRecord per ``schedule()`` (kvlab).
        num_steps: ``schedule()`` calls so far (kvlab; the next step's index).

    Raises:
        TypeError: ``kv_cache`` has the wrong type, or ``recorder`` lacks ``mark_step``.
        ValueError: The manager and the config disagree on max_model_len.
    """

    def __init__(
        self,
        kv_cache: KVCacheConfig | KVCacheManager,
        config: SchedulerConfig,
        recorder: Any = None,
        *,
        hash_block_size: int | None = None,
        enable_kv_cache_events: bool = False,
    ) -> None:
        guard_scheduler_init(kv_cache, config, recorder)
        self.scheduler_config = config
        # NOTE: kvlab also takes a ready KVCacheManager; then the config comes from it.
        self.kv_cache_config = (
            kv_cache.kv_cache_config if isinstance(kv_cache, KVCacheManager) else kv_cache
        )
        self.log_stats = config.log_stats
        self.prev_step_scheduled_req_ids: set[str] = set()

        # Scheduling constraints.
        self.max_num_running_reqs = config.max_num_seqs
        self.max_num_scheduled_tokens = config.max_num_scheduled_tokens
        self.max_model_len = config.max_model_len
        self.enable_kv_cache_events = enable_kv_cache_events
        # NOTE: kvlab has no KV connector, no EC connector, no event publisher (the KV events are
        # returned by update_from_output).

        # req_id -> Request
        self.requests: dict[str, Request] = {}
        # Scheduling policy
        self.policy = SchedulingPolicy(config.policy)
        # The waiting queue (first come, first served).
        self.waiting = create_request_queue(self.policy)
        # NOTE: kvlab has no skipped_waiting queue: it holds requests blocked on a grammar, remote KV
        # or streaming input, or over the LoRA limit, all left out.
        self.running: list[Request] = []

        # Requests finished between the previous step and this one: the next SchedulerOutput
        # tells the worker, so it can drop their state; a new set each step.
        self.finished_req_ids: set[str] = set()

        # NOTE: kvlab has no encoder cache. No speculative decoding: no draft tokens, no lookahead.
        self.num_spec_tokens = self.num_lookahead_tokens = 0

        # Create the KV cache manager.
        if isinstance(kv_cache, KVCacheManager):
            self.kv_cache_manager = kv_cache
        else:
            if hash_block_size is None:
                # NOTE: vLLM's engine passes it; one group: its block size.
                hash_block_size = math.gcd(
                    *(g.kv_cache_spec.block_size for g in kv_cache.kv_cache_groups)
                )
            self.kv_cache_manager = KVCacheManager(
                kv_cache_config=kv_cache,
                max_model_len=self.max_model_len,
                max_num_batched_tokens=config.max_num_batched_tokens,
                enable_caching=config.enable_prefix_caching,
                log_stats=self.log_stats,
                enable_kv_cache_events=self.enable_kv_cache_events,
                hash_block_size=hash_block_size,
            )
        self.scheduler_reserve_full_isl = config.scheduler_reserve_full_isl
        # NOTE: kvlab has no Mamba cache modes (block-aligned split, KV-cache zeroing), no perf
        # metrics, no routed experts, no pause states.

        # kvlab: the guard of the public entry points, the recorder and the step log.
        self.guard = SchedulerGuard(self)
        self.recorder = recorder
        if recorder is not None:
            self.kv_cache_manager.set_recorder(recorder)
        self.step_log: list[StepRecord] = []
        self.num_steps = 0

    # ------------------------------------------------------------------ one step
    def schedule(self) -> SchedulerOutput:
        """Plan one step: running requests first, then admissions; allocate their slots.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.schedule.

        Returns:
            The step's SchedulerOutput (its ``step`` is ``num_steps`` before the call); the
            requests' ``num_computed_tokens`` already include the scheduled tokens (as in
            vLLM).

        Raises:
            RuntimeError: The previous output was not given to ``update_from_output`` yet.
        """
        self.guard.schedule()
        # NOTE: vLLM's scheduler has no "prefill phase" and no "decode phase". A request
        # only has num_computed_tokens and num_tokens_with_spec (prompt + outputs + draft
        # tokens); each step hands out tokens so that the first catches up with the second.
        # Chunked prefill, prefix caching and speculative decoding all fit this one rule.

        scheduled_new_reqs: list[Request] = []
        scheduled_resumed_reqs: list[Request] = []
        scheduled_running_reqs: list[Request] = []
        preempted_reqs: list[Request] = []

        req_to_new_blocks: dict[str, KVCacheBlocks] = {}
        num_scheduled_tokens: dict[str, int] = {}
        token_budget = self.max_num_scheduled_tokens
        # NOTE: kvlab has no pause states, no encoder budget, no draft tokens to schedule, no
        # timestamps (request events) to log.

        if self.recorder is not None:
            self.recorder.mark_step(self.num_steps)
        self.kv_cache_manager.new_step_starts()

        # First, schedule the RUNNING requests.
        req_index = 0
        while req_index < len(self.running) and token_budget > 0:
            request = self.running[req_index]
            # NOTE: vLLM first skips a request whose in-flight async step already reached
            # max_tokens; kvlab is synchronous (no output placeholders).

            num_new_tokens = request.num_tokens_with_spec - request.num_computed_tokens
            if 0 < self.scheduler_config.long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = self.scheduler_config.long_prefill_token_threshold
            num_new_tokens = min(num_new_tokens, token_budget)

            # Never compute a position at or past max_model_len.
            num_new_tokens = min(
                num_new_tokens, self.max_model_len - 1 - request.num_computed_tokens
            )
            # NOTE: kvlab has no encoder inputs to schedule; no Mamba block-aligned split.

            if num_new_tokens == 0:
                # Nothing to compute for this request now (no new token was given to it,
                # or it sits at max_model_len - 1): `continue`, not `break`, lets the later
                # requests run (not strictly FCFS).
                req_index += 1
                continue

            # Schedule newly needed KV blocks for the request.
            while True:
                new_blocks = self.kv_cache_manager.allocate_slots(
                    request,
                    num_new_tokens,
                    num_lookahead_tokens=self.num_lookahead_tokens,
                )

                if new_blocks is not None:
                    # The request can be scheduled.
                    break

                # The request cannot be scheduled: preempt the lowest-priority request.
                # NOTE: FCFS only (vLLM's priority branch picks the max (priority, arrival)):
                # the newest admission, running[-1]. It sits at or after req_index, so it
                # was not scheduled earlier in this step.
                preempted_req = self.running.pop()

                self._preempt_request(preempted_req)
                preempted_reqs.append(preempted_req)
                if preempted_req == request:
                    # The request preempted itself: nothing left to preempt.
                    break

            if new_blocks is None:
                # Cannot schedule this request.
                break

            # Schedule the request.
            scheduled_running_reqs.append(request)
            request_id = request.request_id
            req_to_new_blocks[request_id] = new_blocks
            num_scheduled_tokens[request_id] = num_new_tokens
            token_budget -= num_new_tokens
            req_index += 1
            # NOTE: kvlab has no draft tokens to schedule (speculative decoding), no encoder cache to
            # allocate.

        # NOTE: kvlab has no LoRA limit to record.

        # Next, schedule the WAITING requests.
        if not preempted_reqs:
            # NOTE: one queue: no requests skipped for a grammar, remote KV, streaming input
            # or the LoRA limit.
            while self.waiting and token_budget > 0:
                if len(self.running) == self.max_num_running_reqs:
                    break

                request = self.waiting.peek_request()
                request_id = request.request_id

                # Get already-cached tokens.
                # NOTE: a waiting request has num_computed_tokens == 0 in kvlab (only a KV
                # connector's async load gives it more), so the lookup always runs.
                # Get locally-cached tokens.
                new_computed_blocks, num_new_local_computed_tokens = (
                    self.kv_cache_manager.get_computed_blocks(request)
                )
                # NOTE: kvlab has no KV connector: no externally-cached tokens.

                # Total computed tokens.
                num_computed_tokens = num_new_local_computed_tokens
                assert num_computed_tokens <= request.num_tokens

                # Track the first scheduled prefill, not the prefills after a preemption.
                if request.prefill_stats is not None:
                    assert num_computed_tokens <= request.num_prompt_tokens
                    request.prefill_stats.set(
                        num_prompt_tokens=request.num_prompt_tokens,
                        num_local_cached_tokens=num_new_local_computed_tokens,
                        num_external_cached_tokens=0,
                    )

                # Number of tokens to be scheduled. num_tokens, not num_prompt_tokens: a
                # resumed request recomputes its output tokens too.
                num_new_tokens = request.num_tokens - num_computed_tokens
                threshold = self.scheduler_config.long_prefill_token_threshold
                if 0 < threshold < num_new_tokens:
                    num_new_tokens = threshold

                if (
                    not self.scheduler_config.enable_chunked_prefill
                    and num_new_tokens > token_budget
                ):
                    # Without chunked prefill the whole rest must fit: stop admitting.
                    break

                num_new_tokens = min(num_new_tokens, token_budget)
                assert num_new_tokens > 0
                # NOTE: kvlab has no encoder inputs to schedule; no Mamba block-aligned split.

                # Lookahead slots only for a request that already computed tokens (a
                # P/D-disaggregation edge case in vLLM; always 0 here).
                effective_lookahead_tokens = (
                    0 if request.num_computed_tokens == 0 else self.num_lookahead_tokens
                )
                # NOTE: kvlab has no cross-attention (encoder) tokens.

                new_blocks = self.kv_cache_manager.allocate_slots(
                    request,
                    num_new_tokens,
                    num_new_computed_tokens=num_new_local_computed_tokens,
                    new_computed_blocks=new_computed_blocks,
                    num_lookahead_tokens=effective_lookahead_tokens,
                    full_sequence_must_fit=self.scheduler_reserve_full_isl,
                )

                if new_blocks is None:
                    # The request cannot be scheduled.
                    break

                # NOTE: kvlab has no KV connector to tell about the allocation.

                request = self.waiting.pop_request()
                # NOTE: kvlab has no async KV load (WAITING_FOR_REMOTE_KVS).

                self.running.append(request)
                if request.status == RequestStatus.WAITING:
                    scheduled_new_reqs.append(request)
                elif request.status == RequestStatus.PREEMPTED:
                    scheduled_resumed_reqs.append(request)
                else:
                    raise RuntimeError(f"Invalid request status: {request.status}")

                req_to_new_blocks[request_id] = self.kv_cache_manager.get_blocks(request_id)
                num_scheduled_tokens[request_id] = num_new_tokens
                token_budget -= num_new_tokens
                request.status = RequestStatus.RUNNING
                request.num_computed_tokens = num_computed_tokens
                # NOTE: kvlab has no encoder cache to allocate.

        # Check if the scheduling constraints are satisfied.
        total_num_scheduled_tokens = sum(num_scheduled_tokens.values())
        assert total_num_scheduled_tokens <= self.max_num_scheduled_tokens

        assert token_budget >= 0
        assert len(self.running) <= self.max_num_running_reqs
        # Running requests may go unscheduled this step: fewer scheduled than running.
        assert len(scheduled_new_reqs) + len(scheduled_resumed_reqs) + len(
            scheduled_running_reqs
        ) <= len(self.running)

        # The longest prefix every running request shares, per group (for cascade
        # attention).
        num_common_prefix_blocks = [0] * len(self.kv_cache_config.kv_cache_groups)
        if self.running:
            any_request_id = self.running[0].request_id
            num_common_prefix_blocks = self.kv_cache_manager.get_num_common_prefix_blocks(
                any_request_id
            )

        # Construct the scheduler output.
        # NOTE: vLLM's model runner V2 branch is left out (resumed requests stay cached).
        new_reqs_data = [
            NewRequestData.from_request(req, req_to_new_blocks[req.request_id].get_block_ids())
            for req in scheduled_new_reqs
        ]

        cached_reqs_data = self._make_cached_request_data(
            scheduled_running_reqs,
            scheduled_resumed_reqs,
            req_to_new_blocks,
        )

        # Record the request ids that were scheduled in this step.
        self.prev_step_scheduled_req_ids.clear()
        self.prev_step_scheduled_req_ids.update(num_scheduled_tokens.keys())

        # NOTE: kvlab has no KV-cache zeroing (Mamba), no draft tokens, no encoder inputs.
        scheduler_output = SchedulerOutput(
            scheduled_new_reqs=new_reqs_data,
            scheduled_cached_reqs=cached_reqs_data,
            num_scheduled_tokens=num_scheduled_tokens,
            total_num_scheduled_tokens=total_num_scheduled_tokens,
            num_common_prefix_blocks=num_common_prefix_blocks,
            preempted_req_ids={req.request_id for req in preempted_reqs},
            # Requests finished between the previous step and this one (scheduler state,
            # not something scheduled now).
            finished_req_ids=self.finished_req_ids,
        )

        # NOTE: kvlab has no KV / EC connector metadata to build.

        self._update_after_schedule(scheduler_output)
        # NOTE: kvlab's step bookkeeping, after vLLM's body: step number, step log.
        self._end_step(scheduler_output, preempted_reqs)
        return scheduler_output

    def _preempt_request(self, request: Request) -> None:
        """Free a running request's blocks and put it back at the FRONT of the waiting queue.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._preempt_request (recompute
        preemption: its tokens are kept, its KV is recomputed on re-admission, hitting the
        prefix cache for blocks that survive in the free queue). The caller has already
        taken it out of ``running``. No ``timestamp`` argument: request events are left out.
        """
        assert request.status == RequestStatus.RUNNING, "Only running requests can be preempted"
        self.kv_cache_manager.free(request)
        # NOTE: kvlab has no encoder cache to free.
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        if request.spec_token_ids:
            request.spec_token_ids = []
        request.num_preemptions += 1

        # Put the request back to the waiting queue.
        self.waiting.prepend_request(request)

    def _update_after_schedule(self, scheduler_output: SchedulerOutput) -> None:
        """Advance num_computed_tokens by the scheduled tokens; start a new finished set.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._update_after_schedule. The
        output keeps the tokens as scheduled (the worker needs them); advancing here lets
        the next ``schedule()`` hand a chunked prefill its next chunk at once.
        """
        num_scheduled_tokens = scheduler_output.num_scheduled_tokens
        for req_id, num_scheduled_token in num_scheduled_tokens.items():
            request = self.requests[req_id]
            request.num_computed_tokens += num_scheduled_token
            # NOTE: kvlab has no output placeholders (async), no structured output.
            request.is_prefill_chunk = request.num_computed_tokens < request.num_tokens

        # NOTE: kvlab has no routed experts to snapshot.

        # A new set, not .clear(): the output keeps the old one.
        self.finished_req_ids = set()

    def _make_cached_request_data(
        self,
        running_reqs: list[Request],
        resumed_reqs: list[Request],
        req_to_new_blocks: dict[str, KVCacheBlocks],
    ) -> CachedRequestData:
        """The running and resumed requests of this step as the worker needs them.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._make_cached_request_data
        (without pipeline parallelism, which alone needs ``num_scheduled_tokens`` and the
        draft tokens: ``new_token_ids`` stays empty). Called before num_computed_tokens
        advances.
        """
        req_ids: list[str] = []
        new_token_ids: list[list[int]] = []
        new_block_ids: list[tuple[list[int], ...] | None] = []
        all_token_ids: dict[str, list[int]] = {}
        num_computed_tokens: list[int] = []
        num_output_tokens: list[int] = []
        resumed_req_ids = set()

        num_running_reqs = len(running_reqs)
        for idx, req in enumerate(itertools.chain(running_reqs, resumed_reqs)):
            req_id = req.request_id
            req_ids.append(req_id)
            # NOTE: kvlab has no pipeline parallelism: the worker keeps its sampled tokens itself.
            scheduled_in_prev_step = req_id in self.prev_step_scheduled_req_ids
            if idx >= num_running_reqs:
                assert not scheduled_in_prev_step
                resumed_req_ids.add(req_id)
            if not scheduled_in_prev_step:
                all_token_ids[req_id] = req.all_token_ids.copy()
            new_block_ids.append(req_to_new_blocks[req_id].get_block_ids(allow_none=True))
            num_computed_tokens.append(req.num_computed_tokens)
            # NOTE: kvlab has no output placeholders (async scheduling).
            num_output_tokens.append(req.num_output_tokens)

        return CachedRequestData(
            req_ids=req_ids,
            resumed_req_ids=resumed_req_ids,
            new_token_ids=new_token_ids,
            all_token_ids=all_token_ids,
            new_block_ids=new_block_ids,
            num_computed_tokens=num_computed_tokens,
            num_output_tokens=num_output_tokens,
        )

    def _end_step(self, scheduler_output: SchedulerOutput, preempted_reqs: list[Request]) -> None:
        """kvlab's bookkeeping of a finished ``schedule()`` (vLLM has none of it).

        Numbers the output (``scheduler_output.step``), keeps the prefix-cache hit of each
        first admission on its request (``Request.num_cached_tokens``), appends the step's
        StepRecord to ``step_log`` and tells the guard that the step waits for its update.
        """
        step = self.num_steps
        scheduler_output.step = step
        for new_req_data in scheduler_output.scheduled_new_reqs:
            request = self.requests[new_req_data.req_id]
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = new_req_data.num_computed_tokens
        self.step_log.append(
            StepRecord.from_output(
                scheduler_output,
                [req.request_id for req in preempted_reqs],
                self.requests,
                num_running=len(self.running),
                num_waiting=len(self.waiting),
                num_free_blocks=self.kv_cache_manager.block_pool.get_num_free_blocks(),
            )
        )
        self.guard.step_scheduled(step)
        self.num_steps = step + 1

    # ------------------------------------------------------------------ results in
    def update_from_output(
        self, scheduler_output: SchedulerOutput, sampled_token_ids: Mapping[str, Sequence[int]]
    ) -> EngineCoreOutputs:
        """Append the sampled tokens, stop finished requests and free their blocks.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.update_from_output (sampled
        tokens come as a dict instead of a ModelRunnerOutput, one EngineCoreOutputs comes
        back instead of one per client). Tokens sampled for a request whose prompt is still
        being chunked are discarded, as vLLM's model runner does.

        Args:
            scheduler_output: The output of the latest ``schedule()``.
            sampled_token_ids: req_id -> sampled token ids (usually one; may be omitted or
                empty for partial prefills).

        Returns:
            Per-request outputs (new tokens, finish reason, first prefill stats), the ids that
            stopped in this update, stats (with ``log_stats``) and the drained KV events.

        Raises:
            ValueError: The output is not the latest unconsumed one, or a sampled request was
                not scheduled, or a token id is not an int >= 0. Nothing changes.
        """
        self.guard.update_from_output(scheduler_output, sampled_token_ids)
        num_scheduled_tokens = scheduler_output.num_scheduled_tokens
        # NOTE: kvlab has no logprobs, pooler outputs, NaN counts, KV connector output, perf stats,
        # invalid remote blocks or routed experts.

        outputs: list[EngineCoreOutput] = []

        # NOTE: the loop runs over every scheduled request (up to max_num_seqs): keep its
        # body cheap.
        stopped_running_reqs: set[Request] = set()
        # NOTE: synchronous: a request scheduled in this step is still running here (only
        # async scheduling can preempt it first), so there are no stopped preempted requests.
        for req_id, num_tokens_scheduled in num_scheduled_tokens.items():
            assert num_tokens_scheduled > 0
            request = self.requests.get(req_id)
            if request is None or request.is_finished():
                # Finished (aborted by finish_requests) after this step was scheduled.
                continue

            # NOTE: a dict instead of ModelRunnerOutput; tokens "sampled" for a partial
            # prefill are dropped here, as vLLM's model runner returns none for it.
            generated_token_ids = (
                [] if request.is_prefill_chunk else list(sampled_token_ids.get(req_id, ()))
            )
            # NOTE: kvlab has no draft tokens to accept or reject; no encoder inputs to free.

            stopped = False
            new_token_ids = generated_token_ids

            # Check for stop and update request status.
            if new_token_ids:
                new_token_ids, stopped = self._update_request_with_output(request, new_token_ids)
            # NOTE: kvlab has no pooling requests, no structured-output grammar, no routed experts.

            finish_reason = None
            if stopped:
                # NOTE: kvlab reports the finish reason's string ("stop", "length", ...).
                finish_reason = get_finished_reason(request.status)
                # NOTE: kvlab has no streaming sessions: a stopped request is finished.
                self._free_request(request)
                stopped_running_reqs.add(request)

            # NOTE: kvlab has no logprobs, prompt logprobs or NaN counts.
            if new_token_ids or stopped:
                # Add EngineCoreOutput for this Request.
                outputs.append(
                    EngineCoreOutput(
                        request_id=req_id,
                        new_token_ids=new_token_ids,
                        finish_reason=finish_reason,
                        stop_reason=request.stop_reason,
                        prefill_stats=request.take_prefill_stats(),
                    )
                )

        # Remove the stopped requests from the running queue.
        if stopped_running_reqs:
            self.running = remove_all(self.running, stopped_running_reqs)

        # NOTE: kvlab has no KV connector: no failed KV loads to finish, no finished transfers.

        # collect KV cache events from KV cache manager
        events = self.kv_cache_manager.take_events()
        # NOTE: kvlab has no connector events; kvlab returns the events (vLLM publishes a KVEventBatch).

        # NOTE: one client, so one EngineCoreOutputs; its finished_requests are the requests
        # that stopped in this update (vLLM's per-client finished sets are left out).
        engine_core_outputs = EngineCoreOutputs(
            outputs=outputs,
            finished_requests={req.request_id for req in stopped_running_reqs},
            kv_events=events,
        )

        if (stats := self.make_stats()) is not None:
            engine_core_outputs.scheduler_stats = stats

        return engine_core_outputs

    def _update_request_with_output(
        self, request: Request, new_token_ids: list[int]
    ) -> tuple[list[int], bool]:
        """Append tokens one by one, stopping (and trimming the rest) at the first stop.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._update_request_with_output.
        """
        # A request still in prefill gets no tokens (the caller drops them).
        stopped = False
        for num_new, output_token_id in enumerate(new_token_ids, 1):
            request.append_output_token_ids(output_token_id)

            # Check for stop before the EngineCoreOutput is made.
            stopped = check_stop(request, self.max_model_len)
            if stopped:
                del new_token_ids[num_new:]  # Drop the tokens after the stop.
                break
        return new_token_ids, stopped

    # ------------------------------------------------------------------ requests in
    def get_request_counts(self) -> tuple[int, int]:
        """(num_running_reqs, num_waiting_reqs).

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.get_request_counts.
        """
        # NOTE: kvlab has no skipped_waiting queue.
        return len(self.running), len(self.waiting)

    def add_request(self, request: Request) -> None:
        """Queue a new request at the back of the waiting queue.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.add_request (no streaming: an
        id already in the scheduler is refused, not a next input chunk).

        Args:
            request: A fresh Request (status WAITING, nothing computed) with sampling
                params; with prefix caching on, built with a block hasher of the manager's
                ``hash_block_size``.

        Raises:
            TypeError: Not a Request.
            ValueError: Duplicate id, not fresh, pooling request, empty or too long prompt
                (>= max_model_len: vLLM's input processor leaves room for one output token),
                or block hashes missing for prefix caching.
        """
        self.guard.add_request(request)
        # NOTE: kvlab has no streaming sessions (resumable requests), no blocked statuses: the request
        # goes straight to the waiting queue.
        self.waiting.add_request(request)
        self.requests[request.request_id] = request
        # NOTE: kvlab has no KV connector to tell, no QUEUED event to record.

    # ------------------------------------------------------------------ finishing
    def finish_requests(
        self,
        request_ids: str | Iterable[str] | None,
        finished_status: RequestStatus = RequestStatus.FINISHED_ABORTED,
    ) -> list[str]:
        """End requests from outside (client abort): dequeue them and free their blocks.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.finish_requests (differs: ids
        are handled in the given order, duplicates dropped, so the free order is
        reproducible; vLLM iterates a set. Returns ids, not (id, client index) pairs).
        Unknown or already finished ids are skipped.

        Args:
            request_ids: One id, several, or None for every unfinished request.
            finished_status: A FINISHED_* status (default FINISHED_ABORTED).

        Returns:
            The ids that were finished, in order.

        Raises:
            TypeError: ``request_ids`` is neither a str, an iterable nor None.
            ValueError: ``finished_status`` is not a finished status.
        """
        self.guard.finish_requests(request_ids, finished_status)
        if isinstance(request_ids, str):
            request_ids = (request_ids,)
        elif request_ids is not None:
            # NOTE: an ordered set (vLLM: set(request_ids)), so frees happen in a given order.
            request_ids = dict.fromkeys(request_ids)
        else:
            request_ids = self.requests.keys()

        running_requests_to_remove = set()
        waiting_requests_to_remove = []
        valid_requests = []

        # First pass: collect requests to remove from queues
        for req_id in request_ids:
            request = self.requests.get(req_id)
            if request is None or request.is_finished():
                # Invalid request ID.
                continue

            valid_requests.append(request)
            if request.status == RequestStatus.RUNNING:
                running_requests_to_remove.add(request)
            else:
                # NOTE: kvlab has no streaming sessions waiting for input.
                waiting_requests_to_remove.append(request)

        # Remove all requests from queues at once for better efficiency
        if running_requests_to_remove:
            self.running = remove_all(self.running, running_requests_to_remove)
        if waiting_requests_to_remove:
            self.waiting.remove_requests(waiting_requests_to_remove)

        # Second pass: set status and free requests
        for request in valid_requests:
            # NOTE: kvlab has no remote KV still loading, so no freeing to delay.
            request.status = finished_status
            self._free_request(request)

        return [r.request_id for r in valid_requests]

    def _free_request(self, request: Request) -> None:
        """Report the request finished and give its blocks back (tail first).

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._free_request (no KV connector,
        so blocks are never kept for a transfer; no encoder cache).
        """
        assert request.is_finished()

        request_id = request.request_id
        self.finished_req_ids.add(request_id)
        # NOTE: vLLM adds the id to a finished set per client here; kvlab (one client) adds
        # it to the step log, to the step during which the request finished.
        if self.step_log:
            self.step_log[-1].finished_req_ids.append(request_id)

        self._free_blocks(request)

    def _free_blocks(self, request: Request) -> None:
        """Free the request's blocks and forget it.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._free_blocks.
        """
        assert request.is_finished()
        self.kv_cache_manager.free(request)
        del self.requests[request.request_id]

    # ------------------------------------------------------------------ queries
    def get_num_unfinished_requests(self) -> int:
        """Requests waiting or running.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.get_num_unfinished_requests.
        """
        # NOTE: kvlab has no pause states, no skipped_waiting queue, no streaming sessions.
        num_waiting = len(self.waiting)
        return num_waiting + len(self.running)

    def has_unfinished_requests(self) -> bool:
        """Whether any request is waiting or running.

        Mirrors: vllm/v1/core/sched/interface.py::SchedulerInterface.has_unfinished_requests.
        """
        return self.get_num_unfinished_requests() > 0

    def has_finished_requests(self) -> bool:
        """Whether some request finished since the last ``schedule()``.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.has_finished_requests.
        """
        if self.finished_req_ids:
            return True
        # NOTE: kvlab has no KV connector, so no finished request waits for a delayed free.
        return False

    def has_requests(self) -> bool:
        """Whether any request is unfinished, or finished and not reported to the worker yet.

        Mirrors: vllm/v1/core/sched/interface.py::SchedulerInterface.has_requests.
        """
        return self.has_unfinished_requests() or self.has_finished_requests()

    def reset_prefix_cache(self, reset_running_requests: bool = False) -> bool:
        """Forget every cached block hash; optionally preempt all running requests first.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.reset_prefix_cache (no
        connector to reset). Running requests are preempted newest first, so they return
        to the waiting queue in their order.

        Returns:
            Whether the reset happened (False while requests hold blocks).

        Raises:
            RuntimeError: ``reset_running_requests`` and the reset failed all the same (some
                blocks are held outside the scheduler).
        """
        if reset_running_requests:
            # Preempt every running request (newest first, so they go back to the waiting
            # queue in admission order): their blocks' ref counts drop to 0 and the reset
            # can succeed.
            while self.running:
                request = self.running.pop()
                self._preempt_request(request)
                # NOTE: kvlab has no async scheduling: no in-flight outputs to discard.

            # The preempted requests will be resumed, not continued: act as if they were
            # not scheduled in the previous step.
            self.prev_step_scheduled_req_ids.clear()

        reset_successful = self.kv_cache_manager.reset_prefix_cache()
        if reset_running_requests and not reset_successful:
            raise RuntimeError(
                "reset_prefix_cache failed although every running request was preempted: "
                "some blocks are still held by requests outside this scheduler"
            )

        return reset_successful

    def make_stats(self) -> SchedulerStats | None:
        """Queue sizes, KV usage and the prefix-cache stats since the last call (None if off).

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.make_stats (KV-relevant part).
        """
        if not self.log_stats:
            return None
        prefix_cache_stats = self.kv_cache_manager.make_prefix_cache_stats()
        # NOTE: kvlab has no assert on prefix_cache_stats: a ready KVCacheManager built without
        # log_stats gives None. No connector stats, eviction events, spec-decoding, CUDA
        # graph or perf stats.
        return SchedulerStats(
            num_running_reqs=len(self.running),
            num_waiting_reqs=len(self.waiting),
            kv_cache_usage=self.kv_cache_manager.usage,
            prefix_cache_stats=prefix_cache_stats,
        )
