"""Coordinators: which one is built, hybrid attention groups, and the fixed-point hit search.

Hybrid scenarios follow vLLM 0.22.1's tests/v1/core/test_prefix_caching.py (full + sliding
window (+ a second window), targeted evictions, EAGLE, mixed block sizes); the expected hit
lengths and block ids are vLLM's.
"""

from __future__ import annotations

import pytest
from _core_top_helpers import (  # noqa: F401 (none_hash is an autouse fixture)
    ListRecorder,
    chunked_spec,
    config,
    full_spec,
    make_request,
    mamba_spec,
    manager,
    none_hash,
    sw_spec,
)

from kvlab.core.kv_cache_coordinator import (
    HybridKVCacheCoordinator,
    KVCacheCoordinatorNoPrefixCache,
    UnitaryKVCacheCoordinator,
    get_kv_cache_coordinator,
)
from kvlab.core.kv_cache_utils import make_block_hash_with_group_id
from kvlab.core.single_type_kv_cache_manager import FullAttentionManager, SlidingWindowManager


def _coordinator(cfg, enable_caching=True, use_eagle=False, hash_block_size=16, **kw):
    return get_kv_cache_coordinator(
        kv_cache_config=cfg,
        max_model_len=8192,
        max_num_batched_tokens=8192,
        use_eagle=use_eagle,
        enable_caching=enable_caching,
        enable_kv_cache_events=False,
        dcp_world_size=kw.pop("dcp_world_size", 1),
        pcp_world_size=kw.pop("pcp_world_size", 1),
        hash_block_size=hash_block_size,
    )


def _hit_after_evicting(mgr, request_id, tokens, keys, block_size=16):
    """Hide ``keys`` from the cache, look up, put them back (as vLLM's test does)."""
    cache = mgr.block_pool.cached_block_hash_to_block._cache
    saved = {k: cache.pop(k) for k in keys}
    req = make_request(request_id, tokens, block_size)
    blocks, hit = mgr.get_computed_blocks(req)
    cache.update(saved)
    assert all(len(g) * block_size == hit for g in blocks.blocks)
    return blocks, hit


# ----------------------------------------------------------------------------- selection
def test_factory_picks_the_coordinator():
    one = config(10, full_spec(16))
    two = config(10, full_spec(16), sw_spec(16, 32))
    assert type(_coordinator(one)) is UnitaryKVCacheCoordinator
    assert type(_coordinator(two)) is HybridKVCacheCoordinator
    assert type(_coordinator(two, enable_caching=False)) is KVCacheCoordinatorNoPrefixCache
    empty = _coordinator(config(10), enable_caching=False)
    assert empty.find_longest_cache_hit([], 100) == ((), 0)
    assert empty.get_num_common_prefix_blocks("x") == []


def test_coordinator_rejects_bad_configs():
    with pytest.raises(ValueError, match="hash_block_size == block_size"):
        _coordinator(config(10, full_spec(16)), hash_block_size=8)
    with pytest.raises(ValueError, match="at least two distinct"):
        _coordinator(config(10, full_spec(16), full_spec(16)))
    with pytest.raises(ValueError, match="multiple of hash_block_size"):
        _coordinator(config(10, full_spec(16), sw_spec(12, 32)), hash_block_size=8)
    with pytest.raises(ValueError, match="DCP/PCP"):
        _coordinator(config(10, full_spec(16), sw_spec(16, 32)), dcp_world_size=2)


def test_unitary_dcp_scales_the_hit_unit():
    coord = _coordinator(config(10, full_spec(4)), hash_block_size=8, dcp_world_size=2)
    assert coord.block_size == 8 and coord.single_type_managers[0].block_size == 8


