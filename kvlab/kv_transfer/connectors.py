"""Two KV connectors, scheduler side, as the KV cache sees them: a P/D decode side and CPU offloading.

A vLLM KV connector moves KV between this engine's blocks and somewhere else (another server, CPU
memory, a storage tier). The KV cache only sees its scheduler-side API, which kvlab models:

=====================================  ==========================================================
``get_num_new_matched_tokens(req, n)``  ``(tokens it can load beyond the n computed locally,
                                        whether the load is asynchronous)``
``update_state_after_alloc(req, ...)``  the blocks the load will write into
``build_connector_meta(output)``        after each ``schedule()``: which blocks to store
``update_connector_output()``           after the model ran: the loads that finished
                                        (``finished_recving``, request ids)
=====================================  ==========================================================

Mirrors (behaviour, not code): vllm/distributed/kv_transfer/kv_connector/v1/base.py
(KVConnectorBase_V1's scheduler-side methods), .../nixl_connector.py (the decode side of P/D:
load the whole prompt computed by a prefill server, asynchronously) and
.../offloading/scheduler.py::OffloadingConnectorScheduler (store every full block to CPU as it is
computed, look up the longest run of offloaded blocks after the local prefix hit, load it
asynchronously). Left out: the worker side (no bytes move: a load is instantaneous at the end of
the step it was issued in, or after ``load_steps`` steps), transfer failures, send-side P/D
(``request_finished`` delaying the free of a prefill server's blocks), several KV cache groups.

Examples:
    >>> cpu = CPUOffloadingConnector(block_size=4, num_cpu_blocks=64)   # doctest: +SKIP
    >>> sched = ConnectorScheduler(manager, SchedulerConfig(...), connector=cpu)  # doctest: +SKIP
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kvlab.core.request import Request

__all__ = ["CPUOffloadingConnector", "KVConnector", "LoadJob", "RemotePrefillConnector"]


@dataclass
class LoadJob:
    """One asynchronous load: ``num_tokens`` tokens into ``block_ids``, done after ``steps_left``.

    Attributes:
        request_id: The request the KV is for.
        block_ids: Blocks the load writes (the request's blocks past its local hit).
        num_tokens: Tokens loaded (tokens).
        steps_left: Scheduler steps until the worker reports it finished (1 = this step).
    """

    request_id: str
    block_ids: list[int]
    num_tokens: int
    steps_left: int


@dataclass
class KVConnector:
    """Scheduler-side connector API (the base: loads nothing, stores nothing).

    Attributes:
        load_steps: Steps an asynchronous load takes (1: its KV has arrived when the step it was
            issued in ends).
        loads: Loads issued and not finished yet, by request id.
        log: One line per connector decision, for notebooks and reports.
    """

    load_steps: int = 1
    loads: dict[str, LoadJob] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.load_steps, bool) or not isinstance(self.load_steps, int) or self.load_steps < 1:
            raise ValueError(f"load_steps must be an int >= 1 (steps), got {self.load_steps!r}")

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int, bool]:
        """Tokens the connector can load beyond ``num_computed_tokens``, and whether asynchronously.

        Mirrors: KVConnectorBase_V1.get_num_new_matched_tokens (kvlab never answers None).
        """
        return 0, False

    def update_state_after_alloc(self, request: Request, block_ids: list[int],
                                 num_external_tokens: int) -> None:  # fmt: skip
        """Record the load into the request's blocks past its local hit (none if 0 tokens).

        Mirrors: KVConnectorBase_V1.update_state_after_alloc.

        Args:
            request: The request just allocated.
            block_ids: The blocks of the load (its blocks after the local hit, first group).
            num_external_tokens: Tokens to load (tokens).
        """
        if num_external_tokens == 0:
            return
        self.loads[request.request_id] = LoadJob(request.request_id, list(block_ids),
                                                 num_external_tokens, self.load_steps)  # fmt: skip
        self.log.append(f"load {num_external_tokens} tokens of {request.request_id} into blocks {block_ids}")

    def build_connector_meta(self, scheduler_output: Any, requests: dict[str, Request]) -> None:
        """After ``schedule()``: the stores this step issues (none here). Mirrors build_connector_meta."""

    def update_connector_output(self) -> set[str]:
        """After the model ran: advance the loads; return the ids whose load finished.

        Mirrors: the worker's ``KVConnectorOutput.finished_recving`` read by
        ``Scheduler._update_from_kv_xfer_finished``.
        """
        done = set()
        for request_id, job in list(self.loads.items()):
            job.steps_left -= 1
            if job.steps_left == 0:
                done.add(request_id)
                del self.loads[request_id]
        return done


@dataclass
class RemotePrefillConnector(KVConnector):
    """The decode side of P/D disaggregation: a prefill server computed these prompts.

    Mirrors (behaviour): NixlConnector's scheduler side on a decode instance. A request whose
    id is in ``remote_prefilled`` gets its whole prompt (past the local hit) loaded
    asynchronously, once; afterwards it is an ordinary request.

    Attributes:
        remote_prefilled: Ids of the requests a prefill server computed (``do_remote_prefill``).
    """

    remote_prefilled: set[str] = field(default_factory=set)

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int, bool]:
        if request.request_id not in self.remote_prefilled:
            return 0, False
        self.remote_prefilled.discard(request.request_id)  # NIXL clears do_remote_prefill
        count = request.num_prompt_tokens - num_computed_tokens
        return count, count > 0


@dataclass
class CPUOffloadingConnector(KVConnector):
    """CPU offloading (``--kv-offloading-size``): every full block is stored to CPU memory.

    Mirrors (behaviour): OffloadingConnectorScheduler with one KV cache group and offloaded
    blocks the size of GPU blocks. Each step, the full blocks a scheduled request will have
    computed are stored (keyed by their block_hash, LRU when the CPU store is full); a waiting
    request (new, or resumed after preemption) asks for the longest run of stored blocks right
    after its local prefix hit, and loads it asynchronously.

    Attributes:
        block_size: Tokens per block (tokens); the requests' block hashes must use it.
        num_cpu_blocks: CPU store capacity (blocks).
        stored: block_hash -> None, least recently used first.
        next_stored_block_idx: Per request, the first block index not stored yet.
        num_locally_computed_tokens: Per request, the local hit its last lookup started from.
    """

    block_size: int = 16
    num_cpu_blocks: int = 1024
    stored: OrderedDict = field(default_factory=OrderedDict)
    next_stored_block_idx: dict[str, int] = field(default_factory=dict)
    num_locally_computed_tokens: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("block_size", "num_cpu_blocks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int, bool]:
        """The longest run of stored blocks from block ``num_computed_tokens // block_size`` on.

        Mirrors: OffloadingConnectorScheduler.get_num_new_matched_tokens / _lookup (maximal
        prefix lookup, at most ``num_tokens`` tokens; less than one block is not worth loading).
        """
        self.num_locally_computed_tokens[request.request_id] = num_computed_tokens
        hashes = request.block_hashes
        max_hit = min(request.num_tokens, len(hashes) * self.block_size)
        if max_hit - num_computed_tokens < self.block_size:
            return 0, False
        start = num_computed_tokens // self.block_size
        end = start
        while end < max_hit // self.block_size and hashes[end] in self.stored:
            self.stored.move_to_end(hashes[end])  # _touch: recently used
            end += 1
        num_hit = end * self.block_size - num_computed_tokens
        return max(num_hit, 0), num_hit > 0

    def update_state_after_alloc(self, request: Request, block_ids: list[int],
                                 num_external_tokens: int) -> None:  # fmt: skip
        super().update_state_after_alloc(request, block_ids, num_external_tokens)
        if num_external_tokens:  # what is loaded is stored already
            local = self.num_locally_computed_tokens.get(request.request_id, 0)
            self.next_stored_block_idx[request.request_id] = -(
                -(local + num_external_tokens) // self.block_size)

    def build_connector_meta(self, scheduler_output: Any, requests: dict[str, Request]) -> None:
        """Store the full blocks each scheduled request has once this step has run.

        Mirrors: OffloadingConnectorScheduler._build_store_jobs (stores complete when the step
        has run, before any later step can reuse the blocks; the LRU drops the oldest block
        when the store is full).
        """
        for req_id in scheduler_output.num_scheduled_tokens:
            request = requests[req_id]
            if req_id in scheduler_output.preempted_req_ids:
                continue
            num_offloadable = min(request.num_computed_tokens, request.num_tokens)
            num_blocks = min(num_offloadable // self.block_size, len(request.block_hashes))
            start = self.next_stored_block_idx.get(req_id, 0)
            new = [request.block_hashes[i] for i in range(start, num_blocks)]
            for block_hash in new:
                self.stored[block_hash] = None
                self.stored.move_to_end(block_hash)
                while len(self.stored) > self.num_cpu_blocks:
                    self.stored.popitem(last=False)
            if new:
                self.log.append(f"store {len(new)} block(s) of {req_id} to CPU (blocks {start}-{num_blocks - 1})")
            self.next_stored_block_idx[req_id] = max(start, num_blocks)

    def forget(self, request_ids: Iterable[str]) -> None:
        """Drop the per-request bookkeeping of finished requests (their stored blocks stay)."""
        for request_id in request_ids:
            self.next_stored_block_idx.pop(request_id, None)
            self.num_locally_computed_tokens.pop(request_id, None)
