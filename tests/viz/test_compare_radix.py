"""render_radix_tree: the radix cache drawn as a tree, locks and LRU order marked."""

from __future__ import annotations

import pytest

from kvlab.sglang import RadixCache, RadixRecorder, TokenToKVPoolAllocator
from kvlab.viz.compare_radix import render_radix_tree
from kvlab.viz.terminal import to_text


def _cache() -> tuple[RadixCache, RadixRecorder]:
    pool = TokenToKVPoolAllocator(32)
    cache = RadixCache(pool)
    rec = RadixRecorder.attach(cache)
    for tokens in ((1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 9), (7,) * 10):
        slots = pool.alloc(len(tokens))
        pool.free(slots[: cache.insert(tokens, slots)])
    _, node = cache.match_prefix((1, 2, 3, 4, 5, 6))
    cache.inc_lock_ref(node)
    return cache, rec


def test_tree_text() -> None:
    cache, _ = _cache()
    assert to_text(render_radix_tree(cache, max_tokens=4)).splitlines() == [
        "radix tree · 4 nodes · 17 tokens (evictable 11, protected 6) · pool 32 slots, 15 free",
        "root",
        "├── #2 [1 2 3 4] 4 tok · lock 1 · t=4",
        "│   ├── #1 [5 6] 2 tok · lock 1 · t=4",
        "│   └── #3 [9] 1 tok · lock 0 · t=2 · evict #1",
        "└── #4 [7 7 7 7 …] 10 tok · lock 0 · t=3 · evict #2",
    ]


def test_replayed_states_and_limits() -> None:
    cache, rec = _cache()
    added = next(e.seq for e in rec.events if e.kind.value == "NODE_ADDED")
    first = to_text(render_radix_tree(rec.state_at(added)))
    assert "1 nodes · 6 tokens (evictable 6, protected 0)" in first and "#1 [1 2 3 4 5 6]" in first
    cut = to_text(render_radix_tree(cache.snapshot(), max_nodes=2))
    assert "… 2 more nodes not drawn" in cut and "#4" not in cut
    with pytest.raises(ValueError, match="max_tokens"):
        render_radix_tree(cache, max_tokens=0)
    with pytest.raises(TypeError, match="RadixSnapshot"):
        render_radix_tree(object())
