"""Prefix caching through KVCacheManager: the life cycle of shared blocks, exact block ids.

Scenarios follow vLLM 0.22.1's tests/v1/core/test_prefix_caching.py; the expected ids are the
ones vLLM produces for the same calls.
"""

from __future__ import annotations

import pytest
from _core_top_helpers import (  # noqa: F401 (none_hash is an autouse fixture)
    check_invariants,
    full_spec,
    make_request,
    mamba_spec,
    manager,
    none_hash,
    pool_free_ids,
    sw_spec,
)

from kvlab.core.kv_cache_utils import get_block_hash, get_group_id, hash_block_tokens
from kvlab.core.kv_cache_utils import init_none_hash, sha256, sha256_cbor
from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from kvlab.core.request_params import LoRARequest, MultiModalFeatureSpec, PlaceholderRange


def _alloc_prompt(mgr, req, num_new_tokens=None):
    blocks, hit = mgr.get_computed_blocks(req)
    n = req.num_tokens - hit if num_new_tokens is None else num_new_tokens
    return mgr.allocate_slots(req, n, hit, blocks), blocks, hit


@pytest.mark.parametrize("hash_fn", [sha256, sha256_cbor])
def test_prefill_shared_prefix_life_cycle(hash_fn):
    init_none_hash(hash_fn)
    mgr = manager(11, full_spec(16))
    common = [i for i in range(3) for _ in range(16)]
    req0 = make_request("0", common + [3] * 7, 16, hash_fn)
    new, hit_blocks, hit = _alloc_prompt(mgr, req0)
    assert hit == 0 and not hit_blocks.blocks[0]
    assert new.get_block_ids() == ([1, 2, 3, 4],)
    parent = None
    for block_id in (1, 2, 3):
        tokens = tuple(req0.all_token_ids[(block_id - 1) * 16 : block_id * 16])
        expected = hash_block_tokens(hash_fn, parent, tokens)
        key = mgr.block_pool.blocks[block_id].block_hash
        assert get_block_hash(key) == expected and get_group_id(key) == 0
        assert mgr.block_pool.blocks[block_id].ref_cnt == 1
        parent = expected
    assert mgr.block_pool.blocks[4].block_hash is None

    # Hit while the owner still runs: shared blocks get ref_cnt 2.
    req1 = make_request("1", common + [3] * 5, 16, hash_fn)
    new, hit_blocks, hit = _alloc_prompt(mgr, req1)
    assert hit_blocks.get_block_ids() == ([1, 2, 3],) and hit == 48
    assert new.get_block_ids() == ([5],)
    assert [b.ref_cnt for b in hit_blocks.blocks[0]] == [2, 2, 2]
    assert mgr.block_pool.get_num_free_blocks() == 5
    check_invariants(mgr)

    mgr.free(req0)
    mgr.free(req1)
    # Never-used blocks, then each request's tail first; shared blocks freed last by req1.
    assert pool_free_ids(mgr) == [6, 7, 8, 9, 10, 4, 5, 3, 2, 1]

    # Hit on blocks that are free (eviction candidates): touch pulls them out of the queue.
    req2 = make_request("2", common + [3] * 6, 16, hash_fn)
    new, hit_blocks, hit = _alloc_prompt(mgr, req2)
    assert hit_blocks.get_block_ids() == ([1, 2, 3],) and hit == 48
    assert new.get_block_ids() == ([6],)
    assert pool_free_ids(mgr) == [7, 8, 9, 10, 4, 5]
    mgr.free(req2)

    # A miss takes blocks in free-queue order, evicting cached ones on the way.
    req3 = make_request("3", [99] * 160, 16, hash_fn)
    new, _, hit = _alloc_prompt(mgr, req3)
    assert hit == 0
    assert new.get_block_ids() == ([7, 8, 9, 10, 4, 5, 6, 3, 2, 1],)
    assert mgr.block_pool.get_num_free_blocks() == 0
    check_invariants(mgr)


