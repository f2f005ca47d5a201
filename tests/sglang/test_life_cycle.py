"""SGLang 0.5.23's request life cycle around the radix tree, hand-checked: an allocation evicts
only the shortfall, a request's KV enters the tree through checkpoint (insert, split at the
prompt's end, free duplicates, match again, move the lock), release frees the rest.

The same life cycle against SGLang's own code: test_vs_sglang.py."""

from __future__ import annotations

import pytest

from kvlab.compare import RadixPolicy, Workload, WorkloadRequest, run_workload
from kvlab.sglang import (
    RadixCache,
    Req,
    TokenToKVPoolAllocator,
    checkpoint_kv_cache,
    evict_from_tree_cache,
    release_kv_cache,
)


def make(size: int) -> tuple[RadixCache, TokenToKVPoolAllocator]:
    pool = TokenToKVPoolAllocator(size)
    return RadixCache(pool), pool


def admit(cache: RadixCache, rid: str, prompt: tuple[int, ...], outputs=()) -> Req:
    """What RadixPolicy.admit does: match all but the last token, lock, evict, allocate."""
    tokens = list(prompt) + list(outputs)
    prefix, node = cache.match_prefix(tokens[:-1], rid)
    cache.inc_lock_ref(node)
    need = len(tokens) - len(prefix)
    evict_from_tree_cache(cache, need)
    slots = cache.token_to_kv_pool_allocator.alloc(need)
    assert slots is not None
    return Req(rid, list(prompt), list(outputs), list(prefix) + slots, len(prefix), node)


def finish(cache: RadixCache, prompt: tuple[int, ...]) -> Req:
    req = admit(cache, f"r{prompt}", prompt)
    checkpoint_kv_cache(req, cache, up_to=len(prompt))
    release_kv_cache(req, cache, checkpoint=True)
    return req


def shape(cache: RadixCache) -> list[tuple]:
    return sorted((cache.path_key(n), n.key, n.value, n.lock_ref) for n in cache.nodes())


# ---------------------------------------------------------------------------- eviction
def test_an_allocation_evicts_only_the_shortfall() -> None:
    cache, pool = make(10)
    finish(cache, (1, 2, 3))  # slots 1-3, the LRU leaf
    finish(cache, (4, 5, 6, 7))  # slots 4-7
    assert pool.available_size() == 3 and cache.evictable_size() == 7
    # 5 wanted, 3 free: the tree is asked for 2 and gives its LRU leaf (3 tokens), nothing more
    assert pool.evict_to_free_tokens(cache, 5) == 3
    assert cache.all_prefixes() == [(4, 5, 6, 7)]
    assert list(pool.free_slots) == [8, 9, 10, 1, 2, 3]
    assert pool.evict_to_free_tokens(cache, 6) == 0  # enough free: the tree is not asked
    assert pool.evict_to_free_tokens(None, 50) == 0
    assert evict_from_tree_cache(cache, 7) == 4  # 1 missing: the whole leaf [4 5 6 7] goes
    assert cache.all_prefixes() == [] and pool.available_size() == 10
    with pytest.raises(ValueError, match=r"num_tokens must be an int >= 0 \(tokens\), got -1"):
        pool.evict_to_free_tokens(cache, -1)


def test_shortfall_eviction_keeps_what_the_whole_amount_would_drop() -> None:
    # 10 slots: a and b stay cached (8 tokens); c needs 5 with 2 free: only a (the LRU) goes,
    # so d hits b's 4 tokens. Evicting the whole 5 would have dropped b too (d: 0 hit).
    reqs = [WorkloadRequest("a", (1, 2, 3, 4), 1, 0, (90,)),
            WorkloadRequest("b", (6, 7, 8, 9), 1, 1, (91,)),
            WorkloadRequest("c", (10, 11, 12, 13, 14), 1, 2, (92,)),
            WorkloadRequest("d", (6, 7, 8, 9, 15), 1, 3, (93,))]  # fmt: skip
    policy = RadixPolicy(10)
    run = run_workload(Workload("shortfall", reqs), policy)
    assert [run.requests[r].first_hit_tokens for r in "abcd"] == [0, 0, 0, 4]
    assert policy.num_evicted_tokens == 4
    assert sorted(policy.cache.all_prefixes()) == [(6, 7, 8, 9, 15), (10, 11, 12, 13, 14)]


