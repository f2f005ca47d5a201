"""kvlab's scheduler with a KV connector: asynchronous KV loads and ``WAITING_FOR_REMOTE_KVS``.

Mirrors: the KV-connector paths of vllm/v1/core/sched/scheduler.py::Scheduler (0.22.1):

* ``schedule``, loop over waiting requests: a request in ``WAITING_FOR_REMOTE_KVS`` is skipped
  (kept in ``skipped_waiting``, looked at first next time) until its load has finished; then
  ``_try_promote_blocked_waiting_request`` -> ``_update_waiting_for_remote_kv`` caches its blocks
  (``cache_blocks(request, num_computed_tokens)``; a fully loaded prompt goes back to
  ``num_tokens - 1``) and it is scheduled like any other request, from ``num_computed_tokens``.
* a new or preempted request with nothing computed asks the connector after the local lookup:
  ``get_num_new_matched_tokens`` -> ``(ext_tokens, load_kv_async)``. With an asynchronous load
  ``num_new_tokens = 0``, ``allocate_slots(..., num_external_computed_tokens=ext_tokens,
  delay_cache_blocks=True)``, ``update_state_after_alloc``, status ``WAITING_FOR_REMOTE_KVS``,
  ``num_computed_tokens = local hit + ext_tokens``, and nothing runs for it this step.
* ``update_from_output``: the loads the worker finished (``finished_recving``) are noted for the
  next ``schedule``.

kvlab.core's Scheduler has no connector (its docstring says so); this subclass adds one outside
core. NOTE: core's ``schedule`` is vLLM's body without the connector branches, written inline
with no hook, so ``ConnectorScheduler.schedule`` is that body again with vLLM's connector
branches in the waiting loop; its running loop and output must stay equal to core's
(tests/kv_transfer checks both schedulers agree when the connector never loads).

Examples:
    >>> sched = ConnectorScheduler(manager, SchedulerConfig(max_model_len=128),   # doctest: +SKIP
    ...                            connector=RemotePrefillConnector(remote_prefilled={"c"}))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvlab.core.kv_cache_interface import KVCacheConfig
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.request import Request, RequestStatus
from kvlab.core.kv_cache_manager import KVCacheBlocks
from kvlab.core.sched import EngineCoreOutputs, Scheduler, SchedulerConfig, SchedulerOutput
from kvlab.core.sched.output import NewRequestData
from kvlab.core.sched.request_queue import create_request_queue
from kvlab.kv_transfer.connectors import KVConnector

__all__ = ["ConnectorScheduler"]


class ConnectorScheduler(Scheduler):
    """First-come-first-served scheduler whose waiting requests may load KV through a connector.

    Args:
        kv_cache: As for kvlab.core.sched.Scheduler (a KVCacheConfig or a KVCacheManager); one
            KV cache group.
        config: Budgets and switches.
        connector: A kvlab.kv_transfer connector (``RemotePrefillConnector``,
            ``CPUOffloadingConnector``).
        recorder: As for Scheduler.

    Attributes:
        skipped_waiting: Requests skipped in a waiting pass (waiting for their KV), scheduled
            before ``waiting`` once ready.
        finished_recving_kv_req_ids: Requests whose load finished, promoted at the next step.
        transfer_log: ``(step, line)`` for every connector decision and status change.

    Raises:
        TypeError: ``connector`` is not a KVConnector.
        ValueError: More than one KV cache group (left out of kvlab's connector model).
    """

    def __init__(self, kv_cache: KVCacheConfig | KVCacheManager, config: SchedulerConfig,
                 connector: KVConnector, recorder: Any = None, **kwargs: Any) -> None:  # fmt: skip
        if not isinstance(connector, KVConnector):
            raise TypeError(f"connector must be a kvlab.kv_transfer connector, got {type(connector).__name__}")
        super().__init__(kv_cache, config, recorder, **kwargs)
        if len(self.kv_cache_config.kv_cache_groups) != 1:
            raise ValueError("kvlab's connector model handles one KV cache group, "
                             f"got {len(self.kv_cache_config.kv_cache_groups)}")  # fmt: skip
        self.connector = connector
        self.block_size = self.kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size
        self.skipped_waiting = create_request_queue(self.policy)
        self.finished_recving_kv_req_ids: set[str] = set()
        self.transfer_log: list[tuple[int, str]] = []

    # ------------------------------------------------------------------ one step
    def schedule(self) -> SchedulerOutput:
        """Plan one step like ``Scheduler.schedule``, with vLLM's KV-connector branches.

        Mirrors: vllm/v1/core/sched/scheduler.py::Scheduler.schedule with ``self.connector``
        set. kvlab.core's Scheduler.schedule is vLLM's body without the connector branches
        (it has NOTEs where they go); this is that body with them back in: the running loop
        and the output are kvlab.core's statements, the waiting loop is vLLM's connector
        version. After the body, the connector plans this step's stores
        (``build_connector_meta``) and its log is drained into ``transfer_log``.

        Returns:
            The step's SchedulerOutput, as ``Scheduler.schedule``. A request whose KV is
            being loaded is not in it (nothing is computed for it this step).

        Raises:
            RuntimeError: The previous output was not given to ``update_from_output`` yet.
        """
        # NOTE: kvlab.core's Scheduler.schedule is written inline, like vLLM's, with no hook
        # for a connector; overriding the whole public method keeps core untouched. Keep the
        # running loop and the output below identical to kvlab/core/sched/scheduler.py.
        self.guard.schedule()

        scheduled_new_reqs: list[Request] = []
        scheduled_resumed_reqs: list[Request] = []
        scheduled_running_reqs: list[Request] = []
        preempted_reqs: list[Request] = []

        req_to_new_blocks: dict[str, KVCacheBlocks] = {}
        num_scheduled_tokens: dict[str, int] = {}
        token_budget = self.max_num_scheduled_tokens

        if self.recorder is not None:
            self.recorder.mark_step(self.num_steps)
        self.kv_cache_manager.new_step_starts()

        # First, schedule the RUNNING requests (kvlab.core's loop, unchanged).
        req_index = 0
        while req_index < len(self.running) and token_budget > 0:
            request = self.running[req_index]
            num_new_tokens = request.num_tokens_with_spec - request.num_computed_tokens
            if 0 < self.scheduler_config.long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = self.scheduler_config.long_prefill_token_threshold
            num_new_tokens = min(num_new_tokens, token_budget)
            num_new_tokens = min(
                num_new_tokens, self.max_model_len - 1 - request.num_computed_tokens
            )
            if num_new_tokens == 0:
                req_index += 1
                continue
            while True:
                new_blocks = self.kv_cache_manager.allocate_slots(
                    request, num_new_tokens, num_lookahead_tokens=self.num_lookahead_tokens
                )
                if new_blocks is not None:
                    break
                preempted_req = self.running.pop()
                self._preempt_request(preempted_req)
                preempted_reqs.append(preempted_req)
                if preempted_req == request:
                    break
            if new_blocks is None:
                break
            scheduled_running_reqs.append(request)
            request_id = request.request_id
            req_to_new_blocks[request_id] = new_blocks
            num_scheduled_tokens[request_id] = num_new_tokens
            token_budget -= num_new_tokens
            req_index += 1

        # Next, schedule the WAITING requests (vLLM's loop with the connector branches).
        if not preempted_reqs:
            step_skipped_waiting = create_request_queue(self.policy)
            while (self.waiting or self.skipped_waiting) and token_budget > 0:
                if len(self.running) == self.max_num_running_reqs:
                    break

                # FCFS: the requests skipped earlier come first.
                request_queue = self.skipped_waiting or self.waiting
                request = request_queue.peek_request()
                request_id = request.request_id

                # A request still loading its KV stays skipped.
                if (
                    request.status == RequestStatus.WAITING_FOR_REMOTE_KVS
                    and not self._try_promote_blocked_waiting_request(request)
                ):
                    request_queue.pop_request()
                    step_skipped_waiting.prepend_request(request)
                    continue

                num_external_computed_tokens = 0
                load_kv_async = False
                if request.num_computed_tokens == 0:
                    # Locally cached tokens, then the tokens the connector can load.
                    new_computed_blocks, num_new_local_computed_tokens = (
                        self.kv_cache_manager.get_computed_blocks(request)
                    )
                    num_external_computed_tokens, load_kv_async = (
                        self.connector.get_num_new_matched_tokens(
                            request, num_new_local_computed_tokens
                        )
                    )
                    num_computed_tokens = (
                        num_new_local_computed_tokens + num_external_computed_tokens
                    )
                    assert num_computed_tokens <= request.num_tokens
                    if request.prefill_stats is not None:
                        request.prefill_stats.set(
                            num_prompt_tokens=request.num_prompt_tokens,
                            num_local_cached_tokens=num_new_local_computed_tokens,
                            num_external_cached_tokens=num_external_computed_tokens,
                        )
                else:
                    # Its KV arrived: num_computed_tokens already counts it.
                    new_computed_blocks = self.kv_cache_manager.empty_kv_cache_blocks
                    num_new_local_computed_tokens = 0
                    num_computed_tokens = request.num_computed_tokens

                if load_kv_async:
                    # Loading KV from elsewhere: no new work this step.
                    assert num_external_computed_tokens > 0
                    num_new_tokens = 0
                else:
                    num_new_tokens = request.num_tokens - num_computed_tokens
                    threshold = self.scheduler_config.long_prefill_token_threshold
                    if 0 < threshold < num_new_tokens:
                        num_new_tokens = threshold
                    if (
                        not self.scheduler_config.enable_chunked_prefill
                        and num_new_tokens > token_budget
                    ):
                        break
                    num_new_tokens = min(num_new_tokens, token_budget)
                    assert num_new_tokens > 0

                effective_lookahead_tokens = (
                    0 if request.num_computed_tokens == 0 else self.num_lookahead_tokens
                )
                new_blocks = self.kv_cache_manager.allocate_slots(
                    request,
                    num_new_tokens,
                    num_new_computed_tokens=num_new_local_computed_tokens,
                    new_computed_blocks=new_computed_blocks,
                    num_lookahead_tokens=effective_lookahead_tokens,
                    num_external_computed_tokens=num_external_computed_tokens,
                    delay_cache_blocks=load_kv_async,
                    full_sequence_must_fit=self.scheduler_reserve_full_isl,
                )
                if new_blocks is None:
                    break

                # The connector learns which blocks receive the external tokens.
                # NOTE: vLLM passes all of the request's blocks; kvlab's connectors take the
                # block ids of the external range only (what their logs name).
                block_ids = self.kv_cache_manager.get_block_ids(request_id)[0]
                first = num_new_local_computed_tokens // self.block_size
                last = -(-num_computed_tokens // self.block_size)
                self.connector.update_state_after_alloc(
                    request, block_ids[first:last], num_external_computed_tokens
                )

                request = request_queue.pop_request()
                if load_kv_async:
                    # Blocks are allocated; the request waits for its KV (skipped until then).
                    request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                    step_skipped_waiting.prepend_request(request)
                    request.num_computed_tokens = num_computed_tokens
                    self._drain_connector_log(self.num_steps)
                    self._log(
                        self.num_steps,
                        f"{request_id}: WAITING_FOR_REMOTE_KVS (local hit "
                        f"{num_new_local_computed_tokens}, loading "
                        f"{num_external_computed_tokens} tokens)",
                    )
                    continue

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

            # Requeue the requests skipped in this pass ahead of older skipped ones.
            if step_skipped_waiting:
                self.skipped_waiting.prepend_requests(step_skipped_waiting)

        # The output (kvlab.core's statements, unchanged).
        total_num_scheduled_tokens = sum(num_scheduled_tokens.values())
        assert total_num_scheduled_tokens <= self.max_num_scheduled_tokens
        assert token_budget >= 0
        assert len(self.running) <= self.max_num_running_reqs
        num_common_prefix_blocks = [0] * len(self.kv_cache_config.kv_cache_groups)
        if self.running:
            num_common_prefix_blocks = self.kv_cache_manager.get_num_common_prefix_blocks(
                self.running[0].request_id
            )
        new_reqs_data = [
            NewRequestData.from_request(req, req_to_new_blocks[req.request_id].get_block_ids())
            for req in scheduled_new_reqs
        ]
        cached_reqs_data = self._make_cached_request_data(
            scheduled_running_reqs, scheduled_resumed_reqs, req_to_new_blocks
        )
        self.prev_step_scheduled_req_ids.clear()
        self.prev_step_scheduled_req_ids.update(num_scheduled_tokens.keys())
        scheduler_output = SchedulerOutput(
            scheduled_new_reqs=new_reqs_data,
            scheduled_cached_reqs=cached_reqs_data,
            num_scheduled_tokens=num_scheduled_tokens,
            total_num_scheduled_tokens=total_num_scheduled_tokens,
            num_common_prefix_blocks=num_common_prefix_blocks,
            preempted_req_ids={req.request_id for req in preempted_reqs},
            finished_req_ids=self.finished_req_ids,
        )
        self._update_after_schedule(scheduler_output)
        self._end_step(scheduler_output, preempted_reqs)
        # NOTE: vLLM builds the connector metadata before _update_after_schedule; kvlab's
        # connectors plan their stores from num_computed_tokens after it (what was written).
        self.connector.build_connector_meta(scheduler_output, self.requests)
        self._drain_connector_log(scheduler_output.step)
        return scheduler_output

    def _log(self, step: int, line: str) -> None:
        self.transfer_log.append((step, line))

    def _drain_connector_log(self, step: int) -> None:
        for line in self.connector.log:
            self._log(step, line)
        self.connector.log.clear()

    def _try_promote_blocked_waiting_request(self, request: Request) -> bool:
        """Mirrors Scheduler._try_promote_blocked_waiting_request (the remote-KV status only)."""
        if request.request_id not in self.finished_recving_kv_req_ids:
            return False
        self._update_waiting_for_remote_kv(request)
        request.status = RequestStatus.PREEMPTED if request.num_preemptions else RequestStatus.WAITING
        return True

    def _update_waiting_for_remote_kv(self, request: Request) -> None:
        """Cache the loaded blocks now that their KV is there. Mirrors _update_waiting_for_remote_kv."""
        self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
        loaded = request.num_computed_tokens
        if request.num_computed_tokens == request.num_tokens:
            # A full prompt hit: recompute the last token to sample the next one.
            request.num_computed_tokens = request.num_tokens - 1
        self.finished_recving_kv_req_ids.remove(request.request_id)
        self._log(self.num_steps, f"{request.request_id}: KV arrived, cache_blocks({request.request_id}, "
                                      f"{loaded}), num_computed_tokens = {request.num_computed_tokens}")  # fmt: skip

    # ------------------------------------------------------------------ results in
    def update_from_output(self, scheduler_output: SchedulerOutput,
                           sampled_token_ids: Mapping[str, Sequence[int]]) -> EngineCoreOutputs:  # fmt: skip
        """``Scheduler.update_from_output``, then the loads that finished this step.

        Mirrors: Scheduler._update_from_kv_xfer_finished (finished_recving of a request still
        waiting for its KV marks it ready; of a finished request, frees its blocks).
        """
        outputs = super().update_from_output(scheduler_output, sampled_token_ids)
        for req_id in sorted(self.connector.update_connector_output()):
            request = self.requests.get(req_id)
            if request is not None and request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                self.finished_recving_kv_req_ids.add(req_id)
        forget = getattr(self.connector, "forget", None)
        if forget is not None:
            forget(outputs.finished_requests)
        return outputs

    # ------------------------------------------------------------------ queries
    def get_request_counts(self) -> tuple[int, int]:
        """(num_running_reqs, num_waiting_reqs), requests waiting for their KV included."""
        return len(self.running), len(self.waiting) + len(self.skipped_waiting)

    def get_num_unfinished_requests(self) -> int:
        """Requests waiting (for a slot or for their KV) or running."""
        return len(self.waiting) + len(self.skipped_waiting) + len(self.running)