def test_decode_caches_a_block_when_it_fills():
    mgr = manager(11, full_spec(16))
    req0 = make_request("0", [i for i in range(3) for _ in range(16)] + [3] * 7, 16)
    new, _, _ = _alloc_prompt(mgr, req0)
    assert new.get_block_ids() == ([1, 2, 3, 4],)
    stm = mgr.coordinator.single_type_managers[0]
    req0.num_computed_tokens = 55
    req0.append_output_token_ids([8] * 4)
    new = mgr.allocate_slots(req0, 4)
    assert new.get_block_ids() == ([],)
    assert stm.req_to_blocks["0"][-1].block_hash is None
    req0.num_computed_tokens = 59
    req0.append_output_token_ids([7] * 19)
    new = mgr.allocate_slots(req0, 19)
    assert new.get_block_ids() == ([5],)
    assert stm.req_to_blocks["0"][-2].block_hash is not None
    assert stm.req_to_blocks["0"][-1].block_hash is None
    assert stm.num_cached_block["0"] == 4


def test_evict_order_after_two_requests():
    mgr = manager(11, full_spec(16))
    req0 = make_request("0", list(range(5 * 16 + 7)), 16)
    new, _, _ = _alloc_prompt(mgr, req0)
    assert new.get_block_ids() == ([1, 2, 3, 4, 5, 6],)
    req1 = make_request("1", list(range(87, 87 + 48)), 16)
    new, _, _ = _alloc_prompt(mgr, req1)
    assert new.get_block_ids() == ([7, 8, 9],)
    assert mgr.block_pool.get_num_free_blocks() == 1
    mgr.free(req0)
    mgr.free(req1)
    assert pool_free_ids(mgr) == [10, 6, 5, 4, 3, 2, 1, 9, 8, 7]
    req2 = make_request("2", list(range(2 * 16 + 3)), 16)
    new, hit_blocks, hit = _alloc_prompt(mgr, req2)
    assert hit_blocks.get_block_ids() == ([1, 2],) and hit == 32
    assert new.get_block_ids() == ([10],)
    assert mgr.block_pool.get_num_free_blocks() == 7


def test_reused_block_loses_its_old_hash():
    mgr = manager(2, full_spec(16))
    req = make_request("0", list(range(16)), 16)
    _alloc_prompt(mgr, req)
    assert mgr.block_pool.blocks[1].block_hash is not None
    mgr.free(req)
    req = make_request("1", list(range(15)), 16)
    new, _, hit = _alloc_prompt(mgr, req)
    assert hit == 0 and new.get_block_ids() == ([1],)
    assert mgr.block_pool.blocks[1].block_hash is None
    assert len(mgr.block_pool.cached_block_hash_to_block) == 0


def test_hit_blocks_are_not_evicted_for_the_same_request():
    mgr = manager(3, full_spec(16))
    for rid, tokens in (("0", range(16)), ("1", range(16, 32))):
        req = make_request(rid, list(tokens), 16)
        new, _, _ = _alloc_prompt(mgr, req)
        mgr.free(req)
    req2 = make_request("2", list(range(32)), 16)
    new, hit_blocks, hit = _alloc_prompt(mgr, req2)
    assert hit_blocks.get_block_ids() == ([1],) and hit == 16
    assert new.get_block_ids() == ([2],)


def test_caching_disabled_never_hits():
    mgr = manager(5, full_spec(4), enable_caching=False)
    req1 = make_request("1", list(range(10)), 4)
    new, _, _ = _alloc_prompt(mgr, req1)
    assert new.get_block_ids() == ([1, 2, 3],)
    mgr.free(req1)
    assert all(b.block_hash is None for b in mgr.block_pool.blocks)
    req2 = make_request("2", list(range(16)), 4)
    new, hit_blocks, hit = _alloc_prompt(mgr, req2)
    assert hit == 0 and hit_blocks is mgr.empty_kv_cache_blocks
    assert new.get_block_ids() == ([4, 3, 2, 1],)
    req3 = make_request("3", list(range(4)), 4)
    assert mgr.allocate_slots(req3, 4) is None