def test_hybrid_attention_groups_full_first_lcm_and_eagle_groups():
    cfg = config(
        40,
        sw_spec(16, 32),
        full_spec(32),
        sw_spec(16, 32),
        sw_spec(16, 64),
        chunked_spec(16, 64),
        eagle_groups=(3,),
    )
    coord = _coordinator(cfg, use_eagle=True)
    assert [(type(s).__name__, ids, cls.__name__) for s, ids, cls in coord.attention_groups] == [
        ("FullAttentionSpec", [1], "FullAttentionManager"),
        ("SlidingWindowSpec", [0, 2], "SlidingWindowManager"),
        ("SlidingWindowSpec", [3], "SlidingWindowManager"),
        ("ChunkedLocalAttentionSpec", [4], "ChunkedLocalAttentionManager"),
    ]
    assert coord.lcm_block_size == 32
    assert coord.eagle_group_ids == {3} and coord.eagle_attn_group_indices == {2}
    # No group flagged: with use_eagle every group drops its last block.
    coord = _coordinator(config(40, full_spec(16), sw_spec(16, 32)), use_eagle=True)
    assert coord.eagle_group_ids == {0, 1} and coord.eagle_attn_group_indices == {0, 1}


# ----------------------------------------------------------------------------- hybrid hits
def _hybrid_two_windows(num_blocks=21, window_blocks=2, **kw):
    specs = (full_spec(16), sw_spec(16, window_blocks * 16), sw_spec(16, window_blocks * 16))
    return manager(num_blocks, *specs, **kw)


def test_hybrid_prefill_hits_with_null_padding_and_targeted_evictions():
    mgr = _hybrid_two_windows()
    common = [i for i in range(3) for _ in range(16)]
    req0 = make_request("0", common + [3] * 7, 16)
    blocks, hit = mgr.get_computed_blocks(req0)
    new = mgr.allocate_slots(req0, 55, hit, blocks)
    assert new.get_block_ids() == ([1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12])
    req1 = make_request("1", common + [3] * 5, 16)
    blocks, hit = mgr.get_computed_blocks(req1)
    assert blocks.get_block_ids() == ([1, 2, 3], [0, 6, 7], [0, 10, 11]) and hit == 48
    new = mgr.allocate_slots(req1, 5, hit, blocks)
    assert new.get_block_ids() == ([13], [14], [15])
    assert [b.ref_cnt for g in blocks.blocks for b in g if not b.is_null] == [2] * 7
    hashes = req1.block_hashes
    mgr.free(req0)
    mgr.free(req1)

    def key(i, g):
        return make_block_hash_with_group_id(hashes[i], g)

    tokens = common + [3] * 5
    cases = [
        ([key(0, 1), key(0, 2)], 3),  # outside the window: no effect
        ([key(0, 0)], 0),  # full attention's first block: total miss
        ([key(2, 0), key(2, 1), key(2, 2)], 2),
        ([key(2, 0)], 2),
        ([key(2, 1)], 2),
        ([key(2, 2)], 2),
        ([key(2, 0), key(0, 1), key(0, 2)], 0),  # full hits 1 block, windows need 2
    ]
    for i, (keys, expect_blocks) in enumerate(cases):
        _, hit = _hit_after_evicting(mgr, f"p{i}", tokens, keys)
        assert hit == expect_blocks * 16, (i, keys)


def test_hybrid_eagle_matches_one_block_further_then_drops_it():
    mgr = _hybrid_two_windows(num_blocks=31, window_blocks=3, use_eagle=True)
    common = [i for i in range(6) for _ in range(16)]
    req0 = make_request("0", common + [6] * 7, 16)
    new = mgr.allocate_slots(req0, 103)
    assert new.get_block_ids() == (
        [1, 2, 3, 4, 5, 6, 7],
        [8, 9, 10, 11, 12, 13, 14],
        [15, 16, 17, 18, 19, 20, 21],
    )
    req1 = make_request("1", common + [6] * 5, 16)
    blocks, hit = mgr.get_computed_blocks(req1)
    assert hit == 80
    assert blocks.get_block_ids() == ([1, 2, 3, 4, 5], [0, 0, 10, 11, 12], [0, 0, 17, 18, 19])
    new = mgr.allocate_slots(req1, 21, hit, blocks)
    assert new.get_block_ids() == ([22, 23], [24, 25], [26, 27])
    hashes = req1.block_hashes
    mgr.free(req0)
    mgr.free(req1)

    def key(i, g):
        return make_block_hash_with_group_id(hashes[i], g)

    tokens = common + [6] * 5
    cases = [
        ([key(0, 1), key(0, 2)], 5),
        ([key(0, 0)], 0),
        ([key(-1, 0), key(-1, 1), key(-1, 2)], 4),
        ([key(-1, 0)], 4),
        ([key(-2, 1)], 3),
        ([key(-2, 2)], 3),
        ([key(-1, 0), key(0, 1), key(0, 2)], 4),
    ]
    for i, (keys, expect_blocks) in enumerate(cases):
        _, hit = _hit_after_evicting(mgr, f"p{i}", tokens, keys)
        assert hit == expect_blocks * 16, (i, keys)


