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
core. NOTE: it overrides the core Scheduler's ``_schedule_waiting`` (the waiting half of
``schedule``) and reads its step state; a core scheduler with vLLM's connector hooks would make
this module a connector only.

Examples:
    >>> sched = ConnectorScheduler(manager, SchedulerConfig(max_model_len=128),   # doctest: +SKIP
    ...                            connector=RemotePrefillConnector(remote_prefilled={"c"}))
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from kvlab.core.kv_cache_interface import KVCacheConfig
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.request import Request, RequestStatus
from kvlab.core.sched import EngineCoreOutputs, Scheduler, SchedulerConfig, SchedulerOutput
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
        self.skipped_waiting: deque[Request] = deque()
        self.finished_recving_kv_req_ids: set[str] = set()
        self.transfer_log: list[tuple[int, str]] = []

    # ------------------------------------------------------------------ one step
    def schedule(self) -> SchedulerOutput:
        """``Scheduler.schedule``, then the connector's stores for this step (build_connector_meta)."""
        output = super().schedule()
        self.connector.build_connector_meta(output, self.requests)
        self._drain_connector_log(output.step)
        return output

    def _log(self, step: int, line: str) -> None:
        self.transfer_log.append((step, line))

    def _drain_connector_log(self, step: int) -> None:
        for line in self.connector.log:
            self._log(step, line)
        self.connector.log.clear()

    def _schedule_waiting(self, state: Any) -> None:
        """The waiting loop of vLLM's ``schedule``, with the KV-connector branches."""
        cfg, manager = self.scheduler_config, self.kv_cache_manager
        step = self.num_steps - 1
        step_skipped_waiting: deque[Request] = deque()
        while (self.waiting or self.skipped_waiting) and state.token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break
            request_queue = self.skipped_waiting or self.waiting
            request = request_queue[0]
            if (request.status == RequestStatus.WAITING_FOR_REMOTE_KVS
                    and not self._try_promote_blocked_waiting_request(request)):  # fmt: skip
                request_queue.popleft()
                step_skipped_waiting.appendleft(request)
                continue
            num_external_computed_tokens, load_kv_async = 0, False
            if request.num_computed_tokens == 0:
                new_computed_blocks, num_new_local_computed_tokens = manager.get_computed_blocks(request)
                num_external_computed_tokens, load_kv_async = self.connector.get_num_new_matched_tokens(
                    request, num_new_local_computed_tokens)  # fmt: skip
                num_computed_tokens = num_new_local_computed_tokens + num_external_computed_tokens
            else:
                # A request whose KV was loaded asynchronously: its prefix is computed.
                new_computed_blocks = manager.empty_kv_cache_blocks
                num_new_local_computed_tokens = 0
                num_computed_tokens = request.num_computed_tokens
            if load_kv_async:
                num_new_tokens = 0  # loading remote KV: nothing to compute this step
            else:
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
                num_external_computed_tokens=num_external_computed_tokens,
                delay_cache_blocks=load_kv_async,
                full_sequence_must_fit=cfg.scheduler_reserve_full_isl,
            )
            if new_blocks is None:
                break
            block_ids = manager.get_block_ids(request.request_id)[0]
            first = num_new_local_computed_tokens // self.block_size
            last = -(-(num_new_local_computed_tokens + num_external_computed_tokens) // self.block_size)
            self.connector.update_state_after_alloc(request, block_ids[first:last], num_external_computed_tokens)
            request_queue.popleft()
            rid = request.request_id
            if load_kv_async:
                request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                step_skipped_waiting.appendleft(request)
                request.num_computed_tokens = num_computed_tokens
                self._drain_connector_log(step)
                self._log(step, f"{rid}: WAITING_FOR_REMOTE_KVS (local hit {num_new_local_computed_tokens}, "
                                f"loading {num_external_computed_tokens} tokens)")  # fmt: skip
                continue
            self.running.append(request)
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
                request.num_cached_tokens = num_computed_tokens
        if step_skipped_waiting:
            self.skipped_waiting.extendleft(step_skipped_waiting)

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
        self._log(self.num_steps - 1, f"{request.request_id}: KV arrived, cache_blocks({request.request_id}, "
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
