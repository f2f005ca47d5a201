"""Sampled block residency metrics: lifetime, idle time before eviction, reuse gaps.

Mirrors: vllm/v1/core/kv_cache_metrics.py (BlockMetricsState, KVCacheMetricsCollector).
Differs: the random source and the clock are injectable (``rng``, ``clock_ns``) so tests can
be exact; by default they are the ``random`` module and ``time.monotonic_ns``, as in vLLM
(looked up at each call, so ``unittest.mock.patch("time.monotonic_ns")`` works as on vLLM).
An invalid sample_rate raises InvalidSampleRateError, both a ValueError and an AssertionError
(vLLM asserts).

BlockPool calls the hooks: ``on_block_allocated`` (get_new_blocks; a sampled block starts
being tracked), ``on_block_accessed`` (touch), ``on_block_evicted`` (every
``_maybe_evict_cached_block`` call, cached or not: an eviction sample is taken only for a
tracked block), ``reset`` (reset_prefix_cache).

Examples:
    >>> import random
    >>> ticks = iter(range(0, 10**10, 10**9))          # a clock advancing 1 s per read
    >>> c = KVCacheMetricsCollector(1.0, rng=random.Random(0), clock_ns=lambda: next(ticks))
    >>> class B: block_id = 5
    >>> c.on_block_allocated(B)    # born at t=0
    >>> c.on_block_accessed(B)     # accessed at t=1
    >>> c.on_block_evicted(B)      # lifetime read at t=2, idle read at t=3 (3 - 1)
    >>> c.drain_events()
    [KVCacheEvictionEvent(lifetime_seconds=2.0, idle_seconds=2.0, reuse_gaps_seconds=())]
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kvlab.core.metrics import KVCacheEvictionEvent



class InvalidSampleRateError(ValueError, AssertionError):
    """sample_rate outside (0, 1]: a ValueError for kvlab's callers, an AssertionError as vLLM's."""


def _monotonic_ns() -> int:
    return time.monotonic_ns()  # NOTE: looked up per call, so patching time.monotonic_ns works


if TYPE_CHECKING:
    from kvlab.core.kv_cache_utils import KVCacheBlock

__all__ = ["BlockMetricsState", "InvalidSampleRateError", "KVCacheMetricsCollector"]


class _Rng(Protocol):
    def random(self) -> float: ...


class BlockMetricsState:
    """Birth time, last access and the last 4 access times of one sampled block.

    Mirrors: vllm/v1/core/kv_cache_metrics.py::BlockMetricsState.

    Args:
        clock_ns: Monotonic clock in nanoseconds.
    """

    def __init__(self, clock_ns: Callable[[], int] = _monotonic_ns) -> None:
        self._clock_ns = clock_ns
        now_ns = clock_ns()
        self.birth_time_ns = now_ns
        self.last_access_ns = now_ns
        self.access_history: deque[int] = deque(maxlen=4)  # NOTE: bounded, as vLLM

    def record_access(self) -> None:
        """Note an access now."""
        now_ns = self._clock_ns()
        self.last_access_ns = now_ns
        self.access_history.append(now_ns)

    def get_lifetime_seconds(self) -> float:
        """Seconds since the block was allocated."""
        return (self._clock_ns() - self.birth_time_ns) / 1e9

    def get_idle_time_seconds(self) -> float:
        """Seconds since the last access (or allocation)."""
        return (self._clock_ns() - self.last_access_ns) / 1e9

    def get_reuse_gaps_seconds(self) -> list[float]:
        """Gaps between consecutive recorded accesses (seconds); empty with < 2 accesses."""
        history = list(self.access_history)
        return [(history[i] - history[i - 1]) / 1e9 for i in range(1, len(history))]


class KVCacheMetricsCollector:
    """Tracks a random sample of blocks from allocation to eviction.

    Mirrors: vllm/v1/core/kv_cache_metrics.py::KVCacheMetricsCollector.

    Args:
        sample_rate: Probability that an allocated block is tracked, in (0, 1].
        rng: Object with ``random() -> float`` (default: the ``random`` module).
        clock_ns: Monotonic clock in nanoseconds (default: ``time.monotonic_ns``).

    Raises:
        InvalidSampleRateError: (a ValueError and an AssertionError) If sample_rate is not in
            (0, 1].
    """

    def __init__(
        self,
        sample_rate: float = 0.01,
        rng: _Rng | None = None,
        clock_ns: Callable[[], int] = _monotonic_ns,
    ) -> None:
        if not 0 < sample_rate <= 1.0:
            raise InvalidSampleRateError(f"sample_rate must be in (0, 1.0], got {sample_rate}")
        self.sample_rate = sample_rate
        self._rng = rng if rng is not None else random
        self._clock_ns = clock_ns
        self.block_metrics: dict[int, BlockMetricsState] = {}
        self._eviction_events: list[KVCacheEvictionEvent] = []

    def should_sample_block(self) -> bool:
        """One draw: ``rng.random() < sample_rate``."""
        return self._rng.random() < self.sample_rate

    def on_block_allocated(self, block: KVCacheBlock) -> None:
        """Maybe start tracking ``block`` (replaces any earlier state of the same block_id)."""
        if self.should_sample_block():
            self.block_metrics[block.block_id] = BlockMetricsState(self._clock_ns)

    def on_block_accessed(self, block: KVCacheBlock) -> None:
        """Record a cache hit on ``block`` if it is tracked."""
        metrics = self.block_metrics.get(block.block_id)
        if metrics is not None:
            metrics.record_access()

    def on_block_evicted(self, block: KVCacheBlock) -> None:
        """Stop tracking ``block``; if it was tracked, keep a KVCacheEvictionEvent."""
        metrics = self.block_metrics.pop(block.block_id, None)
        if metrics is None:
            return
        self._eviction_events.append(
            KVCacheEvictionEvent(
                lifetime_seconds=metrics.get_lifetime_seconds(),
                idle_seconds=metrics.get_idle_time_seconds(),
                reuse_gaps_seconds=tuple(metrics.get_reuse_gaps_seconds()),
            )
        )

    def reset(self) -> None:
        """Forget all tracked blocks and undrained samples (on prefix cache reset)."""
        self.block_metrics.clear()
        self._eviction_events.clear()

    def drain_events(self) -> list[KVCacheEvictionEvent]:
        """Return and clear the eviction samples taken so far."""
        events, self._eviction_events = self._eviction_events, []
        return events