@pytest.mark.parametrize(
    "kinds",
    [
        ["full", "sw"],
        ["full", "mamba"],
        ["sw", "mamba"],
        ["sw", "sw_large"],
        ["full", "sw", "sw"],
        ["full", "sw", "mamba"],
        ["full", "sw", "sw_large"],
        ["full", "full", "sw"],
        ["full", "sw", "full", "sw_large"],
        ["sw", "mamba", "sw_large", "mamba"],
        ["full", "full", "sw", "mamba"],
    ],
)
def test_hybrid_combinations_hit_the_common_prefix(kinds):
    specs = {
        "full": lambda: full_spec(16),
        "sw": lambda: sw_spec(16, 32),
        "sw_large": lambda: sw_spec(16, 64),
        "mamba": lambda: mamba_spec(16),
    }
    mgr = manager(10 * len(kinds), *(specs[k]() for k in kinds))
    common = [i for i in range(3) for _ in range(16)]
    req0 = make_request("0", common + [3] * 7, 16)
    assert mgr.allocate_slots(req0, 55) is not None
    mgr.new_step_starts()
    req1 = make_request("1", common + [4] * 5, 16)
    blocks, hit = mgr.get_computed_blocks(req1)
    assert hit == 48 and all(len(g) == 3 for g in blocks.blocks)
    assert mgr.allocate_slots(req1, 5, hit, blocks) is not None


def test_hybrid_mamba_hit_waits_for_the_next_step():
    mgr = manager(30, full_spec(16), mamba_spec(16))
    common = [i for i in range(3) for _ in range(16)]
    mgr.allocate_slots(make_request("0", common + [3] * 7, 16), 55)
    req1 = make_request("1", common + [4] * 5, 16)
    blocks, hit = mgr.get_computed_blocks(req1)
    assert hit == 48
    assert mgr.allocate_slots(req1, 5, hit, blocks) is None  # state cached this step
    mgr.new_step_starts()
    assert mgr.allocate_slots(req1, 5, hit, blocks) is not None


def test_mixed_block_sizes_align_hits_to_the_lcm():
    mgr = manager(100, full_spec(32), sw_spec(16, 32), hash_block_size=16)
    common = [i for i in range(10) for _ in range(16)]
    req0 = make_request("0", common, 16)
    new = mgr.allocate_slots(req0, 112)
    assert new.get_block_ids() == ([1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11])
    req1 = make_request("1", common[:113], 16)
    blocks, hit = mgr.get_computed_blocks(req1)
    assert (len(blocks.blocks[0]), len(blocks.blocks[1]), hit) == (3, 6, 96)
    req2 = make_request("2", common[:97], 16)
    blocks, hit = mgr.get_computed_blocks(req2)
    assert (len(blocks.blocks[0]), len(blocks.blocks[1]), hit) == (3, 6, 96)
    # Sliding-window hit of 5 blocks (80 tokens) is not a multiple of 32 -> 64 tokens.
    mgr.evict_blocks({11, 10})
    blocks, hit = mgr.get_computed_blocks(req1)
    assert (len(blocks.blocks[0]), len(blocks.blocks[1]), hit) == (2, 4, 64)


def test_hybrid_cache_blocks_keep_only_the_window_tail_of_each_segment():
    mgr = manager(100, full_spec(32), sw_spec(8, 8), hash_block_size=8)
    req = make_request("0", [i for i in range(8) for _ in range(8)], 8)
    assert mgr.allocate_slots(req, 64) is not None
    cached = [
        mgr.block_pool.get_cached_block(h, kv_cache_group_ids=[1]) is not None
        for h in req.block_hashes
    ]
    assert cached == [False, False, False, True, False, False, False, True]


