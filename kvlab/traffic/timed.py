"""Replay real traffic on the "timed" clock: arrivals at their timestamps, through the Scheduler.

Where the sequence clock serves one request at a time, the timed clock feeds every request to
kvlab's Scheduler (``kvlab.core.sched.Scheduler``: vLLM 0.22.1's FCFS continuous batching,
chunked prefill, a token budget per step, newest-first recompute preemption) at its arrival
time, so concurrent requests hold blocks at once, output tokens fill blocks too, and a full
pool preempts. The simulated clock::

    t = first arrival
    loop:   add every request with arrival_ms <= t         (trace order = FCFS order)
            idle?  t = next arrival_ms                      (jump)
            out = schedule(); update_from_output(one sampled token per scheduled request)
            t += ServiceModel.step_ms(out.total_num_scheduled_tokens)

Service-time model (``ServiceModel``): one step takes ``step_base_ms + step_per_token_ms *
num_scheduled_tokens`` ms (0 ms for a step that schedules nothing). Each request samples
``num_output_tokens`` tokens (the trace's ``output_length``) and then stops, as with
``max_tokens = output_length``; sampled token ids are unique per request, so output blocks are
cached (as vLLM caches them) but never shared across requests.

Hit accounting. ``hit_tokens`` sums, over requests, the prefix-cache hit of each request's
FIRST admission (vLLM's ``Request.num_cached_tokens``, what the OpenAI usage reports as
``cached_tokens``), capped at ``num_tokens - 1`` as in vLLM; ``prompt_tokens`` sums every
prompt (rejected ones too), so ``hit_rate`` has the sequence clock's meaning. When a
preempted request is re-admitted it is looked up again and often hits its own blocks; that
lookup is NOT in ``hit_tokens``. It is where vLLM 0.22.1 puts it: its PrefixCacheStats counts
lookups of previously preempted requests apart (``preempted_queries`` / ``preempted_hits``),
and its ``vllm:prefix_cache_queries`` / ``_hits`` counters leave them out. The summed
PrefixCacheStats of the run are in ``TimedResult.prefix_cache_stats``: note that vLLM counts a
lookup every time a waiting request is tried, so a request that waits for free blocks is
counted once per attempt there (its ``queries`` exceed ``prompt_tokens``).

Rejections: a request that cannot fit in the whole pool even alone, ``ceil((num_prompt_tokens +
num_output_tokens - 1) / block_size) > num_blocks`` (the last sampled token is never
computed), would preempt itself forever; it is rejected at arrival (counted in ``rejected``,
0 hit tokens, its prompt tokens still counted), never given to the scheduler.

Arrival times must be finite, >= 0 and non-decreasing in trace order; an out-of-order
timestamp is an error naming the request, not sorted silently: results are reported in trace
order, and the sequence clock replays that same order (both Mooncake traces are sorted).

Only the ``vllm`` cache has a scheduler in kvlab; ``nano``, ``radix`` and ``infinite`` are
refused on this clock (use the sequence clock for them).

NOTE: the scheduler looks at most at ``max_num_seqs`` waiting requests per step, so only that
many arrived requests are turned into kvlab Requests ahead of time; the rest wait as trace
entries (same decisions, bounded memory when the server falls behind the trace). Stretches of
plain decode steps are advanced without calling ``schedule()`` (``_TimedRun.fast_forward``),
with the same results.

Examples:
    B arrives while A decodes, shares A's two blocks, and is preempted when the 4-block pool
    runs out; it resumes after A finishes (its retries are vLLM's "preempted" lookups):

    >>> from kvlab.traffic import prepare_blocks, read_mooncake_lines
    >>> reqs = read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 600, "hash_ids": [0, 1]}',
    ...     '{"timestamp": 50, "input_length": 1100, "output_length": 600, "hash_ids": [0, 1, 2]}'])
    >>> res = replay_timed(prepare_blocks(reqs, 512), "vllm", 4 * 512)
    >>> res.per_request_hit_tokens, res.preemptions, res.completion_order
    ([0, 1024], 1, ['mc-0', 'mc-1'])
    >>> res.prefix_cache_stats.requests, res.prefix_cache_stats.preempted_requests
    (2, 155)
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kvlab.core.kv_cache_utils import hash_block_tokens
from kvlab.core.hashing import sha256
from kvlab.core.metrics import PrefixCacheStats
from kvlab.traffic.blocks import BlockedTraffic, ensure_none_hash
from kvlab.traffic.replay import CACHES, EvictionCounter, ReplayResult, check_capacity

__all__ = ["ServiceModel", "TimedResult", "replay_timed"]

OUTPUT_TOKEN_BASE = 1 << 40
"""Request i samples token id ``OUTPUT_TOKEN_BASE + i`` every step (unique per request)."""


@dataclass(frozen=True)
class ServiceModel:
    """How long one scheduler step takes: ``step_base_ms + step_per_token_ms * tokens``.

    Defaults: an 8B dense model (Llama-3.1-8B, bf16) tensor-parallel over 4 H100s.
    ``step_base_ms = 5``: a step reads all 16 GB of weights (about 1.2 ms at 4 x 3.35 TB/s)
    plus the all-reduces, kernel launches and the scheduler itself; small-batch decode steps
    of vLLM on such a set-up take a few ms. ``step_per_token_ms = 0.01``: a token costs about
    2 x 8e9 = 16 GFLOP; at 40 % of 4 x 989 TFLOP/s that is 100,000 tokens/s. Attention over
    long contexts and KV reads are left out (they grow with context; the model is linear in
    scheduled tokens only). With vLLM's 8,192-token budget a full step takes 87 ms (94,000
    tokens/s), about twice the Mooncake conversation trace's 41,000 prompt tokens/s.

    Attributes:
        step_base_ms: Fixed cost of a step that schedules anything (ms), >= 0.
        step_per_token_ms: Cost of each scheduled token (ms / token), >= 0.

    Raises:
        ValueError: A negative or non-finite value, or both 0 (the clock would never move).
    """

    step_base_ms: float = 5.0
    step_per_token_ms: float = 0.01

    def __post_init__(self) -> None:
        for name in ("step_base_ms", "step_per_token_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0 (ms), got {v!r}")
        if self.step_base_ms == 0 and self.step_per_token_ms == 0:
            raise ValueError("step_base_ms and step_per_token_ms are both 0; one must be > 0")

    def step_ms(self, num_scheduled_tokens: int) -> float:
        """Duration of a step that computes ``num_scheduled_tokens`` tokens (ms); 0 for none."""
        if num_scheduled_tokens == 0:
            return 0.0
        return self.step_base_ms + self.step_per_token_ms * num_scheduled_tokens


@dataclass
class TimedResult(ReplayResult):
    """A ReplayResult of the timed clock, with the timing and vLLM's own counters.

    Attributes:
        service: The ServiceModel used.
        max_num_batched_tokens: Token budget per step (tokens).
        max_num_seqs: Most running requests (requests).
        num_steps: Scheduler steps run.
        duration_ms: Simulated time from the first arrival to the last finish (ms).
        queueing_delay_ms: Per request (trace order), start of the step that first admitted
            it minus its arrival (ms); NaN for rejected requests.
        completion_order: Request ids in the order they finished.
        prefix_cache_stats: vLLM's PrefixCacheStats summed over every step.
    """

    service: ServiceModel = field(default_factory=ServiceModel)
    max_num_batched_tokens: int = 0
    max_num_seqs: int = 0
    num_steps: int = 0
    duration_ms: float = 0.0
    queueing_delay_ms: list[float] = field(default_factory=list, repr=False)
    completion_order: list[str] = field(default_factory=list, repr=False)
    prefix_cache_stats: PrefixCacheStats = field(default_factory=PrefixCacheStats, repr=False)

    def _served_delays(self) -> list[float]:
        return sorted(d for d in self.queueing_delay_ms if not math.isnan(d))

    @property
    def mean_queueing_delay_ms(self) -> float:
        """Mean queueing delay of the served requests (ms); 0.0 if none."""
        d = self._served_delays()
        return sum(d) / len(d) if d else 0.0

    @property
    def p99_queueing_delay_ms(self) -> float:
        """99th percentile (nearest rank) of the served requests' queueing delay (ms)."""
        d = self._served_delays()
        return d[max(0, math.ceil(0.99 * len(d)) - 1)] if d else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON row of ``kvlab whatif --clock timed``."""
        s = self.prefix_cache_stats
        row = super().to_dict()
        row.update(
            step_base_ms=self.service.step_base_ms,
            step_per_token_ms=self.service.step_per_token_ms,
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_num_seqs=self.max_num_seqs, num_steps=self.num_steps,
            duration_ms=self.duration_ms,
            mean_queueing_delay_ms=self.mean_queueing_delay_ms,
            p99_queueing_delay_ms=self.p99_queueing_delay_ms,
            vllm_prefix_cache_stats={
                "requests": s.requests, "queries": s.queries, "hits": s.hits,
                "preempted_requests": s.preempted_requests,
                "preempted_queries": s.preempted_queries, "preempted_hits": s.preempted_hits,
            },
        )  # fmt: skip
        return row


def _check_args(blocked: BlockedTraffic, cache: str, n: int, budget: Any, seqs: Any) -> None:
    if cache not in CACHES:
        raise ValueError(f"unknown cache {cache!r}; allowed: {', '.join(CACHES)}")
    if cache != "vllm":
        raise ValueError(
            f"only the 'vllm' cache supports the timed clock (it runs kvlab's Scheduler), got "
            f"{cache!r}; replay {cache!r} on the sequence clock"
        )
    for name, v in (("max_num_batched_tokens", budget), ("max_num_seqs", seqs)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if budget < blocked.block_size:
        raise ValueError(
            f"max_num_batched_tokens {budget} is below one block ({blocked.block_size} "
            f"tokens); allowed: >= {blocked.block_size}"
        )
    last = 0.0
    for i, r in enumerate(blocked.requests[:n]):
        t = r.arrival_ms
        if not 0 <= t < math.inf:
            raise ValueError(f"request {i} ({r.request_id}): arrival_ms {t!r} is not a finite "
                             f"number >= 0 (ms since the start of the trace)")  # fmt: skip
        if t < last:
            raise ValueError(
                f"request {i} ({r.request_id}) arrives at {t:g} ms, before request {i - 1} "
                f"({last:g} ms); the timed clock needs timestamps in non-decreasing order "
                f"(sort the trace by timestamp)"
            )
        last = t


def _block_hasher(prompt_hashes: list, block_size: int):
    """Block hasher of a traffic request: the precomputed prompt hashes, then output blocks
    hashed from the request's tokens (Mirrors: kvlab.core.get_request_block_hasher)."""

    def hasher(request: Any) -> list:
        start, end = len(request.block_hashes), request.num_tokens // block_size
        out: list = []
        parent = request.block_hashes[-1] if start else None
        for k in range(start, end):
            if k < len(prompt_hashes):
                h = prompt_hashes[k]
            else:
                tokens = request.all_token_ids[k * block_size : (k + 1) * block_size]
                h = hash_block_tokens(sha256, parent, tokens)
            out.append(h)
            parent = h
        return out

    return hasher


