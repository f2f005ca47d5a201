"""One driver, three caches: run a Workload step by step on a CachePolicy and record outcomes.

The loop follows vLLM V1's scheduler (``kvlab.core.sched``), reduced to whole prefills::

    each step:
      arrivals      requests whose arrival_step (and dependency) is reached join ``waiting``
      1. running    in order, each needs a slot for its last token: policy.decode(req);
                    on False preempt the newest running request (recompute later: it goes to
                    the front of waiting) and retry, or stop when req itself was preempted
      2. waiting    only if nobody was preempted: FIFO, policy.admit(req) until one does not
                    fit (or max_num_seqs run); a request that fits nowhere while nothing runs
                    is rejected
      3. compute    admitted: policy.after_prefill; then every scheduled request samples its
                    next planned output token; one that has max_tokens outputs finishes

Same pool for all (``pool_tokens``), no token budget and no chunked prefill (nano-vllm and the
radix policy prefill whole prompts). Recomputed tokens are counted when a preempted request is
admitted again: every token but the last had KV before, so ``num_tokens - 1 - hit`` of them are
computed a second time.

Examples:
    >>> from kvlab.compare.workloads import shared_system_prompt
    >>> run = run_workload(shared_system_prompt(4, 32, 8, 4), "radix", pool_tokens=256)
    >>> run.requests["sys-1"].first_hit_tokens
    32
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kvlab.compare.policies import CachePolicy, NanoPolicy, RadixPolicy, VllmPolicy
from kvlab.compare.workloads import Workload, WorkloadRequest

__all__ = ["POLICIES", "RequestRecord", "RunResult", "StepRecord", "make_policy", "run_workload"]

POLICIES: dict[str, type[CachePolicy]] = {
    "vllm": VllmPolicy,
    "nano-vllm": NanoPolicy,
    "radix": RadixPolicy,
}
"""Policy name -> class (the names ``run_workload`` and ``compare`` accept)."""


def make_policy(name: str, pool_tokens: int, block_size: int, record: bool = False) -> CachePolicy:
    """Build the policy called ``name`` (a key of POLICIES).

    Raises:
        ValueError: If the name is unknown or a size is invalid.
    """
    cls = POLICIES.get(name)
    if cls is None:
        raise ValueError(f"unknown cache policy {name!r}; known: {', '.join(POLICIES)}")
    return cls(pool_tokens, block_size, record=record)


@dataclass
class RequestRecord:
    """What happened to one request on one cache.

    Attributes:
        request_id: The request.
        num_prompt_tokens: Prompt length (tokens).
        max_tokens: Output length (tokens).
        arrival_step: When it could first be admitted (steps).
        admit_step: First admission (None if never admitted).
        finish_step: When it finished (None if rejected or unfinished).
        first_hit_tokens: Prefix-cache hit at the first admission (tokens).
        raw_hit_tokens: The engine's own count at the first admission (nano-vllm may count
            the last block the driver still recomputes).
        readmit_hit_tokens: Hits at later admissions, after preemptions (tokens).
        num_preemptions: Times it was preempted.
        recomputed_tokens: Tokens whose KV was computed again after preemption (tokens).
        computed_tokens: Tokens whose KV was computed, prefills and decodes (tokens).
        rejected: True when it could never fit.
    """

    request_id: str
    num_prompt_tokens: int
    max_tokens: int
    arrival_step: int
    admit_step: int | None = None
    finish_step: int | None = None
    first_hit_tokens: int = 0
    raw_hit_tokens: int = 0
    readmit_hit_tokens: int = 0
    num_preemptions: int = 0
    recomputed_tokens: int = 0
    computed_tokens: int = 0
    rejected: bool = False


@dataclass(frozen=True)
class StepRecord:
    """The pool and the queues at the end of one step (token counts in tokens).

    Attributes:
        step: The step.
        num_running, num_waiting: Requests.
        num_used_tokens, num_cached_tokens, num_evictable_tokens: ``CachePolicy.usage()``.
        hit_tokens: Prefix-cache hits of this step's admissions.
        computed_tokens: KV computed this step.
        num_preempted: Preemptions this step.
        evicted_tokens: Cached tokens evicted so far (cumulative).
        recomputed_tokens: Tokens recomputed after preemption so far (cumulative).
    """

    step: int
    num_running: int
    num_waiting: int
    num_used_tokens: int
    num_cached_tokens: int
    num_evictable_tokens: int
    hit_tokens: int
    computed_tokens: int
    num_preempted: int
    evicted_tokens: int
    recomputed_tokens: int


@dataclass
class RunResult:
    """One workload on one cache.

    Attributes:
        policy: The policy name.
        workload: The workload name.
        pool_tokens: Usable pool (tokens).
        block_size: Block size (tokens).
        requests: request_id -> RequestRecord, in workload order.
        steps: One StepRecord per step.
        trace: The recording (kvlab Trace for vllm / nano-vllm, RadixRecorder for radix) or None.
    """

    policy: str
    workload: str
    pool_tokens: int
    block_size: int
    requests: dict[str, RequestRecord] = field(default_factory=dict)
    steps: list[StepRecord] = field(default_factory=list)
    trace: Any = None


class _Live:
    """A request while it runs: the tokens so far and its record."""

    __slots__ = ("record", "request_id", "spec", "token_ids")

    def __init__(self, spec: WorkloadRequest) -> None:
        self.spec = spec
        self.request_id = spec.request_id
        self.token_ids = list(spec.prompt_token_ids)
        n = len(spec.prompt_token_ids)
        self.record = RequestRecord(spec.request_id, n, spec.max_tokens, spec.arrival_step)

    @property
    def num_prompt_tokens(self) -> int:
        return self.record.num_prompt_tokens

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.record.num_prompt_tokens


class _Run:
    """The state of one run (queues, counters); ``step()`` advances it by one step."""

    def __init__(self, workload: Workload, policy: CachePolicy, max_num_seqs: int) -> None:
        self.policy = policy
        self.max_num_seqs = max_num_seqs
        self.pending = sorted(
            (_Live(r) for r in workload.requests), key=lambda x: x.spec.arrival_step
        )
        self.lives = {r.request_id: r for r in self.pending}
        self.order = [r.request_id for r in workload.requests]
        self.waiting: deque[_Live] = deque()
        self.running: list[_Live] = []
        self.finish_steps: dict[str, int] = {}
        self.recomputed = 0

    def busy(self) -> bool:
        return bool(self.pending or self.waiting or self.running)

    def _arrivals(self, step: int) -> None:
        still = []
        for r in self.pending:
            dep = r.spec.depends_on
            ready = r.spec.arrival_step <= step and (
                dep is None or (dep in self.finish_steps and self.finish_steps[dep] < step)
            )
            (self.waiting.append if ready else still.append)(r)
        self.pending = still

    def _schedule_running(self) -> tuple[list[_Live], int]:
        queue, scheduled, num_preempted = list(self.running), [], 0
        while queue:
            req = queue.pop(0)
            while not self.policy.decode(req):
                victim = queue.pop() if queue else req
                self.policy.preempt(victim)
                victim.record.num_preemptions += 1
                self.waiting.appendleft(victim)
                num_preempted += 1
                if victim is req:
                    break
            else:
                scheduled.append(req)
        self.running = list(scheduled)
        return scheduled, num_preempted

    def _admit(self, step: int) -> tuple[list[_Live], int]:
        admitted, hits = [], 0
        while self.waiting and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            hit = self.policy.admit(req)
            if hit is None:
                if not self.running:  # NOTE: nothing will ever free room for it
                    self.waiting.popleft().record.rejected = True
                    continue
                break
            self.waiting.popleft()
            self._count_admission(req, hit, step)
            hits += hit
            self.running.append(req)
            admitted.append(req)
        return admitted, hits

    def _count_admission(self, req: _Live, hit: int, step: int) -> None:
        rec = req.record
        rec.computed_tokens += len(req.token_ids) - hit
        if rec.admit_step is None:
            rec.admit_step, rec.first_hit_tokens = step, hit
            rec.raw_hit_tokens = self.policy.raw_hit_tokens.get(req.request_id, hit)
        else:
            rec.readmit_hit_tokens += hit
            redo = max(0, len(req.token_ids) - 1 - hit)
            rec.recomputed_tokens += redo
            self.recomputed += redo

    def _sample(self, reqs: list[_Live], step: int) -> None:
        for req in reqs:
            token = req.spec.output_token_ids[req.num_output_tokens]  # type: ignore[index]
            req.token_ids.append(token)
            self.policy.on_token(req, token)
            if req.num_output_tokens == req.spec.max_tokens:
                self.policy.finish(req)
                req.record.finish_step = step
                self.finish_steps[req.request_id] = step
                self.running.remove(req)

    def step(self, step: int) -> StepRecord:
        self.policy.mark_step(step)
        self._arrivals(step)
        decoded, num_preempted = self._schedule_running()
        admitted, hits = ([], 0) if num_preempted else self._admit(step)
        for req in decoded:
            req.record.computed_tokens += 1
        for req in admitted:
            self.policy.after_prefill(req)
        computed = len(decoded) + sum(len(r.token_ids) for r in admitted) - hits
        self._sample(decoded + admitted, step)
        u = self.policy.usage()
        return StepRecord(
            step, len(self.running), len(self.waiting), u.num_used_tokens, u.num_cached_tokens,
            u.num_evictable_tokens, hits, computed, num_preempted, self.policy.num_evicted_tokens,
            self.recomputed,
        )  # fmt: skip


def run_workload(
    workload: Workload,
    policy: str | CachePolicy,
    pool_tokens: int = 4096,
    block_size: int = 16,
    max_num_seqs: int = 256,
    record: bool = False,
    max_steps: int = 100_000,
) -> RunResult:
    """Drive ``workload`` through one cache until every request finished or was rejected.

    Args:
        workload: The requests.
        policy: A policy name (``POLICIES``) or a CachePolicy instance (then pool_tokens,
            block_size and record are taken from it).
        pool_tokens: Usable KV capacity (tokens).
        block_size: Tokens per block (tokens); ignored by the radix cache.
        max_num_seqs: Requests running at once at most.
        record: Keep a trace of the cache's events (``RunResult.trace``).
        max_steps: Safety stop (steps).

    Returns:
        The RunResult.

    Raises:
        ValueError: Unknown policy, invalid sizes, or max_num_seqs < 1.
        RuntimeError: If the run does not end within max_steps.
    """
    if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int) or max_num_seqs < 1:
        raise ValueError(f"max_num_seqs must be an int >= 1, got {max_num_seqs!r}")
    if isinstance(policy, str):
        policy = make_policy(policy, pool_tokens, block_size, record)
    run = _Run(workload, policy, max_num_seqs)
    steps: list[StepRecord] = []
    step = 0
    while run.busy():
        if step >= max_steps:
            raise RuntimeError(f"workload {workload.name!r} did not finish in {max_steps} steps")
        steps.append(run.step(step))
        step += 1
    records = {rid: run.lives[rid].record for rid in run.order}
    return RunResult(policy.name, workload.name, policy.pool_tokens, policy.block_size, records,
                     steps, policy.trace())  # fmt: skip
