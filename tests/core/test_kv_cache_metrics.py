"""KVCacheMetricsCollector: sampling, lifetime, idle time, reuse gaps (manual clock and RNG)."""

from __future__ import annotations

import random

import pytest

from kvlab.core.block_pool import BlockPool
from kvlab.core.kv_cache_utils import KVCacheBlock
from kvlab.core.kv_cache_metrics import BlockMetricsState, KVCacheMetricsCollector
from kvlab.core.metrics import CachingMetrics, KVCacheEvictionEvent, PrefixCacheStats


class Clock:
    """A manual clock in nanoseconds."""

    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += int(seconds * 1e9)


class FixedRng:
    def __init__(self, values):
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


def test_sample_rate_validation():
    for bad in (0, -0.1, 1.5):
        with pytest.raises(ValueError, match="sample_rate"):
            KVCacheMetricsCollector(bad)
    assert KVCacheMetricsCollector(1.0).sample_rate == 1.0


def test_sampling_uses_rng_draw_below_rate():
    c = KVCacheMetricsCollector(0.5, rng=FixedRng([0.4, 0.5, 0.9]))
    for i in range(3):
        c.on_block_allocated(KVCacheBlock(i))
    assert sorted(c.block_metrics) == [0]  # 0.5 is not < 0.5


def test_lifetime_idle_and_reuse_gaps():
    clock = Clock()
    c = KVCacheMetricsCollector(1.0, rng=random.Random(0), clock_ns=clock)
    block = KVCacheBlock(3)
    c.on_block_allocated(block)  # t = 0
    for gap in (1, 2, 3, 4, 5):  # accesses at t = 1, 3, 6, 10, 15
        clock.advance(gap)
        c.on_block_accessed(block)
    clock.advance(6)  # evicted at t = 21
    c.on_block_evicted(block)
    c.on_block_evicted(block)  # not tracked any more: no second sample
    # history keeps the last 4 accesses (3, 6, 10, 15): gaps 3, 4, 5
    assert c.drain_events() == [KVCacheEvictionEvent(21.0, 6.0, (3.0, 4.0, 5.0))]
    assert c.drain_events() == []


def test_reset_clears_tracking_and_samples():
    clock = Clock()
    c = KVCacheMetricsCollector(1.0, clock_ns=clock)
    a, b = KVCacheBlock(1), KVCacheBlock(2)
    c.on_block_allocated(a)
    c.on_block_allocated(b)
    c.on_block_evicted(a)
    c.reset()
    assert c.block_metrics == {} and c.drain_events() == []
    c.on_block_accessed(b)  # untracked after reset: ignored
    assert c.block_metrics == {}


def test_block_metrics_state_single_access_has_no_gaps():
    clock = Clock()
    state = BlockMetricsState(clock)
    clock.advance(2)
    state.record_access()
    assert state.get_reuse_gaps_seconds() == [] and state.get_idle_time_seconds() == 0.0
    assert state.get_lifetime_seconds() == 2.0


def test_collector_through_block_pool_eviction():
    clock = Clock()
    c = KVCacheMetricsCollector(1.0, rng=random.Random(1), clock_ns=clock)
    pool = BlockPool(num_gpu_blocks=3, enable_caching=True, hash_block_size=2, metrics_collector=c)
    blocks = pool.get_new_blocks(2)  # t = 0, both sampled
    clock.advance(1)
    pool.touch([blocks[0]])  # t = 1
    pool.free_blocks(reversed(blocks))  # block 2 -> free; block 1 still held once
    pool.free_blocks([blocks[0]])  # queue: 2, 1
    clock.advance(2)
    pool.get_new_blocks(2)  # reuses 2 then 1 at t = 3: both samples are taken
    assert c.drain_events() == [
        KVCacheEvictionEvent(3.0, 3.0, ()),
        KVCacheEvictionEvent(3.0, 2.0, ()),
    ]
    assert sorted(c.block_metrics) == [1, 2]  # tracked again from their new allocation


def test_prefix_cache_stats_and_caching_metrics_window():
    stats = PrefixCacheStats()
    stats.record(num_tokens=20, num_hits=9, preempted=False)
    stats.record(num_tokens=8, num_hits=8, preempted=True)
    assert (stats.requests, stats.queries, stats.hits) == (1, 20, 9)
    assert (stats.preempted_requests, stats.preempted_queries, stats.preempted_hits) == (1, 8, 8)
    m = CachingMetrics(max_recent_requests=5)
    assert m.hit_rate == 0.0 and m.empty
    m.observe(stats)
    assert m.hit_rate == 0.45
    m.observe(PrefixCacheStats(requests=0))  # empty updates are not kept
    m.observe(PrefixCacheStats(requests=4, queries=80, hits=16))
    assert m.hit_rate == 0.25
    m.observe(PrefixCacheStats(requests=1, queries=10, hits=2))  # (20, 9) falls out
    assert (m.aggregated_requests, m.aggregated_query_total, m.aggregated_query_hit) == (5, 90, 18)
    m.observe(PrefixCacheStats(requests=11, queries=20, hits=10))  # only the newest survives
    assert (m.aggregated_requests, m.hit_rate) == (11, 0.5)
    m.observe(PrefixCacheStats(reset=True, requests=1, queries=4, hits=1))
    assert (m.aggregated_requests, m.hit_rate) == (1, 0.25)
