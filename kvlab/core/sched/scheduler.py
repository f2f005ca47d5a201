"""A continuous-batching scheduler over the KVCacheManager: who runs each step, with which blocks.

Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler, first-come-first-served, synchronous
(``schedule`` then ``update_from_output``, alternating), KV-cache-relevant behaviour only.
There is no prefill or decode phase: each step gives every request tokens so that its
``num_computed_tokens`` catches up with its ``num_tokens`` (a prompt, a chunk of one, or the
one token sampled last step)::

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
      3. num_computed_tokens += n for everyone scheduled
    update_from_output(): append sampled tokens, check stops, free finished requests

Left out (vLLM features outside the KV cache's story): priority policy, async scheduling,
speculative decoding, KV connectors, encoders / multimodal budgets, LoRA limits, structured
output, pipeline parallelism, streaming sessions, pooling requests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kvlab.core.kv_cache_manager import KVCacheBlocks
from kvlab.core.kv_cache_interface import KVCacheConfig
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.request import Request, RequestStatus
from kvlab.core.sched.config import SchedulerConfig
from kvlab.core.sched.output import (
    EngineCoreOutput,
    EngineCoreOutputs,
    NewRequestData,
    SchedulerOutput,
    SchedulerStats,
)
from kvlab.core.sched.scheduler_checks import build_manager, check_new_request, check_update
from kvlab.core.sched.scheduler_steps import StepState, make_cached_request_data, make_step_record
from kvlab.core.sched.step_log import StepRecord
from kvlab.core.sched.utils import check_stop, get_finished_reason, remove_all

__all__ = ["Scheduler"]


class Scheduler:
    """First-come-first-served continuous batching with chunked prefill and preemption.

    Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler (differs: synchronous only; the
    outputs of ``finish_requests`` are processed in the given order, not set order; bad
    input raises before anything changes; see the module docstring for what is left out).

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
            at the start of every ``schedule()``.
        hash_block_size: Block size of the requests' block hashes (tokens); default: the
            GCD of the groups' block sizes. Only used when building the manager.
        enable_kv_cache_events: Queue vLLM KV events (returned by ``update_from_output``).

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
        if not isinstance(config, SchedulerConfig):
            raise TypeError(f"config must be a SchedulerConfig, got {type(config).__name__}")
        if recorder is not None and not callable(getattr(recorder, "mark_step", None)):
            raise TypeError(
                "recorder must have a mark_step(step) method (kvlab.trace's Recorder has)"
            )
        self.scheduler_config = config
        self.kv_cache_manager = build_manager(
            kv_cache, config, hash_block_size, enable_kv_cache_events
        )
        self.kv_cache_config = self.kv_cache_manager.kv_cache_config
        self.recorder = recorder
        if recorder is not None:
            self.kv_cache_manager.set_recorder(recorder)
        self.max_num_running_reqs = config.max_num_seqs
        self.max_num_scheduled_tokens = config.max_num_scheduled_tokens
        self.max_model_len = config.max_model_len
        self.log_stats = config.log_stats
        # request_id -> Request, for every request not finished yet.
        self.requests: dict[str, Request] = {}
        # NOTE: FCFS: waiting[0] is admitted next; preempted requests go back to the FRONT.
        self.waiting: deque[Request] = deque()
        # NOTE: admission order; running[-1] is the newest, preempted first.
        self.running: list[Request] = []
        # Finished since the last schedule(); reported in the next SchedulerOutput.
        self.finished_req_ids: set[str] = set()
        self.prev_step_scheduled_req_ids: set[str] = set()
        self.step_log: list[StepRecord] = []
        self.num_steps = 0
        self._pending_step: int | None = None

    # ------------------------------------------------------------------ requests in
    def add_request(self, request: Request) -> None:
        """Queue a new request at the back of the waiting queue.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.add_request (non-streaming).

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
        check_new_request(self, request)
        self.waiting.append(request)
        self.requests[request.request_id] = request

    # ------------------------------------------------------------------ one step
    def schedule(self) -> SchedulerOutput:
        """Plan one step: running requests first, then admissions; allocate their slots.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.schedule.

        Returns:
            The step's SchedulerOutput; requests' ``num_computed_tokens`` already include
            the scheduled tokens (as in vLLM).

        Raises:
            RuntimeError: The previous output was not given to ``update_from_output`` yet.
        """
        if self._pending_step is not None:
            raise RuntimeError(
                f"step {self._pending_step} was scheduled but update_from_output was not called "
                "for it (kvlab schedules synchronously: schedule, update_from_output, repeat)"
            )
        step = self.num_steps
        self.num_steps += 1
        if self.recorder is not None:
            self.recorder.mark_step(step)
        state = StepState(token_budget=self.max_num_scheduled_tokens)
        self.kv_cache_manager.new_step_starts()
        self._schedule_running(state)
        if not state.preempted_reqs:
            self._schedule_waiting(state)
        output = self._make_output(state, step)
        self._update_after_schedule(output)
        self.step_log.append(make_step_record(self, state, output))
        self._pending_step = step
        return output

    def _schedule_running(self, state: StepState) -> None:
        cfg = self.scheduler_config
        req_index = 0
        while req_index < len(self.running) and state.token_budget > 0:
            request = self.running[req_index]
            num_new_tokens = request.num_tokens_with_spec - request.num_computed_tokens
            if 0 < cfg.long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = cfg.long_prefill_token_threshold
            num_new_tokens = min(
                num_new_tokens,
                state.token_budget,
                self.max_model_len - 1 - request.num_computed_tokens,
            )
            if num_new_tokens <= 0:
                # Nothing to compute (the request sits at max_model_len - 1): skip it and
                # let later requests run (vLLM's `continue`, not strictly FCFS).
                req_index += 1
                continue
            state.computed_before[request.request_id] = request.num_computed_tokens
            new_blocks = self._allocate_or_preempt(request, num_new_tokens, state)
            if new_blocks is None:
                break  # the request preempted itself: nothing later can run either
            state.scheduled_running_reqs.append(request)
            state.req_to_new_blocks[request.request_id] = new_blocks
            state.num_scheduled_tokens[request.request_id] = num_new_tokens
            state.token_budget -= num_new_tokens
            req_index += 1

    def _allocate_or_preempt(
        self, request: Request, num_new_tokens: int, state: StepState
    ) -> KVCacheBlocks | None:
        """allocate_slots; on failure preempt the newest running request and retry."""
        while True:
            new_blocks = self.kv_cache_manager.allocate_slots(
                request, num_new_tokens, num_lookahead_tokens=0
            )
            if new_blocks is not None:
                return new_blocks
            # NOTE: FCFS: the lowest priority is the newest admission, running[-1]. It sits
            # at or after req_index, so it was not scheduled earlier in this step.
            preempted_req = self.running.pop()
            self._preempt_request(preempted_req)
            state.preempted_reqs.append(preempted_req)
            if preempted_req is request:
                return None

    def _preempt_request(self, request: Request) -> None:
        """Free a running request's blocks and put it back at the FRONT of the waiting queue.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler._preempt_request (recompute
        preemption: its tokens are kept, its KV is recomputed on re-admission, hitting the
        prefix cache for blocks that survive in the free queue).
        """
        assert request.status == RequestStatus.RUNNING, "only running requests can be preempted"
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.spec_token_ids = []
        request.num_preemptions += 1
        self.waiting.appendleft(request)

    def _schedule_waiting(self, state: StepState) -> None:
        cfg = self.scheduler_config
        manager = self.kv_cache_manager
        while self.waiting and state.token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break
            request = self.waiting[0]
            # NOTE: always 0 here (no KV connector); vLLM looks up only in that case.
            new_computed_blocks, num_new_local_computed_tokens = manager.get_computed_blocks(
                request
            )
            num_computed_tokens = num_new_local_computed_tokens
            # num_tokens, not num_prompt_tokens: a resumed request recomputes its outputs too.
            num_new_tokens = request.num_tokens - num_computed_tokens
            if 0 < cfg.long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = cfg.long_prefill_token_threshold
            if not cfg.enable_chunked_prefill and num_new_tokens > state.token_budget:
                break
            num_new_tokens = min(num_new_tokens, state.token_budget)
            new_blocks = manager.allocate_slots(
                request,
                num_new_tokens,
                num_new_computed_tokens=num_new_local_computed_tokens,
                new_computed_blocks=new_computed_blocks,
                num_lookahead_tokens=0,
                full_sequence_must_fit=cfg.scheduler_reserve_full_isl,
            )
            if new_blocks is None:
                break
            self.waiting.popleft()
            self.running.append(request)
            rid = request.request_id
            if request.status == RequestStatus.WAITING:
                state.scheduled_new_reqs.append(request)
            else:
                state.scheduled_resumed_reqs.append(request)
            state.req_to_new_blocks[rid] = manager.get_blocks(rid)
            state.num_scheduled_tokens[rid] = num_new_tokens
            state.num_cached_tokens[rid] = num_computed_tokens
            state.computed_before[rid] = num_computed_tokens
            state.token_budget -= num_new_tokens
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed_tokens
            if request.num_cached_tokens < 0:
                # Hit of the first admission (vLLM's Request.num_cached_tokens).
                request.num_cached_tokens = num_computed_tokens

    def _make_output(self, state: StepState, step: int) -> SchedulerOutput:
        total = sum(state.num_scheduled_tokens.values())
        assert total <= self.max_num_scheduled_tokens and state.token_budget >= 0
        assert len(self.running) <= self.max_num_running_reqs
        num_common_prefix_blocks = [0] * len(self.kv_cache_config.kv_cache_groups)
        if self.running:
            num_common_prefix_blocks = self.kv_cache_manager.get_num_common_prefix_blocks(
                self.running[0].request_id
            )
        new_reqs_data = [
            NewRequestData.from_request(
                req, state.req_to_new_blocks[req.request_id].get_block_ids()
            )
            for req in state.scheduled_new_reqs
        ]
        cached_reqs_data = make_cached_request_data(self, state)
        self.prev_step_scheduled_req_ids = set(state.num_scheduled_tokens)
        return SchedulerOutput(
            scheduled_new_reqs=new_reqs_data,
            scheduled_cached_reqs=cached_reqs_data,
            num_scheduled_tokens=dict(state.num_scheduled_tokens),
            total_num_scheduled_tokens=total,
            num_common_prefix_blocks=list(num_common_prefix_blocks),
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids={req.request_id for req in state.preempted_reqs},
            step=step,
        )

    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        """Advance num_computed_tokens by the scheduled tokens. Mirrors _update_after_schedule."""
        for req_id, num_scheduled_token in output.num_scheduled_tokens.items():
            request = self.requests[req_id]
            request.num_computed_tokens += num_scheduled_token
            request.is_prefill_chunk = request.num_computed_tokens < request.num_tokens
        # A new set: the output keeps the old one.
        self.finished_req_ids = set()

    # ------------------------------------------------------------------ results in
    def update_from_output(
        self, scheduler_output: SchedulerOutput, sampled_token_ids: Mapping[str, Sequence[int]]
    ) -> EngineCoreOutputs:
        """Append the sampled tokens, stop finished requests and free their blocks.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.update_from_output (sampled
        tokens come as a dict instead of a ModelRunnerOutput). Tokens sampled for a request
        whose prompt is still being chunked are discarded, as vLLM's model runner does.

        Args:
            scheduler_output: The output of the latest ``schedule()``.
            sampled_token_ids: req_id -> sampled token ids (usually one; may be omitted or
                empty for partial prefills).

        Returns:
            Per-request outputs (new tokens, finish reason), finished ids, stats (with
            ``log_stats``) and the drained KV events.

        Raises:
            ValueError: The output is not the latest unconsumed one, or a sampled request was
                not scheduled, or a token id is not an int >= 0. Nothing changes.
        """
        check_update(self, scheduler_output, sampled_token_ids)
        self._pending_step = None
        outputs: list[EngineCoreOutput] = []
        stopped: list[Request] = []
        for req_id in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(req_id)
            if request is None or request.is_finished():
                continue  # aborted between schedule() and now
            new_token_ids = (
                [] if request.is_prefill_chunk else list(sampled_token_ids.get(req_id, ()))
            )
            is_stopped = False
            if new_token_ids:
                new_token_ids, is_stopped = self._update_request_with_output(request, new_token_ids)
            finish_reason = None
            if is_stopped:
                finish_reason = get_finished_reason(request.status)
                self._free_request(request)
                stopped.append(request)
            if new_token_ids or is_stopped:
                outputs.append(
                    EngineCoreOutput(req_id, new_token_ids, finish_reason, request.stop_reason)
                )
        if stopped:
            self.running = remove_all(self.running, stopped)
        return EngineCoreOutputs(
            outputs=outputs,
            finished_requests={r.request_id for r in stopped},
            scheduler_stats=self.make_stats(),
            kv_events=self.kv_cache_manager.take_events(),
        )

    def _update_request_with_output(
        self, request: Request, new_token_ids: list[int]
    ) -> tuple[list[int], bool]:
        """Append tokens one by one, stopping (and trimming) at the first stop. Mirrors vLLM."""
        for num_new, token_id in enumerate(new_token_ids, 1):
            request.append_output_token_ids(token_id)
            if check_stop(request, self.max_model_len):
                del new_token_ids[num_new:]
                return new_token_ids, True
        return new_token_ids, False

    # ------------------------------------------------------------------ finishing
    def finish_requests(
        self,
        request_ids: str | Iterable[str] | None,
        finished_status: RequestStatus = RequestStatus.FINISHED_ABORTED,
    ) -> list[str]:
        """End requests from outside (client abort): dequeue them and free their blocks.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.finish_requests (differs: ids
        are handled in the given order, duplicates dropped, so the free order is
        reproducible; vLLM iterates a set). Unknown or already finished ids are skipped.

        Args:
            request_ids: One id, several, or None for every unfinished request.
            finished_status: A FINISHED_* status (default FINISHED_ABORTED).

        Returns:
            The ids that were finished, in order.

        Raises:
            ValueError: ``finished_status`` is not a finished status.
        """
        if not RequestStatus.is_finished(finished_status):
            raise ValueError(f"finished_status must be a FINISHED_* status, got {finished_status}")
        if isinstance(request_ids, str):
            request_ids = [request_ids]
        elif request_ids is None:
            request_ids = list(self.requests)
        valid = [
            self.requests[i]
            for i in dict.fromkeys(request_ids)
            if i in self.requests and not self.requests[i].is_finished()
        ]
        running = [r for r in valid if r.status == RequestStatus.RUNNING]
        self.running = remove_all(self.running, running)
        for request in valid:
            if request.status != RequestStatus.RUNNING:
                self.waiting.remove(request)
        for request in valid:
            request.status = finished_status
            self._free_request(request)
        return [r.request_id for r in valid]

    def _free_request(self, request: Request) -> None:
        """Report the request finished; give its blocks back, tail first. Mirrors _free_request."""
        assert request.is_finished()
        request_id = request.request_id
        self.finished_req_ids.add(request_id)
        self.kv_cache_manager.free(request)
        del self.requests[request_id]
        if self.step_log:
            self.step_log[-1].finished_req_ids.append(request_id)

    # ------------------------------------------------------------------ queries
    def get_request_counts(self) -> tuple[int, int]:
        """(num_running_reqs, num_waiting_reqs)."""
        return len(self.running), len(self.waiting)

    def get_num_unfinished_requests(self) -> int:
        """Requests waiting or running."""
        return len(self.waiting) + len(self.running)

    def has_unfinished_requests(self) -> bool:
        """Whether any request is waiting or running."""
        return self.get_num_unfinished_requests() > 0

    def has_finished_requests(self) -> bool:
        """Whether some request finished since the last schedule()."""
        return bool(self.finished_req_ids)

    def reset_prefix_cache(self, reset_running_requests: bool = False) -> bool:
        """Forget every cached block hash; optionally preempt all running requests first.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.reset_prefix_cache (running
        requests are preempted newest first, so they return to the waiting queue in order).

        Returns:
            Whether the reset happened (False while requests hold blocks).
        """
        if reset_running_requests:
            while self.running:
                self._preempt_request(self.running.pop())
            self.prev_step_scheduled_req_ids.clear()
        return self.kv_cache_manager.reset_prefix_cache()

    def make_stats(self) -> SchedulerStats | None:
        """Queue sizes, KV usage and the prefix-cache stats since the last call (None if off).

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.make_stats (KV-relevant part).
        """
        if not self.log_stats:
            return None
        return SchedulerStats(
            num_running_reqs=len(self.running),
            num_waiting_reqs=len(self.waiting),
            kv_cache_usage=self.kv_cache_manager.usage,
            prefix_cache_stats=self.kv_cache_manager.make_prefix_cache_stats(),
        )