def test_prompt_logprobs_request_skips_reading_but_still_caches():
    mgr = manager(11, full_spec(16))
    common = [i for i in range(3) for _ in range(16)]
    req0 = make_request("0", common + [3] * 7, 16, prompt_logprobs=5)
    new, _, _ = _alloc_prompt(mgr, req0)
    assert new.get_block_ids() == ([1, 2, 3, 4],)
    req1 = make_request("1", common + [3] * 5, 16)
    new, hit_blocks, _ = _alloc_prompt(mgr, req1)
    assert hit_blocks.get_block_ids() == ([1, 2, 3],) and new.get_block_ids() == ([5],)
    mgr.free(req0)
    mgr.free(req1)
    req2 = make_request("2", common + [3] * 6, 16, prompt_logprobs=5)
    new, hit_blocks, hit = _alloc_prompt(mgr, req2)
    assert hit == 0
    # Duplicates of blocks 1-3 (same hashes, new ids): the cache keeps both copies.
    assert new.get_block_ids() == ([6, 7, 8, 9],)
    assert [b.block_hash for b in new.blocks[0][:3]] == [
        mgr.block_pool.blocks[i].block_hash for i in (1, 2, 3)
    ]
    key = mgr.block_pool.blocks[1].block_hash
    assert list(mgr.block_pool.cached_block_hash_to_block._cache[key]) == [1, 6]


def test_not_enough_free_blocks_leaves_hits_untouched():
    mgr = manager(11, full_spec(16))
    common = [i for i in range(3) for _ in range(16)]
    req0 = make_request("0", common, 16)
    _alloc_prompt(mgr, req0, 48)
    part0 = list(mgr.coordinator.single_type_managers[0].req_to_blocks["0"])
    req1 = make_request("1", common * 2, 16)
    _, hit_blocks, _ = _alloc_prompt(mgr, req1, 48)
    assert hit_blocks.blocks[0] == part0
    part1 = list(mgr.coordinator.single_type_managers[0].req_to_blocks["1"])
    mgr.free(req1)
    assert [b.ref_cnt for b in part1] == [1, 1, 1, 0, 0, 0]
    req2 = make_request("2", [7] * 32, 16)
    _alloc_prompt(mgr, req2)
    assert mgr.block_pool.get_num_free_blocks() == 5
    req3 = make_request("3", common * 3, 16)
    hit_blocks, hit = mgr.get_computed_blocks(req3)
    assert hit_blocks.blocks[0] == part1 and hit == 96
    free_before = pool_free_ids(mgr)
    # 3 evictable hits + 3 new blocks > 5 free blocks.
    assert mgr.allocate_slots(req3, 48, hit, hit_blocks) is None
    assert [b.ref_cnt for b in part1] == [1, 1, 1, 0, 0, 0]
    assert pool_free_ids(mgr) == free_before
    assert "3" not in mgr.coordinator.single_type_managers[0].req_to_blocks
    check_invariants(mgr)


def test_reset_prefix_cache_refused_while_blocks_are_in_use():
    mgr = manager(11, full_spec(16), log_stats=True)
    common = [i for i in range(3) for _ in range(16)]
    req0 = make_request("0", common + [3] * 7, 16)
    assert mgr.allocate_slots(req0, 55).get_block_ids() == ([1, 2, 3, 4],)
    req1 = make_request("1", common + [4] * 7, 16)
    new, hit_blocks, _ = _alloc_prompt(mgr, req1)
    assert len(hit_blocks.blocks[0]) == 3 and new.get_block_ids() == ([5],)
    assert not mgr.reset_prefix_cache()
    assert len(mgr.block_pool.cached_block_hash_to_block) == 3
    assert mgr.make_prefix_cache_stats().reset is False
    mgr.free(req0)
    mgr.free(req1)
    assert mgr.reset_prefix_cache()
    assert len(mgr.block_pool.cached_block_hash_to_block) == 0
    assert all(b.block_hash is None for b in mgr.block_pool.blocks)
    assert mgr.make_prefix_cache_stats().reset is True