# ---------------------------------------------------------------------------- checkpoint
def test_checkpoint_frees_duplicates_and_moves_the_lock() -> None:
    cache, pool = make(16)
    a, b = admit(cache, "a", (1, 2, 3)), admit(cache, "b", (1, 2, 3))  # same step: both miss
    assert (a.kv_indices, b.kv_indices) == ([1, 2, 3], [4, 5, 6])
    checkpoint_kv_cache(a, cache, up_to=3)
    checkpoint_kv_cache(b, cache, up_to=3)  # the tree keeps a's slots: b's go back
    assert b.kv_indices == [1, 2, 3] and b.cache_protected_len == 3
    assert list(pool.free_slots)[-3:] == [4, 5, 6] and pool.available_size() == 13
    assert a.last_node is b.last_node and a.last_node.lock_ref == 2
    assert (cache.evictable_size(), cache.protected_size()) == (0, 3)
    release_kv_cache(a, cache, checkpoint=True)
    assert (a.last_node, a.kv_indices, b.last_node.lock_ref) == (None, [], 1)
    b.output_ids.append(9)
    b.kv_indices += pool.alloc(1)  # decode: the KV of token 9 in slot 7
    release_kv_cache(b, cache, checkpoint=True)
    assert shape(cache) == [((1, 2, 3), (1, 2, 3), [1, 2, 3], 0),
                            ((1, 2, 3, 9), (9,), [7], 0)]  # fmt: skip
    assert (cache.evictable_size(), cache.protected_size(), pool.available_size()) == (4, 0, 12)


def test_checkpoint_splits_a_readmitted_request_at_its_prompt() -> None:
    # A request retracted after two outputs is prefilled again with prompt + outputs: the
    # checkpoint cuts its leaf where the prompt ends, so eviction can drop the outputs alone.
    cache, pool = make(16)
    req = admit(cache, "r", (1, 2, 3), outputs=(7, 8))
    checkpoint_kv_cache(req, cache, up_to=5)
    assert shape(cache) == [((1, 2, 3), (1, 2, 3), [1, 2, 3], 1),
                            ((1, 2, 3, 7, 8), (7, 8), [4, 5], 1)]  # fmt: skip
    assert req.last_node.key == (7, 8)
    release_kv_cache(req, cache, checkpoint=True)
    assert cache.evict(1) == 2  # the outputs' leaf only
    assert cache.match_prefix((1, 2, 3, 4))[0] == [1, 2, 3]


def test_a_retracted_request_frees_its_own_slots_and_keeps_the_matched_prefix() -> None:
    cache, pool = make(16)
    finish(cache, (1, 2, 3, 4))
    req = admit(cache, "r", (1, 2, 3, 4, 5, 6))  # hits 4, owns 2
    assert (req.kv_indices, req.cache_protected_len) == ([1, 2, 3, 4, 5, 6], 4)
    release_kv_cache(req, cache, checkpoint=False)
    assert cache.all_prefixes() == [(1, 2, 3, 4)] and cache.protected_size() == 0
    assert list(pool.free_slots)[-2:] == [5, 6] and pool.available_size() == 12


def test_bad_calls_change_nothing() -> None:
    cache, pool = make(8)
    req = admit(cache, "r", (1, 2, 3))
    before = (shape(cache), list(pool.free_slots), list(req.kv_indices))
    with pytest.raises(ValueError, match=r"in 0\.\.3 \(tokens with KV\), got 4"):
        checkpoint_kv_cache(req, cache, up_to=4)
    with pytest.raises(ValueError, match="up_to must be an int"):
        checkpoint_kv_cache(req, cache, up_to=True)
    checkpoint_kv_cache(req, cache, up_to=3)
    with pytest.raises(ValueError, match="up_to 2 is below the 3 tokens the tree already owns"):
        checkpoint_kv_cache(req, cache, up_to=2)
    release_kv_cache(req, cache, checkpoint=False)
    after = (shape(cache), list(pool.free_slots))
    with pytest.raises(ValueError, match="request 'r' holds no lock"):
        release_kv_cache(req, cache, checkpoint=True)
    assert (shape(cache), list(pool.free_slots)) == after != before[:2]
