"""A per-step diary of the scheduler: who ran, how many tokens, who was preempted or finished.

kvlab addition (vLLM has no equivalent; its closest relatives are the per-request engine
events and the SchedulerStats). ``Scheduler.step_log`` holds one StepRecord per
``schedule()`` call; the demo report and the notebooks print it::

    >>> entry = ScheduledRequest("a", 8, 0, 4, "new", "prefill", ([1, 2],))
    >>> rec = StepRecord(step=0, scheduled=[entry])
    >>> rec.describe()
    'step 0: a new prefill 8 tok (hit 4)'
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ScheduledRequest", "StepRecord"]


@dataclass(frozen=True)
class ScheduledRequest:
    """One request's share of one step.

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
    """What happened in one scheduler step.

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