def test_prefix_cache_stats_count_queries_hits_and_preemptions():
    mgr = manager(11, full_spec(16), log_stats=True)
    req0 = make_request("0", list(range(40)), 16)
    _alloc_prompt(mgr, req0)
    req1 = make_request("1", list(range(40)), 16)
    req1.num_preemptions = 1
    mgr.get_computed_blocks(req1)
    stats = mgr.make_prefix_cache_stats()
    assert (stats.requests, stats.queries, stats.hits) == (1, 40, 0)
    assert (stats.preempted_requests, stats.preempted_queries, stats.preempted_hits) == (1, 40, 32)
    assert mgr.make_prefix_cache_stats().requests == 0
    assert manager(3, full_spec(16)).make_prefix_cache_stats() is None


def test_multimodal_features_enter_the_hash():
    mgr = manager(11, full_spec(16))
    common = list(range(10)) + [-1] * 6 + [-1] * 4 + list(range(10, 20)) + [-1] * 2 + [-1] * 16
    positions = [PlaceholderRange(offset=11, length=10), PlaceholderRange(offset=30, length=18)]

    def mm_request(rid, tail, last_hash):
        feats = [
            MultiModalFeatureSpec(identifier=h, mm_position=p)
            for h, p in zip(["aaa", "bbb", last_hash], [*positions, PlaceholderRange(48, 7)])
        ]
        return make_request(rid, common + tail, 16, mm_features=feats)

    req0 = mm_request("0", [-1] * 7 + [100] * 4, "ccc")
    new, _, _ = _alloc_prompt(mgr, req0)
    assert new.get_block_ids() == ([1, 2, 3, 4],)
    req1 = mm_request("1", [-1] * 7 + [200] * 5, "ccc")
    hit_blocks, hit = mgr.get_computed_blocks(req1)
    assert hit_blocks.get_block_ids() == ([1, 2, 3],) and hit == 48
    # A different image in the same placeholder tokens misses from its first block on.
    req2 = mm_request("2", [-1] * 7 + [100] * 4, "zzz")
    assert mgr.get_computed_blocks(req2)[1] == 48
    other = [PlaceholderRange(offset=11, length=10)]
    req3 = make_request(
        "3",
        common + [-1] * 7,
        16,
        mm_features=[MultiModalFeatureSpec(identifier="xxx", mm_position=other[0])],
    )
    assert mgr.get_computed_blocks(req3)[1] == 0


def test_cache_salt_separates_caches():
    mgr = manager(11, full_spec(16))
    common = [i for i in range(3) for _ in range(16)]
    req0 = make_request("0", common + [3] * 11, 16, cache_salt="salt1")
    assert _alloc_prompt(mgr, req0)[0].get_block_ids() == ([1, 2, 3, 4],)
    same = make_request("1", common + [4] * 11, 16, cache_salt="salt1")
    assert mgr.get_computed_blocks(same)[0].get_block_ids() == ([1, 2, 3],)
    other = make_request("2", common + [4] * 11, 16, cache_salt="salt2")
    assert mgr.get_computed_blocks(other)[1] == 0
    unsalted = make_request("3", common + [4] * 11, 16)
    assert mgr.get_computed_blocks(unsalted)[1] == 0


