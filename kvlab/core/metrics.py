"""Prefix-cache hit statistics and eviction samples.

Mirrors: vllm/v1/metrics/stats.py (BaseCacheStats, PrefixCacheStats, CachingMetrics,
KVCacheEvictionEvent). Only the cache-related part of that module; vLLM's scheduler and
iteration stats are not mirrored.

Examples:
    >>> stats = PrefixCacheStats()
    >>> stats.record(num_tokens=48, num_hits=32, preempted=False)
    >>> stats.record(num_tokens=16, num_hits=16, preempted=True)
    >>> (stats.requests, stats.queries, stats.hits, stats.preempted_hits)
    (1, 48, 32, 16)
    >>> m = CachingMetrics(); m.observe(stats); m.hit_rate
    0.6666666666666666
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["BaseCacheStats", "CachingMetrics", "KVCacheEvictionEvent", "PrefixCacheStats"]


@dataclass
class BaseCacheStats:
    """Cache hit counts of one scheduler step. Mirrors vllm/v1/metrics/stats.py::BaseCacheStats.

    Attributes:
        reset: Whether the cache was reset before this update.
        requests: Requests counted.
        queries: Tokens looked up (tokens).
        hits: Tokens found in the cache (tokens).
    """

    reset: bool = False
    requests: int = 0
    queries: int = 0
    hits: int = 0


@dataclass
class PrefixCacheStats(BaseCacheStats):
    """Prefix-cache hits, with previously preempted requests counted apart.

    Mirrors: vllm/v1/metrics/stats.py::PrefixCacheStats.

    Attributes:
        preempted_requests: Resumed (previously preempted) requests counted.
        preempted_queries: Their looked-up tokens (tokens).
        preempted_hits: Their hit tokens (tokens).
    """

    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    def record(self, num_tokens: int, num_hits: int, preempted: bool) -> None:
        """Count one request's lookup: ``num_tokens`` queried, ``num_hits`` found (tokens)."""
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hits


class CachingMetrics:
    """Hit rate over the most recent ``max_recent_requests`` requests.

    Mirrors: vllm/v1/metrics/stats.py::CachingMetrics (the newest update is always kept).

    Args:
        max_recent_requests: Window size (requests).
    """

    def __init__(self, max_recent_requests: int = 1000) -> None:
        self.max_recent_requests = max_recent_requests
        self.aggregated_requests = 0
        self.aggregated_query_total = 0
        self.aggregated_query_hit = 0
        self.query_queue: deque[tuple[int, int, int]] = deque()

    def observe(self, stats: BaseCacheStats) -> None:
        """Add one update; a ``reset`` update clears the window first; empty updates are skipped."""
        if stats.reset:
            self.reset()
        if stats.requests == 0:
            return
        self.query_queue.append((stats.requests, stats.queries, stats.hits))
        self.aggregated_requests += stats.requests
        self.aggregated_query_total += stats.queries
        self.aggregated_query_hit += stats.hits
        while len(self.query_queue) > 1 and self.aggregated_requests > self.max_recent_requests:
            old_requests, old_queries, old_hits = self.query_queue.popleft()
            self.aggregated_requests -= old_requests
            self.aggregated_query_total -= old_queries
            self.aggregated_query_hit -= old_hits

    def reset(self) -> None:
        """Forget everything observed."""
        self.aggregated_requests = 0
        self.aggregated_query_total = 0
        self.aggregated_query_hit = 0
        self.query_queue.clear()

    @property
    def empty(self) -> bool:
        """True if no request is in the window."""
        return self.aggregated_requests == 0

    @property
    def hit_rate(self) -> float:
        """Hit tokens / queried tokens over the window (0.0 when nothing was queried)."""
        if self.aggregated_query_total == 0:
            return 0.0
        return self.aggregated_query_hit / self.aggregated_query_total


@dataclass
class KVCacheEvictionEvent:
    """One sampled block's life, taken when it was evicted.

    Mirrors: vllm/v1/metrics/stats.py::KVCacheEvictionEvent.

    Attributes:
        lifetime_seconds: From allocation to eviction (seconds).
        idle_seconds: From the last access to eviction (seconds).
        reuse_gaps_seconds: Gaps between the last (up to 4) accesses (seconds).
    """

    lifetime_seconds: float
    idle_seconds: float
    reuse_gaps_seconds: tuple[float, ...]