_STAT_FIELDS = ("requests", "queries", "hits", "preempted_requests", "preempted_queries",
                "preempted_hits")  # fmt: skip


def _add_stats(total: PrefixCacheStats, stats: PrefixCacheStats, times: int) -> None:
    """total += stats * times, field by field (vLLM's PrefixCacheStats counters)."""
    for name in _STAT_FIELDS:
        setattr(total, name, getattr(total, name) + times * getattr(stats, name))


class _TimedRun:
    """The state of one timed replay (see the module docstring)."""

    def __init__(self, blocked: BlockedTraffic, n: int, num_blocks: int, res: TimedResult):
        from kvlab.core import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager
        from kvlab.core.sched import Scheduler, SchedulerConfig

        self.b, self.n, self.res = blocked, n, res
        bs = blocked.block_size
        fits = [-(-(r.num_prompt_tokens + r.num_output_tokens - 1) // bs) <= num_blocks
                for r in blocked.requests[:n]]  # fmt: skip
        self.fits = fits
        max_len = max([r.num_prompt_tokens + r.num_output_tokens
                       for r, ok in zip(blocked.requests, fits) if ok] or [1])  # fmt: skip
        cfg = SchedulerConfig(max_num_seqs=res.max_num_seqs,
                              max_num_batched_tokens=res.max_num_batched_tokens,
                              max_model_len=max_len, log_stats=True)  # fmt: skip
        spec = FullAttentionSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype="float32")
        kv = KVCacheConfig(num_blocks + 1, [], [KVCacheGroupSpec(["layer0"], spec)])
        self.counter = EvictionCounter()
        mgr = KVCacheManager(kv, max_model_len=max_len, hash_block_size=bs,
                             max_num_batched_tokens=res.max_num_batched_tokens,
                             log_stats=True, metrics_collector=self.counter)  # fmt: skip
        self.sched = Scheduler(mgr, cfg)
        self.index = {r.request_id: i for i, r in enumerate(blocked.requests[:n])}
        self.pending: deque[int] = deque()  # arrived, not yet given to the scheduler
        self.blocked_head: Any = None  # waiting[0] if it failed to fit in the last step
        self.next_arrival = 0
        res.per_request_hit_tokens = [0] * n
        res.queueing_delay_ms = [math.nan] * n

    def _make_request(self, i: int) -> Any:
        from kvlab.core import Request
        from kvlab.core.request import SamplingParams

        r = self.b.requests[i]
        hasher = _block_hasher(self.b.block_hashes[i], self.b.block_size)
        return Request(r.request_id, [0] * r.num_prompt_tokens,
                       SamplingParams(max_tokens=r.num_output_tokens), None,
                       arrival_time=r.arrival_ms / 1000, block_hasher=hasher)  # fmt: skip

    def arrive(self, t: float) -> int:
        """Take in every request with arrival_ms <= t; returns how many were rejected."""
        reqs, rejected = self.b.requests, 0
        while self.next_arrival < self.n and reqs[self.next_arrival].arrival_ms <= t:
            i = self.next_arrival
            self.next_arrival += 1
            if self.fits[i]:
                self.pending.append(i)
            else:
                rejected += 1
        sched = self.sched
        while self.pending and len(sched.waiting) <= sched.max_num_running_reqs:
            sched.add_request(self._make_request(self.pending.popleft()))
        self.res.rejected += rejected
        return rejected

    def step(self, t: float) -> tuple[float, int]:
        """Run one scheduler step starting at ``t``; returns (its duration in ms, finished)."""
        res, sched = self.res, self.sched
        out = sched.schedule()
        for new in out.scheduled_new_reqs:
            i = self.index[new.req_id]
            res.per_request_hit_tokens[i] = new.num_computed_tokens
            res.queueing_delay_ms[i] = t - self.b.requests[i].arrival_ms
        num_preempted = len(sched.step_log[-1].preempted_req_ids)
        res.preemptions += num_preempted
        sched.step_log.clear()  # NOTE: one record per step would grow without bound
        sampled = {rid: [OUTPUT_TOKEN_BASE + self.index[rid]] for rid in out.num_scheduled_tokens}
        eco = sched.update_from_output(out, sampled)
        stats = eco.scheduler_stats.prefix_cache_stats
        _add_stats(res.prefix_cache_stats, stats, 1)
        done = [o.request_id for o in eco.outputs if o.finish_reason is not None]
        res.completion_order.extend(done)
        res.num_steps += 1
        # The head of the queue was looked up and did not fit (each admission looks up the
        # head; the first that does not fit stops admission), and nothing was freed after.
        resumed = out.scheduled_cached_reqs.resumed_req_ids
        num_admitted = len(out.scheduled_new_reqs) + len(resumed)
        failed = stats.requests + stats.preempted_requests > num_admitted
        self.blocked_head = (sched.waiting[0] if failed and sched.waiting and not done
                             and not num_preempted else None)  # fmt: skip
        return res.service.step_ms(out.total_num_scheduled_tokens), len(done)

    def fast_forward(self, t: float) -> tuple[float, int]:
        """Advance a stretch of plain decode steps without calling ``schedule()``.

        Applies only while every running request decodes (one token each, within the budget)
        and nothing waits, or the head of the waiting queue failed to fit in the last step
        with nothing freed since. Such a step changes the pool only when a request completes a
        block (cache_full_blocks), starts one (allocate), or finishes (free); the steps before
        the first of those, and before the next arrival, change nothing but each request's
        ``num_computed_tokens`` and output tokens, which are advanced here in one go, and, when
        the budget leaves room, the blocked head's lookup, which fails alike every step
        (allocate_slots with full_sequence_must_fit fails before changing anything, whatever
        the budget) and is counted in the PrefixCacheStats once per step. With
        ``c = num_computed_tokens`` a request holds ``ceil(c / block_size)`` blocks, so its
        first such step is ``block_size - 1 - c % block_size`` steps away (0 when c fills its
        blocks), or its last output, whichever is first. Tests check that replays with and
        without it are equal.

        Returns:
            (the time after the skipped steps (ms), how many were skipped).
        """
        sched, bs = self.sched, self.b.block_size
        running = sched.running
        head = sched.waiting[0] if sched.waiting else None
        if head is not self.blocked_head or (head is None and self.pending) or not running:
            return t, 0
        if len(running) > self.res.max_num_batched_tokens:
            return t, 0
        k = math.inf
        for req in running:
            c = req.num_computed_tokens
            if c != req.num_tokens - 1 or c % bs == 0:
                return t, 0
            k = min(k, bs - 1 - c % bs, req.max_tokens - req.num_output_tokens - 1)
            if k == 0:
                return t, 0
        dt = self.res.service.step_ms(len(running))
        nxt = self.next_arrival
        arrival = self.b.requests[nxt].arrival_ms if nxt < self.n else math.inf
        steps = 0
        while steps < k:
            t += dt  # NOTE: one addition per step, as the step-by-step loop does
            steps += 1
            if arrival <= t:
                break
        for req in running:
            req.num_computed_tokens += steps
            req.append_output_token_ids([OUTPUT_TOKEN_BASE + self.index[req.request_id]] * steps)
        budget_left = self.res.max_num_batched_tokens - len(running)
        if head is not None and budget_left > 0 and len(running) < sched.max_num_running_reqs:
            mgr = sched.kv_cache_manager  # its stats were drained by the last update_from_output
            mgr.get_computed_blocks(head)
            _add_stats(self.res.prefix_cache_stats, mgr.make_prefix_cache_stats(), steps)
        sched.prev_step_scheduled_req_ids = {req.request_id for req in running}
        sched.num_steps += steps
        self.res.num_steps += steps
        return t, steps

    def run(self, bar: Any, fast_forward: bool = True) -> None:
        """Arrive, step and jump until every request finished or was rejected."""
        reqs, sched = self.b.requests, self.sched
        t = reqs[0].arrival_ms if self.n else 0.0
        empty = 0
        while self.next_arrival < self.n or self.pending or sched.has_unfinished_requests():
            rejected = self.arrive(t)
            if bar is not None and rejected:
                bar.update(rejected)
            if not sched.has_unfinished_requests():
                if self.next_arrival == self.n:
                    break  # the last arrivals were rejected
                t = max(t, reqs[self.next_arrival].arrival_ms)  # idle: jump to the next arrival
                continue
            if fast_forward:
                t, skipped = self.fast_forward(t)
                if skipped:
                    continue
            dt, done = self.step(t)
            if bar is not None and done:
                bar.update(done)
            empty = empty + 1 if dt == 0 else 0
            if empty > 2:  # cannot happen: every admitted request fits the pool alone
                raise RuntimeError(f"the timed replay stalled at {t} ms (3 empty steps)")
            t += dt
        self.res.duration_ms = t - (reqs[0].arrival_ms if self.n else 0.0)
        self.res.evicted_blocks = self.counter.num_evicted_blocks