@pytest.mark.parametrize("blocks_to_cache", [2, 3, 10])
def test_kv_events_drained_by_take_events(blocks_to_cache):
    mgr = manager(blocks_to_cache + 1, full_spec(16), enable_kv_cache_events=True)
    n = 16 * blocks_to_cache
    req0 = make_request("0", list(range(n)), 16)
    mgr.allocate_slots(req0, n)
    events = mgr.take_events()
    assert len(events) == 1 and isinstance(events[0], BlockStored)
    stored = events[0]
    assert len(stored.block_hashes) == blocks_to_cache and stored.parent_block_hash is None
    assert stored.token_ids == list(range(n)) and stored.block_size == 16
    assert (stored.group_idx, stored.kv_cache_spec_kind) == (0, "full_attention")
    assert stored.kv_cache_spec_sliding_window is None
    assert mgr.take_events() == []
    mgr.free(req0)
    req1 = make_request("1", list(range(n)), 16)
    mgr.allocate_slots(req1, n)  # no lookup: the same blocks are reallocated and evicted
    events = mgr.take_events()
    assert [type(e) for e in events] == [BlockRemoved] * blocks_to_cache + [BlockStored]
    # The free queue gives back the tail first, so removals go from the last block back.
    assert [e.block_hashes[0] for e in events[:-1]] == stored.block_hashes[::-1]
    mgr.free(req1)
    assert mgr.reset_prefix_cache()
    assert [type(e) for e in mgr.take_events()] == [AllBlocksCleared]


def test_kv_events_carry_lora_id_and_group_metadata():
    mgr = manager(10, full_spec(4), sw_spec(4, 128), enable_kv_cache_events=True)
    lora = LoRARequest(lora_name="test_lora", lora_int_id=42)
    req = make_request("lora", list(range(8)), 4, lora_request=lora)
    mgr.allocate_slots(req, 8)
    events = mgr.take_events()
    assert [
        (e.group_idx, e.kv_cache_spec_kind, e.kv_cache_spec_sliding_window) for e in events
    ] == [
        (0, "full_attention", None),
        (1, "sliding_window", 128),
    ]
    assert {e.lora_id for e in events} == {42} and {e.lora_name for e in events} == {"test_lora"}


def test_eagle_drops_the_last_hit_block():
    mgr = manager(10, full_spec(16), use_eagle=True)
    req = make_request("a", [0] * 48, 16)
    _alloc_prompt(mgr, req, 48)
    mgr.free(req)
    # 3 cached blocks, cap 47 tokens -> 2 blocks, EAGLE drops one more.
    blocks, hit = mgr.get_computed_blocks(make_request("b", [0] * 48, 16))
    assert hit == 16 and blocks.get_block_ids() == ([1],)
    blocks, hit = mgr.get_computed_blocks(make_request("c", [0] * 37, 16))
    assert hit == 16 and blocks.get_block_ids() == ([1],)


def test_eagle_with_sliding_window_needs_one_more_block():
    mgr = manager(10, sw_spec(16, 16), use_eagle=True)
    tokens = [0] * 37
    req = make_request("a", tokens, 16)
    _alloc_prompt(mgr, req)
    first_hash = req.block_hashes[0]
    mgr.free(req)
    blocks, hit = mgr.get_computed_blocks(make_request("b", tokens, 16))
    assert hit == 16 and blocks.get_block_ids() == ([1],)
    mgr.evict_blocks({mgr.block_pool.get_cached_block(first_hash, [0])[0].block_id})
    blocks, hit = mgr.get_computed_blocks(make_request("c", tokens, 16))
    assert hit == 0 and blocks.get_block_ids() == ([],)


def test_hybrid_mamba_align_allocation_and_free():
    mgr = manager(30, full_spec(16), mamba_spec(16, mamba_cache_mode="align"))
    req = make_request("0", [i for i in range(3) for _ in range(16)] + [3] * 7, 16)
    new, _, hit = _alloc_prompt(mgr, req)
    assert hit == 0
    # Mamba align: null padding for the 3 finished blocks' states, one running-state block.
    assert new.get_block_ids() == ([1, 2, 3, 4], [0, 0, 0, 5])
    mgr.free(req)
    # Groups are freed in group order, each tail first; null blocks are skipped.
    assert pool_free_ids(mgr)[-5:] == [4, 3, 2, 1, 5]
