"""What one scheduling step tells the worker, and what the step gives back to the caller.

Mirrors: vllm/v1/core/sched/output.py (NewRequestData, CachedRequestData, SchedulerOutput)
and the small EngineCoreOutput(s) records of vllm/v1/engine/__init__.py, keeping the
KV-cache-relevant fields only. Left out: multimodal features, LoRA, prompt embeddings,
spec-decode tokens, structured output, connector metadata.

kvlab adds the step log (``ScheduledRequest``, ``StepRecord``): ``Scheduler.step_log`` holds
one StepRecord per ``schedule()``, built from the step's SchedulerOutput after vLLM's body;
the reports, notebooks and views print it (vLLM's closest relatives are the per-request
engine events and SchedulerStats).

How the worker uses a SchedulerOutput::

    for new in out.scheduled_new_reqs:            # first time this request runs
        block_table.add_row(new.block_ids, row)   # all its blocks (prefix hits included)
    cached = out.scheduled_cached_reqs
    for i, req_id in enumerate(cached.req_ids):   # ran before (or resumed after preemption)
        ids = cached.new_block_ids[i]             # None when no new block this step
        if req_id in cached.resumed_req_ids: block_table.add_row(ids, row)   # replace
        elif ids is not None:                block_table.append_row(ids, row) # extend
    # then run out.num_scheduled_tokens[req_id] tokens of each request
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CachedRequestData",
    "EngineCoreOutput",
    "EngineCoreOutputs",
    "NewRequestData",
    "ScheduledRequest",
    "SchedulerOutput",
    "SchedulerStats",
    "StepRecord",
]


@dataclass
class NewRequestData:
    """A request scheduled for the first time (the worker caches its prompt).

    Mirrors: vllm/v1/core/sched/output.py::NewRequestData (KV-relevant fields).

    Attributes:
        req_id: The request id.
        prompt_token_ids: The prompt (tokens).
        block_ids: All of the request's block ids, one list per KV-cache group.
        num_computed_tokens: Tokens already in the cache when scheduled: the prefix-cache
            hit (tokens). Tokens ``num_computed_tokens : num_computed_tokens +
            num_scheduled_tokens[req_id]`` are computed this step.
        sampling_params: The request's sampling parameters (whatever the Request carries).
    """

    req_id: str
    prompt_token_ids: list[int]
    block_ids: tuple[list[int], ...]
    num_computed_tokens: int
    sampling_params: Any = None

    @classmethod
    def from_request(cls, request: Any, block_ids: tuple[list[int], ...]) -> NewRequestData:
        """Snapshot ``request`` (before its num_computed_tokens advances). Mirrors from_request."""
        return cls(
            req_id=request.request_id,
            prompt_token_ids=list(request.prompt_token_ids),
            block_ids=block_ids,
            num_computed_tokens=request.num_computed_tokens,
            sampling_params=getattr(request, "sampling_params", None),
        )


@dataclass
class CachedRequestData:
    """Requests the worker has seen before: running ones and ones resumed after preemption.

    Mirrors: vllm/v1/core/sched/output.py::CachedRequestData. List fields are parallel to
    ``req_ids``.

    Attributes:
        req_ids: Request ids, running ones first, then resumed ones.
        resumed_req_ids: Ids whose ``new_block_ids`` REPLACE the row (re-admitted after a
            preemption); for the others they are appended.
        new_token_ids: Per request, tokens the worker does not know yet (vLLM fills this
            only under pipeline parallelism; kvlab leaves the lists empty, as vLLM does).
        all_token_ids: For requests not scheduled in the previous step: all their tokens.
        new_block_ids: Per request, block ids per group, or None when nothing is new.
        num_computed_tokens: Per request, tokens already computed before this step.
        num_output_tokens: Per request, tokens generated so far.
    """

    req_ids: list[str]
    resumed_req_ids: set[str]
    new_token_ids: list[list[int]]
    all_token_ids: dict[str, list[int]]
    new_block_ids: list[tuple[list[int], ...] | None]
    num_computed_tokens: list[int]
    num_output_tokens: list[int]

    @property
    def num_reqs(self) -> int:
        """Number of requests listed."""
        return len(self.req_ids)

    @classmethod
    def make_empty(cls) -> CachedRequestData:
        """No cached requests. Mirrors CachedRequestData.make_empty."""
        return cls([], set(), [], {}, [], [], [])


@dataclass
class SchedulerOutput:
    """The plan of one step: who runs, how many tokens each, which blocks are new.

    Mirrors: vllm/v1/core/sched/output.py::SchedulerOutput (KV-relevant fields; ``step`` and
    ``preempted_req_ids`` order are kvlab's: vLLM keeps a set and no step number).

    Attributes:
        scheduled_new_reqs: Requests scheduled for the first time.
        scheduled_cached_reqs: Running and resumed requests.
        num_scheduled_tokens: req_id -> tokens computed this step (tokens).
        total_num_scheduled_tokens: Sum of the above (<= the token budget).
        num_common_prefix_blocks: Per group, blocks shared by every running request.
        finished_req_ids: Requests finished between the previous step and this one.
        preempted_req_ids: Requests preempted while scheduling this step.
        step: Index of the ``schedule()`` call that produced this output (kvlab).
    """

    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    num_common_prefix_blocks: list[int]
    finished_req_ids: set[str]
    preempted_req_ids: set[str] = field(default_factory=set)
    step: int = -1

    @classmethod
    def make_empty(cls) -> SchedulerOutput:
        """An output that schedules nothing. Mirrors SchedulerOutput.make_empty."""
        return cls([], CachedRequestData.make_empty(), {}, 0, [], set())


@dataclass
class EngineCoreOutput:
    """What one request produced in one step.

    Mirrors: vllm/v1/engine/__init__.py::EngineCoreOutput (request_id, new_token_ids,
    finish_reason, stop_reason, prefill_stats; finish_reason is the string, not the enum).

    Attributes:
        request_id: The request id.
        new_token_ids: Tokens appended this step (trimmed at a stop token).
        finish_reason: None while running, else "stop", "length" or "abort".
        stop_reason: The stop token id that ended it, if any.
        prefill_stats: With the request's first output only: the prompt tokens of the
            admission that produced it, split into computed and cached (a PrefillStats);
            None afterwards.
    """

    request_id: str
    new_token_ids: list[int]
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    prefill_stats: Any = None

    @property
    def finished(self) -> bool:
        """True when the request ended this step."""
        return self.finish_reason is not None


@dataclass
class SchedulerStats:
    """Scheduler-level stats of one step (only with ``log_stats``).

    Mirrors: vllm/v1/metrics/stats.py::SchedulerStats (queue sizes, usage, prefix-cache stats).
    """

    num_running_reqs: int
    num_waiting_reqs: int
    kv_cache_usage: float
    prefix_cache_stats: Any = None


@dataclass
class EngineCoreOutputs:
    """All outputs of one ``update_from_output`` call.

    Mirrors: vllm/v1/engine/__init__.py::EngineCoreOutputs (single client). ``kv_events``
    holds what ``KVCacheManager.take_events()`` returned (vLLM publishes them as a
    KVEventBatch instead).
    """

    outputs: list[EngineCoreOutput] = field(default_factory=list)
    finished_requests: set[str] = field(default_factory=set)
    scheduler_stats: SchedulerStats | None = None
    kv_events: list[Any] = field(default_factory=list)


# --------------------------------------------------------------------------- kvlab's step log
@dataclass(frozen=True)
class ScheduledRequest:
    """One request's share of one step (kvlab's step log).

    Attributes:
        request_id: The request.
        num_scheduled_tokens: Tokens computed this step (tokens).
        num_computed_tokens: Tokens already computed before this step, prefix hit included
            (tokens).
        num_cached_tokens: Prefix-cache hit found when admitted this step (tokens); 0 for
            requests that were already running.
        kind: "new" (first admission), "resumed" (re-admitted after preemption) or "running".
        phase: "decode" when computing the one token sampled last step, else "prefill"
            (a whole or chunked prompt, or the recompute of a resumed request).
        new_block_ids: Blocks per KV-cache group this step added (for new and resumed
            requests: all of their blocks).

    Examples:
        >>> entry = ScheduledRequest("a", 8, 0, 4, "new", "prefill", ([1, 2],))
        >>> StepRecord(step=0, scheduled=[entry]).describe()
        'step 0: a new prefill 8 tok (hit 4)'
    """

    request_id: str
    num_scheduled_tokens: int
    num_computed_tokens: int
    num_cached_tokens: int
    kind: str
    phase: str
    new_block_ids: tuple[list[int], ...]


@dataclass
class StepRecord:
    """What happened in one scheduler step (kvlab's step log; vLLM has no equivalent).

    Attributes:
        step: Index of the ``schedule()`` call (0-based).
        scheduled: The scheduled requests in scheduling order (running first, then admitted).
        preempted_req_ids: Requests preempted while scheduling, in preemption order (newest first).
        finished_req_ids: Requests that finished after this step was scheduled and before the
            next one (stopped in ``update_from_output`` or ended by ``finish_requests``).
        total_num_scheduled_tokens: Sum of the scheduled tokens (tokens).
        num_running: Running requests after scheduling.
        num_waiting: Waiting requests after scheduling.
        num_free_blocks: Free blocks in the pool after scheduling (blocks).
    """

    step: int
    scheduled: list[ScheduledRequest] = field(default_factory=list)
    preempted_req_ids: list[str] = field(default_factory=list)
    finished_req_ids: list[str] = field(default_factory=list)
    total_num_scheduled_tokens: int = 0
    num_running: int = 0
    num_waiting: int = 0
    num_free_blocks: int = 0

    @classmethod
    def from_output(
        cls,
        scheduler_output: SchedulerOutput,
        preempted_req_ids: list[str],
        requests: Mapping[str, Any],
        num_running: int,
        num_waiting: int,
        num_free_blocks: int,
    ) -> StepRecord:
        """Summarise a finished ``schedule()`` from its output.

        Args:
            scheduler_output: The step's output (its ``step`` set); the requests'
                num_computed_tokens have already advanced by the scheduled tokens.
            preempted_req_ids: The step's preempted requests, in preemption order (the
                output keeps a set).
            requests: req_id -> Request, for every scheduled request.
            num_running: Running requests after scheduling.
            num_waiting: Waiting requests after scheduling.
            num_free_blocks: Free blocks after scheduling (blocks).
        """
        num_groups = len(scheduler_output.num_common_prefix_blocks)
        # req_id -> (kind, tokens computed before this step, blocks added this step).
        before: dict[str, tuple[str, int, tuple[list[int], ...]]] = {}
        for new_req in scheduler_output.scheduled_new_reqs:
            before[new_req.req_id] = ("new", new_req.num_computed_tokens, new_req.block_ids)
        cached = scheduler_output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            kind = "resumed" if req_id in cached.resumed_req_ids else "running"
            block_ids = cached.new_block_ids[i]
            if block_ids is None:
                block_ids = tuple([] for _ in range(num_groups))
            before[req_id] = (kind, cached.num_computed_tokens[i], block_ids)
        scheduled = []
        for req_id, num_tokens in scheduler_output.num_scheduled_tokens.items():
            request = requests[req_id]
            kind, num_computed_tokens, block_ids = before[req_id]
            # Decode: computing exactly the one token sampled last step.
            is_decode = (
                request.num_output_tokens > 0 and num_computed_tokens == request.num_tokens - 1
            )
            scheduled.append(
                ScheduledRequest(
                    request_id=req_id,
                    num_scheduled_tokens=num_tokens,
                    num_computed_tokens=num_computed_tokens,
                    num_cached_tokens=0 if kind == "running" else num_computed_tokens,
                    kind=kind,
                    phase="decode" if is_decode else "prefill",
                    new_block_ids=tuple(list(ids) for ids in block_ids),
                )
            )
        return cls(
            step=scheduler_output.step,
            scheduled=scheduled,
            preempted_req_ids=list(preempted_req_ids),
            total_num_scheduled_tokens=scheduler_output.total_num_scheduled_tokens,
            num_running=num_running,
            num_waiting=num_waiting,
            num_free_blocks=num_free_blocks,
        )

    def tokens_by_request(self) -> dict[str, int]:
        """request_id -> tokens scheduled this step, in scheduling order."""
        return {s.request_id: s.num_scheduled_tokens for s in self.scheduled}

    def describe(self) -> str:
        """One line for a report, e.g. ``step 3: a decode 1 tok, b new prefill 8 tok (hit 4)``."""
        parts = []
        for s in self.scheduled:
            kind = "" if s.kind == "running" else f" {s.kind}"
            hit = f" (hit {s.num_cached_tokens})" if s.num_cached_tokens else ""
            parts.append(f"{s.request_id}{kind} {s.phase} {s.num_scheduled_tokens} tok{hit}")
        line = f"step {self.step}: " + (", ".join(parts) if parts else "nothing scheduled")
        if self.preempted_req_ids:
            line += " | preempted " + ", ".join(self.preempted_req_ids)
        if self.finished_req_ids:
            line += " | finished " + ", ".join(self.finished_req_ids)
        return line
