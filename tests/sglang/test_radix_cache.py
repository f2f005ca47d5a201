"""RadixCache and its token pool: hand-checked trees, locks, LRU leaf eviction, replay."""

from __future__ import annotations

import pytest

from kvlab.sglang import RadixCache, RadixEventKind, RadixRecorder, TokenToKVPoolAllocator


def make(size: int = 32) -> tuple[RadixCache, TokenToKVPoolAllocator, RadixRecorder]:
    pool = TokenToKVPoolAllocator(size)
    cache = RadixCache(pool)
    return cache, pool, RadixRecorder.attach(cache)


def put(cache: RadixCache, tokens: tuple[int, ...]) -> int:
    """Insert a fresh request's tokens: allocate slots, insert, free the duplicates."""
    pool = cache.token_to_kv_pool_allocator
    slots = pool.alloc(len(tokens))
    assert slots is not None
    cached = cache.insert(tokens, slots)
    pool.free(slots[:cached])
    return cached


def shape(cache: RadixCache) -> dict[int, tuple]:
    return {n.node_id: (n.parent.node_id, n.key, n.lock_ref) for n in cache.nodes()}


# ---------------------------------------------------------------------------- pool
def test_pool_allocates_from_the_front_and_frees_to_the_back() -> None:
    pool = TokenToKVPoolAllocator(4)
    assert pool.alloc(3) == [1, 2, 3] and pool.available_size() == 1
    assert pool.alloc(2) is None and pool.available_size() == 1
    pool.free([2])
    assert list(pool.free_slots) == [4, 2] and pool.num_used_tokens == 2
    with pytest.raises(ValueError, match="not allocated"):
        pool.free([2])
    with pytest.raises(ValueError, match="need_size"):
        pool.alloc(-1)
    with pytest.raises(ValueError, match="size must be"):
        TokenToKVPoolAllocator(0)


# ---------------------------------------------------------------------------- insert / match
def test_insert_splits_where_keys_diverge() -> None:
    cache, pool, _ = make()
    assert put(cache, (1, 2, 3, 4, 5, 6)) == 0
    assert put(cache, (1, 2, 3, 4, 9)) == 4
    # node 1 kept its id and its tail [5 6]; node 2 is the new head [1 2 3 4]; node 3 is [9]
    assert shape(cache) == {
        2: (0, (1, 2, 3, 4), 0),
        1: (2, (5, 6), 0),
        3: (2, (9,), 0),
    }
    assert cache.evictable_size() == 7 and cache.protected_size() == 0
    assert pool.available_size() == 32 - 7
    assert sorted(cache.all_prefixes()) == [(1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 9)]


def test_match_prefix_returns_slots_and_splits_mid_edge() -> None:
    cache, _, _ = make()
    put(cache, (7, 8, 9, 10))  # slots 1..4
    value, node = cache.match_prefix((7, 8, 5))
    assert value == [1, 2] and node.key == (7, 8) and node.node_id == 2
    assert shape(cache) == {2: (0, (7, 8), 0), 1: (2, (9, 10), 0)}
    value, node = cache.match_prefix((7, 8, 9, 10, 11))
    assert value == [1, 2, 3, 4] and node.node_id == 1
    value, node = cache.match_prefix((99,))
    assert value == [] and node is cache.root_node


def test_insert_rejects_mismatched_lengths_without_change() -> None:
    cache, _, rec = make()
    with pytest.raises(ValueError, match="3 tokens but value 2 slots"):
        cache.insert((1, 2, 3), [1, 2])
    assert list(cache.nodes()) == [] and len(rec) == 0


# ---------------------------------------------------------------------------- locks
def test_lock_ref_moves_tokens_between_evictable_and_protected() -> None:
    cache, _, _ = make()
    put(cache, (1, 2, 3, 4, 5, 6))
    put(cache, (1, 2, 3, 4, 9))
    _, leaf = cache.match_prefix((1, 2, 3, 4, 9))
    assert cache.inc_lock_ref(leaf) == -5  # [9] and [1 2 3 4] become protected
    assert (cache.evictable_size(), cache.protected_size()) == (2, 5)
    _, other = cache.match_prefix((1, 2, 3, 4, 5, 6))
    assert cache.inc_lock_ref(other) == -2  # [1 2 3 4] was already locked
    assert shape(cache)[2][2] == 2
    assert cache.dec_lock_ref(leaf) == 1  # only [9] becomes evictable again
    assert (cache.evictable_size(), cache.protected_size()) == (1, 6)
    with pytest.raises(ValueError, match="not locked"):
        cache.dec_lock_ref(leaf)
    assert (cache.evictable_size(), cache.protected_size()) == (1, 6)


# ---------------------------------------------------------------------------- evict
def test_evict_takes_lru_unlocked_leaves_and_then_their_parents() -> None:
    cache, pool, _ = make(16)
    put(cache, (1, 2, 3, 4, 5, 6))  # t=1
    put(cache, (1, 2, 3, 4, 9))  # t=2: splits; [9] is newer than [5 6]
    put(cache, (7, 7))  # t=3
    _, n77 = cache.match_prefix((7, 7))  # t=4
    cache.inc_lock_ref(n77)
    free_before = pool.available_size()
    assert cache.evict(1) == 2  # [5 6] (t=1) goes first, whole leaf
    assert sorted(cache.all_prefixes()) == [(1, 2, 3, 4, 9), (7, 7)]
    assert cache.evict(3) == 5  # [9], then its parent [1 2 3 4] (now a leaf)
    assert cache.all_prefixes() == [(7, 7)]  # locked: never evicted
    assert cache.evict(10) == 0
    assert pool.available_size() == free_before + 7
    assert (cache.evictable_size(), cache.protected_size()) == (0, 2)


def test_recorder_replays_every_change() -> None:
    cache, _, rec = make(16)
    put(cache, (1, 2, 3))
    put(cache, (1, 2, 4))
    _, node = cache.match_prefix((1, 2, 4), request_id="q")
    cache.inc_lock_ref(node)
    cache.evict(16)
    kinds = [e.kind for e in rec.events]
    assert kinds.count(RadixEventKind.NODE_SPLIT) == 1
    assert kinds.count(RadixEventKind.NODE_EVICTED) == 1  # only [3] is unlocked
    matched = [e for e in rec.events if e.kind is RadixEventKind.MATCHED]
    assert matched[-1].request_id == "q" and matched[-1].num_tokens == 3
    assert rec.state_at(len(rec) - 1) == cache.snapshot()
    assert rec.state_at(-1).nodes == {}
    with pytest.raises(IndexError):
        rec.state_at(len(rec))