def test_hybrid_cache_blocks_clamped_to_the_lcm():
    mgr = manager(100, full_spec(32), sw_spec(16, 32), hash_block_size=16)
    req = make_request("0", [i for i in range(7) for _ in range(16)], 16)
    assert mgr.allocate_slots(req, 112) is not None
    pool = mgr.block_pool
    assert [pool.get_cached_block(h, [1]) is not None for h in req.block_hashes] == [True] * 6 + [
        False
    ]
    assert mgr.coordinator.single_type_managers[0].num_cached_block["0"] == 3


# ----------------------------------------------------------------------------- fixed point
def test_fixed_point_iterations_are_reported():
    mgr = manager(40, full_spec(4), sw_spec(4, 8), sw_spec(4, 12))
    rec = ListRecorder()
    req0 = make_request("0", list(range(21)), 4)
    mgr.allocate_slots(req0, 21)
    mgr.free(req0)
    hashes = req0.block_hashes
    # Window 8 needs 2 blocks, window 12 needs 3. Hide block 3 of the 12-window group.
    mgr.block_pool.cached_block_hash_to_block._cache.pop(
        make_block_hash_with_group_id(hashes[3], 2)
    )
    mgr.set_recorder(rec)
    blocks, hit = mgr.get_computed_blocks(make_request("1", list(range(21)), 4))
    assert hit == 12 and blocks.get_block_ids() == ([1, 2, 3], [0, 8, 9], [13, 14, 15])
    # Ids: group 0 owns blocks 1-6, group 1 7-12, group 2 13-18; 0 is the null block. Window 8
    # keeps the last 2 blocks of the candidate (nulls before), window 12 the last 3.
    assert rec.named("fixed_point") == [
        ("fixed_point", 0, (0,), 20, 20, False, ((1, 2, 3, 4, 5),)),
        ("fixed_point", 0, (1,), 20, 20, False, ((0, 0, 0, 10, 11),)),
        ("fixed_point", 0, (2,), 20, 12, False, ((13, 14, 15),)),
        ("fixed_point", 1, (0,), 12, 12, True, ((1, 2, 3),)),
        ("fixed_point", 1, (1,), 12, 12, False, ((0, 8, 9),)),
        ("fixed_point", 1, (2,), 12, 12, False, ((13, 14, 15),)),
    ]
    # The last iteration's lists are what get_computed_blocks returned.
    last = [c[6][0] for c in rec.named("fixed_point")[3:]]
    assert [list(ids) for ids in last] == [list(g) for g in blocks.get_block_ids()]


def test_simple_hybrid_stops_after_one_round():
    mgr = manager(40, full_spec(4), sw_spec(4, 8))
    rec = ListRecorder()
    req0 = make_request("0", list(range(21)), 4)
    mgr.allocate_slots(req0, 21)
    mgr.free(req0)
    mgr.block_pool.cached_block_hash_to_block._cache.pop(
        make_block_hash_with_group_id(req0.block_hashes[4], 1)
    )
    mgr.set_recorder(rec)
    blocks, hit = mgr.get_computed_blocks(make_request("1", list(range(21)), 4))
    assert hit == 16 and [len(g) for g in blocks.blocks] == [4, 4]
    assert rec.named("fixed_point") == [
        ("fixed_point", 0, (0,), 20, 20, False, ((1, 2, 3, 4, 5),)),
        ("fixed_point", 0, (1,), 20, 16, False, ((0, 0, 9, 10),)),
    ]


def test_coordinator_fan_out_helpers():
    mgr = manager(40, full_spec(4), sw_spec(4, 8))
    coord = mgr.coordinator
    req = make_request("r", list(range(10)), 4)
    mgr.allocate_slots(req, 10)
    assert [[b.block_id for b in g] for g in coord.get_blocks("r")] == [[1, 2, 3], [4, 5, 6]]
    assert coord.get_blocks("nobody") == ([], [])
    assert coord.get_num_common_prefix_blocks("r") == [3, 0]
    assert isinstance(coord.single_type_managers[0], FullAttentionManager)
    assert isinstance(coord.single_type_managers[1], SlidingWindowManager)
    assert coord.get_num_blocks_to_allocate("r", 20, ([], []), 0, 10, 20) == 4