def replay_timed(
    blocked: BlockedTraffic,
    cache: str,
    capacity_tokens: int,
    *,
    service: ServiceModel | None = None,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 1024,
    progress: bool | None = False,
    stop_after: int | None = None,
    fast_forward: bool = True,
) -> TimedResult:
    """Replay ``blocked`` on the timed clock through kvlab's Scheduler (see the module docstring).

    Defaults of the budget and seats: what ``vllm serve`` 0.22.1 picks on an H100
    (max_num_batched_tokens 8192, max_num_seqs 1024; vllm/engine/arg_utils.py).

    Args:
        blocked: The traffic at one block size (``prepare_blocks``); arrival times in ms.
        cache: Only "vllm" (kvlab.core, exact).
        capacity_tokens: Pool size (tokens), at least one block.
        service: The step-time model (default ``ServiceModel()``).
        max_num_batched_tokens: Token budget per step (tokens), at least one block.
        max_num_seqs: Most running requests at once.
        progress: A tqdm bar of requests finished or rejected: True always, None only on a
            terminal, False none.
        stop_after: Replay only the first ``stop_after`` requests (None = all).
        fast_forward: Advance plain decode stretches in one go (``_TimedRun.fast_forward``;
            same result, fewer scheduler calls); False calls ``schedule()`` every step.

    Returns:
        The TimedResult (clock "timed").

    Raises:
        ValueError: An unknown cache or one other than "vllm"; a capacity or budget below one
            block; max_num_seqs < 1; an arrival time negative, not finite, or earlier than
            the previous request's (the timed clock does not reorder the trace).
    """
    n = len(blocked) if stop_after is None else min(stop_after, len(blocked))
    _check_args(blocked, cache, n, max_num_batched_tokens, max_num_seqs)
    bs = blocked.block_size
    capacity = check_capacity(capacity_tokens, bs)
    res = TimedResult(cache, capacity, bs, "timed", service=service or ServiceModel(),
                      max_num_batched_tokens=max_num_batched_tokens,
                      max_num_seqs=max_num_seqs)  # fmt: skip
    res.prompt_tokens = sum(r.num_prompt_tokens for r in blocked.requests[:n])
    ensure_none_hash()
    run = _TimedRun(blocked, n, capacity // bs, res)
    bar = None
    if progress is not False:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, desc=f"timed {cache} @ {capacity:,} tokens (bs {bs})", unit="req",
                   leave=False, disable=None if progress is None else False)  # fmt: skip
    try:
        run.run(bar, fast_forward)
    finally:
        if bar is not None:
            bar.close()
    res.hit_tokens = sum(res.per_request_hit_tokens)
    return res
