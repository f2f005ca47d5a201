"""Single-type managers on a real BlockPool: hits, skipped blocks, allocation counts, free order.

Expected values are vLLM 0.22.1's for the same calls (scenarios from its
tests/v1/core/test_single_type_kv_cache_manager.py, plus Mamba / cross / sink cases run
against vLLM to fix the numbers).
"""

from __future__ import annotations

import pytest
from _core_top_helpers import (  # noqa: F401 (none_hash is an autouse fixture)
    ListRecorder,
    chunked_spec,
    full_spec,
    make_request,
    mamba_spec,
    none_hash,
    sw_spec,
)

from kvlab.core.block_pool import BlockPool
from kvlab.core.kv_cache_interface import (
    CrossAttentionSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
)
from kvlab.core.kv_cache_utils import make_block_hash_with_group_id
from kvlab.core.single_type_kv_cache_manager import (
    ChunkedLocalAttentionManager,
    CrossAttentionManager,
    FullAttentionManager,
    MambaManager,
    SinkFullAttentionManager,
    SlidingWindowManager,
    get_manager_for_kv_cache_spec,
    spec_manager_map,
)

NO_CAP = 10**9


def _pool(num_blocks: int = 100, block_size: int = 2) -> BlockPool:
    return BlockPool(num_gpu_blocks=num_blocks, enable_caching=True, hash_block_size=block_size)


def _ids(blocks) -> list[int]:
    return [b.block_id for b in blocks]


def _cache_pattern(pool: BlockPool, pattern: list[bool], group_id: int = 0) -> list[bytes]:
    """Insert block i+10 under hash str(i) for every True in ``pattern``; return the hashes."""
    hashes = [str(i).encode() for i in range(len(pattern))]
    pool.cached_block_hash_to_block._cache.clear()
    for i, cached in enumerate(pattern):
        if cached:
            key = make_block_hash_with_group_id(hashes[i], group_id)
            pool.cached_block_hash_to_block.insert(key, pool.blocks[i + 10])
    return hashes


def _hit(cls, spec, pool, pattern, max_length, **kw):
    hashes = _cache_pattern(pool, pattern)
    kw.setdefault("use_eagle", False)
    kw.setdefault("alignment_tokens", spec.block_size)
    return cls.find_longest_cache_hit(
        block_hashes=hashes,
        max_length=max_length,
        kv_cache_group_ids=[0],
        block_pool=pool,
        kv_cache_spec=spec,
        **kw,
    )[0]


T, F = True, False


# ----------------------------------------------------------------------------- full attention
def test_full_attention_hit_stops_at_first_miss_and_respects_max_length():
    pool, spec = _pool(), full_spec(2)
    assert _ids(_hit(FullAttentionManager, spec, pool, [T, T, F, T], 8)) == [10, 11]
    assert _ids(_hit(FullAttentionManager, spec, pool, [T, T, T, T], 5)) == [10, 11]
    assert _ids(_hit(FullAttentionManager, spec, pool, [F, T, T], 6)) == []


def test_full_attention_eagle_drop_then_alignment():
    pool, spec = _pool(), full_spec(2)
    pattern = [T, T, T, T, T]
    assert _ids(_hit(FullAttentionManager, spec, pool, pattern, 10, use_eagle=True)) == [
        10,
        11,
        12,
        13,
    ]
    # 5 blocks of 2 tokens, aligned to 4 tokens -> 4 blocks; with EAGLE 5 -> 4 -> 4.
    assert len(_hit(FullAttentionManager, spec, pool, pattern, 10, alignment_tokens=4)) == 4
    assert (
        len(_hit(FullAttentionManager, spec, pool, pattern, 10, use_eagle=True, alignment_tokens=8))
        == 4
    )
    assert len(_hit(FullAttentionManager, spec, pool, pattern[:3], 6, alignment_tokens=4)) == 2


def test_full_attention_hit_needs_every_group():
    pool, spec = _pool(), full_spec(2)
    hashes = _cache_pattern(pool, [T, T, T])
    pool.cached_block_hash_to_block.insert(
        make_block_hash_with_group_id(hashes[0], 1), pool.blocks[40]
    )
    hit = FullAttentionManager.find_longest_cache_hit(hashes, 6, [0, 1], pool, spec, False, 2)
    assert [_ids(g) for g in hit] == [[10], [40]]


def test_full_attention_dcp_scales_the_block_size():
    pool, spec = _pool(), full_spec(2)
    hashes = _cache_pattern(pool, [T, T, T])
    hit = FullAttentionManager.find_longest_cache_hit(hashes, 9, [0], pool, spec, False, 4, 2, 1)
    assert _ids(hit[0]) == [10, 11]
    mgr = FullAttentionManager(spec, pool, True, 0, dcp_world_size=2, pcp_world_size=2)
    assert mgr.block_size == 8


def test_full_attention_rejects_other_specs():
    # The single-type managers keep vLLM's asserts (their callers inside core are checked).
    with pytest.raises(AssertionError, match="only be used for full attention"):
        FullAttentionManager.find_longest_cache_hit([], 4, [0], _pool(), sw_spec(2, 4), False, 2)
    with pytest.raises(ValueError, match="dcp_world_size"):
        FullAttentionManager(full_spec(2), _pool(), True, 0, dcp_world_size=0)


def test_common_prefix_counts_blocks_held_by_every_request():
    pool = _pool(20, 4)
    mgr = FullAttentionManager(full_spec(4), pool, True, 0)
    a = mgr.allocate_new_blocks("a", 12, 12)
    mgr.allocate_new_computed_blocks("b", a[:2], 8, 0)
    mgr.allocate_new_blocks("b", 12, 12)
    assert mgr.get_num_common_prefix_blocks("a") == 2
    assert mgr.get_num_common_prefix_blocks("b") == 2
    mgr.allocate_new_blocks("c", 4, 4)
    assert mgr.get_num_common_prefix_blocks("a") == 0


def test_free_releases_tail_first_and_forgets_the_request():
    pool = _pool(10, 4)
    mgr = FullAttentionManager(full_spec(4), pool, True, 0)
    rec = ListRecorder()
    mgr.recorder = rec
    pool.set_recorder(rec)
    assert _ids(mgr.allocate_new_blocks("a", 10, 10)) == [1, 2, 3]
    mgr.num_cached_block["a"] = 2
    mgr.free("a")
    assert [b.block_id for b in pool.free_block_queue.get_all_free_blocks()] == [
        4,
        5,
        6,
        7,
        8,
        9,
        3,
        2,
        1,
    ]
    assert "a" not in mgr.req_to_blocks and "a" not in mgr.num_cached_block
    mgr.free("never-allocated")
    # vLLM's allocate_new_blocks reads the entry first (creating it), then extends it.
    assert rec.named("req_blocks_add", "req_free") == [
        ("req_blocks_add", "a", 0, ()),
        ("req_blocks_add", "a", 0, (1, 2, 3)),
        ("req_free", "a", 0),
    ]


def test_new_block_ids_only_for_plain_full_attention():
    pool = _pool(20, 4)
    full = FullAttentionManager(full_spec(4), pool, True, 0)
    mla = FullAttentionManager(
        MLAAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32"), pool, True, 1
    )
    sw = SlidingWindowManager(
        sw_spec(4, 8), block_pool=pool, enable_caching=True, kv_cache_group_id=2
    )
    full.allocate_new_blocks("a", 8, 8)
    mla.allocate_new_blocks("a", 8, 8)
    sw.allocate_new_blocks("a", 8, 8)
    assert full.take_new_block_ids() == [1, 2]
    assert full.take_new_block_ids() == []
    assert mla.take_new_block_ids() == [] and sw.take_new_block_ids() == []


# ----------------------------------------------------------------------------- sliding window
@pytest.mark.parametrize(
    ("pattern", "expect_length"),
    [
        ([F] * 10, 0),
        ([T], 1),
        ([T, F], 1),
        ([T, T], 2),
        ([T, T, F], 2),
        ([T, T, T], 3),
        ([T, T, T, F], 3),
        ([T, T, F, T, F, F, T, T, F, T, T, T], 12),
        ([T, T, F, T, F, F, T, T, F, F, F], 8),
        ([T, T, F, T, F, F, T, T, F, F, F, T], 8),
    ],
)
def test_sliding_window_hit_needs_the_last_blocks_of_the_window(pattern, expect_length):
    # window 4 tokens, block 2 -> cdiv(3, 2) = 2 contiguous blocks end a hit.
    pool, spec = _pool(), sw_spec(2, 4)
    hit = _hit(SlidingWindowManager, spec, pool, pattern, len(pattern) * 2)
    assert len(hit) == expect_length
    assert all(b is pool.null_block for b in hit[: expect_length - 2])
    for i in range(max(0, expect_length - 2), expect_length):
        assert hit[i].block_id == i + 10


def test_sliding_window_eagle_needs_one_more_block_and_aligned_runs():
    pool, spec = _pool(), sw_spec(2, 4)
    hit = _hit(SlidingWindowManager, spec, pool, [F, T, T, T, F], 10, use_eagle=True)
    assert _ids(hit) == [0, 11, 12]
    hit = _hit(SlidingWindowManager, spec, pool, [F, T, T, F], 8, use_eagle=True)
    assert _ids(hit) == []
    # alignment 4 tokens: a run must end on an even block boundary.
    hit = _hit(SlidingWindowManager, spec, pool, [T, T, T, T, T, F], 12, alignment_tokens=4)
    assert _ids(hit) == [0, 0, 12, 13]
    hit = _hit(SlidingWindowManager, spec, pool, [F, T, T, F, T, T, T], 14, alignment_tokens=4)
    assert _ids(hit) == [0, 0, 0, 0, 14, 15]


def test_sliding_window_rejects_dcp_and_other_specs():
    with pytest.raises(AssertionError, match="DCP not support sliding window"):
        SlidingWindowManager.find_longest_cache_hit([], 4, [0], _pool(), sw_spec(2, 4), False, 2, 2)
    with pytest.raises(AssertionError, match="only be used for sliding window groups"):
        SlidingWindowManager.find_longest_cache_hit([], 4, [0], _pool(), full_spec(2), False, 2)


def test_sliding_window_remove_skipped_blocks_frees_later_blocks_first():
    pool = _pool(20, 2)
    mgr = SlidingWindowManager(
        sw_spec(2, 4), block_pool=pool, enable_caching=True, kv_cache_group_id=0
    )
    rec = ListRecorder()
    mgr.recorder = rec
    pool.set_recorder(rec)
    original = _ids(mgr.allocate_new_blocks("r", 22, 22))
    assert original == list(range(1, 12))
    table = mgr.req_to_blocks["r"]
    expectations = [
        (0, original),
        (4, original),  # token 0 out of the window, but block 1 still holds token 1
        (5, [0] + original[1:]),
        (6, [0] + original[1:]),
        (7, [0, 0] + original[2:]),
        (11, [0, 0, 0, 0] + original[4:]),
    ]
    for computed, expected in expectations:
        mgr.remove_skipped_blocks("r", computed)
        assert _ids(table) == expected, computed
    assert [b.block_id for b in pool.free_block_queue.get_all_free_blocks()] == [
        *range(12, 20),
        1,
        2,
        4,
        3,
    ]
    assert rec.named("req_blocks_null") == [
        ("req_blocks_null", "r", 0, (0,)),
        ("req_blocks_null", "r", 0, (1,)),
        ("req_blocks_null", "r", 0, (3, 2)),
    ]
    mgr.remove_skipped_blocks("unknown", 100)
    assert mgr.req_to_blocks["unknown"] == []


def test_sliding_window_cache_block_mask_keeps_the_segment_tail():
    pool = _pool(30, 8)
    mgr = SlidingWindowManager(
        sw_spec(8, 8), block_pool=pool, enable_caching=True, kv_cache_group_id=1
    )
    assert mgr._cache_block_mask(0, 8, 32) == [F, F, F, T, F, F, F, T]
    assert mgr._cache_block_mask(2, 5, 32) == [F, T, F]
    wide = SlidingWindowManager(
        sw_spec(8, 40), block_pool=pool, enable_caching=True, kv_cache_group_id=1
    )
    assert wide._cache_block_mask(0, 8, 32) is None
    req = make_request("r", [i // 8 for i in range(64)], 8)
    mgr.allocate_new_blocks("r", 64, 64)
    mgr.cache_blocks(req, 64, alignment_tokens=32)
    cached = [b.block_hash is not None for b in mgr.req_to_blocks["r"]]
    assert cached == [F, F, F, T, F, F, F, T] and mgr.num_cached_block["r"] == 8


def test_sliding_window_get_num_blocks_to_allocate_counts_evictable_hits():
    pool = _pool(100, 2)
    mgr = SlidingWindowManager(
        sw_spec(2, 4), block_pool=pool, enable_caching=True, kv_cache_group_id=0
    )
    hits_1 = pool.blocks[1:11]
    hits_2 = [pool.null_block] * 5 + pool.blocks[1:6]
    assert mgr.get_num_blocks_to_allocate("1", 40, hits_1, 0, 40) == 20
    assert mgr.get_num_blocks_to_allocate("2", 40, hits_2, 0, 40) == 15
    # 17 computed tokens -> 14 skipped tokens = 7 blocks: 20 - max(7, 10) new blocks, and
    # only the 3 hits after the skipped ones count as evictable.
    assert mgr.get_num_blocks_to_allocate("3", 40, hits_1, 17, 40) == 10 + 3


def test_evictable_hit_is_counted_but_not_allocated_twice():
    pool = _pool(100, 2)
    mgr = SlidingWindowManager(
        sw_spec(2, 4), block_pool=pool, enable_caching=True, kv_cache_group_id=0
    )
    evictable = pool.blocks[1]
    assert mgr.get_num_blocks_to_allocate("req", 4, [evictable], 2, 4) == 2
    mgr.allocate_new_computed_blocks("req", [evictable], 2, 0)
    new = mgr.allocate_new_blocks("req", 4, 4)
    assert _ids(new) == [2] and _ids(mgr.req_to_blocks["req"]) == [1, 2]
    assert evictable.ref_cnt == 1 and mgr.num_cached_block["req"] == 1


def test_admission_cap_prediction_matches_allocation():
    pool = _pool(100, 2)
    mgr = SlidingWindowManager(
        sw_spec(2, 8),
        block_pool=pool,
        enable_caching=False,
        kv_cache_group_id=0,
        max_admission_blocks_per_request=4,
    )
    computed = 0
    for num_tokens in (4, 8, 12, 16):
        predicted = mgr.get_num_blocks_to_allocate("req", num_tokens, [], computed, num_tokens)
        mgr.remove_skipped_blocks("req", computed)
        assert len(mgr.allocate_new_blocks("req", num_tokens, num_tokens)) == predicted
        computed = num_tokens
    fresh = mgr.get_num_blocks_to_allocate("new", 100, [], 0, 100, apply_admission_cap=True)
    assert fresh == 4
    assert mgr.get_num_blocks_to_allocate("new", 100, [], 0, 100) == 50


def test_new_computed_blocks_skip_the_window_and_pad_with_nulls():
    pool = _pool(30, 2)
    mgr = SlidingWindowManager(
        sw_spec(2, 4), block_pool=pool, enable_caching=True, kv_cache_group_id=0
    )
    rec = ListRecorder()
    mgr.recorder = rec
    pool.set_recorder(rec)
    hits = [pool.null_block, pool.null_block, pool.blocks[5], pool.blocks[6]]
    # 8 hit tokens + 4 external tokens: 9 skipped tokens -> 4 skipped blocks, 3 external left.
    mgr.allocate_new_computed_blocks("r", hits, 8, 4)
    assert _ids(mgr.req_to_blocks["r"]) == [0, 0, 0, 0, 1, 2]
    assert pool.blocks[5].ref_cnt == 0 and mgr.num_cached_block["r"] == 4
    assert rec.named("req_blocks_add") == [
        ("req_blocks_add", "r", 0, (0, 0, 0, 0)),
        ("req_blocks_add", "r", 0, (1, 2)),
    ]
    with pytest.raises(AssertionError):  # a running request gets no hits (vLLM asserts)
        mgr.allocate_new_computed_blocks("r", [pool.blocks[9]], 2, 0)
    mgr.allocate_new_computed_blocks("r", [], 2, 0)  # a running request: no-op


# ----------------------------------------------------------------------------- chunked local
@pytest.mark.parametrize(
    ("pattern", "tail", "expect_length"),
    [
        ([T], 0, 1),
        ([T], 1, 1),
        ([T, F], 0, 2),
        ([T, F], 1, 2),
        ([T, T, F], 0, 2),
        ([T, T, T], 1, 3),
        ([T, T, T, F], 0, 4),
        ([F] * 8 + [T], 1, 9),
        ([T] * 8 + [F], 1, 8),
        ([F] * 8 + [T, T], 1, 10),
        ([T] * 8 + [F, T], 0, 10),
        ([F] * 8 + [F, F], 1, 10),
    ],
)
def test_chunked_local_hit_marks_earlier_chunks_as_computed(pattern, tail, expect_length):
    # chunk 4 tokens, block 2: blocks before the chunk of token max_length are null hits.
    pool, spec = _pool(), chunked_spec(2, 4)
    hit = _hit(ChunkedLocalAttentionManager, spec, pool, pattern, len(pattern) * 2 + tail)
    assert len(hit) == expect_length
    chunk_start_block = (len(pattern) * 2 + tail) // 4 * 2
    assert all(b is pool.null_block for b in hit[:chunk_start_block])
    assert all(b.block_id == i + 10 for i, b in enumerate(hit) if i >= chunk_start_block)


def test_chunked_local_rejects_eagle_and_mixed_alignment():
    pool, spec = _pool(), chunked_spec(2, 4)
    with pytest.raises(AssertionError, match="eagle"):
        _hit(ChunkedLocalAttentionManager, spec, pool, [T], 2, use_eagle=True)
    with pytest.raises(AssertionError, match="different block sizes"):
        _hit(ChunkedLocalAttentionManager, spec, pool, [T], 2, alignment_tokens=4)


def test_chunked_local_remove_skipped_blocks():
    pool = _pool(30, 2)
    mgr = ChunkedLocalAttentionManager(
        chunked_spec(2, 4), block_pool=pool, enable_caching=True, kv_cache_group_id=0
    )
    original = _ids(mgr.allocate_new_blocks("r", 22, 22))
    table = mgr.req_to_blocks["r"]
    for computed, expected in [
        (0, original),
        (3, original),
        (4, [0, 0] + original[2:]),
        (6, [0, 0] + original[2:]),
        (12, [0] * 6 + original[6:]),
    ]:
        mgr.remove_skipped_blocks("r", computed)
        assert _ids(table) == expected, computed
    assert [mgr.get_num_skipped_tokens(n) for n in (3, 4, 7, 13)] == [0, 4, 4, 12]


def test_chunked_local_get_num_blocks_to_allocate():
    pool = _pool(100, 2)
    mgr = ChunkedLocalAttentionManager(
        chunked_spec(2, 4), block_pool=pool, enable_caching=True, kv_cache_group_id=0
    )
    assert mgr.get_num_blocks_to_allocate("1", 40, pool.blocks[1:11], 0, 40) == 20
    assert (
        mgr.get_num_blocks_to_allocate("2", 40, [pool.null_block] * 5 + pool.blocks[1:6], 0, 40)
        == 15
    )


# ----------------------------------------------------------------------------- mamba
def test_mamba_hit_is_the_last_cached_state():
    pool, spec = _pool(), mamba_spec(2)
    assert _ids(_hit(MambaManager, spec, pool, [T, F, T, F], 8)) == [0, 0, 12]
    assert _ids(_hit(MambaManager, spec, pool, [T, T, T, T], 5)) == [0, 11]
    assert _ids(_hit(MambaManager, spec, pool, [F, T, F, T], 8, alignment_tokens=8)) == [
        0,
        0,
        0,
        13,
    ]
    assert _ids(_hit(MambaManager, spec, pool, [F, T, T, F], 8, alignment_tokens=8)) == []


def test_mamba_none_mode_keeps_only_the_last_state():
    pool = _pool(30, 4)
    mgr = MambaManager(
        mamba_spec(4, num_speculative_blocks=1), pool, enable_caching=True, kv_cache_group_id=0
    )
    assert mgr.get_num_blocks_to_allocate("r", 10, [], 0, 10) == 4
    assert _ids(mgr.allocate_new_blocks("r", 10, 10)) == [1, 2, 3, 4]
    mgr.remove_skipped_blocks("r", 10)  # 10 - 1 speculative -> 9 computed -> 8 skipped tokens
    assert _ids(mgr.req_to_blocks["r"]) == [0, 0, 3, 4]


def test_mamba_align_mode_moves_state_blocks_and_frees_old_ones():
    pool = _pool(20, 4)
    mgr = MambaManager(
        mamba_spec(4, mamba_cache_mode="align", num_speculative_blocks=1),
        pool,
        enable_caching=True,
        kv_cache_group_id=0,
    )
    rec = ListRecorder()
    mgr.recorder = rec
    pool.set_recorder(rec)
    steps = []
    computed = 0
    for n in (10, 14, 22, 23, 24, 31):
        mgr.remove_skipped_blocks("r", computed)
        after_remove = _ids(mgr.req_to_blocks.get("r", []))
        predicted = mgr.get_num_blocks_to_allocate("r", n, [], computed, n)
        new = _ids(mgr.allocate_new_blocks("r", n, n))
        steps.append(
            (
                after_remove,
                predicted,
                new,
                _ids(mgr.req_to_blocks["r"]),
                mgr.last_state_block_idx.get("r"),
            )
        )
        computed = n
    assert steps == [
        ([], 2, [0, 0, 1, 2], [0, 0, 1, 2], None),
        ([0, 0, 1, 2], 1, [3], [0, 0, 1, 2, 3], 2),
        ([0, 0, 0, 2, 3], 1, [3, 4], [0, 0, 0, 2, 0, 3, 4], 3),
        ([0, 0, 0, 0, 0, 3, 4], 0, [], [0, 0, 0, 0, 0, 3, 4], 3),
        ([0, 0, 0, 0, 0, 3, 4], 0, [], [0, 0, 0, 0, 0, 3, 4], 3),
        ([0, 0, 0, 0, 0, 3, 4], 1, [4, 5], [0, 0, 0, 0, 0, 3, 0, 4, 5], 5),
    ]
    # The move of block 3 (index 4 -> tail) is an add of the block, then a null at index 4.
    moves = [c for c in rec.calls if c[0] in ("req_blocks_add", "req_blocks_null")]
    assert moves[:5] == [
        ("req_blocks_add", "r", 0, (0, 0)),  # the entry's creation merged with its padding
        ("req_blocks_add", "r", 0, (1, 2)),
        ("req_blocks_add", "r", 0, (3,)),
        ("req_blocks_null", "r", 0, (2,)),
        ("req_blocks_add", "r", 0, (3,)),
    ]
    assert moves[5:8] == [
        ("req_blocks_null", "r", 0, (4,)),
        ("req_blocks_add", "r", 0, (4,)),
        ("req_blocks_null", "r", 0, (3,)),
    ]
    mgr.free("r")
    assert mgr.last_state_block_idx == {} and mgr._allocated_block_reqs == set()


def test_mamba_blocks_cached_this_step_delay_other_requests():
    pool = _pool(20, 4)
    mgr = MambaManager(mamba_spec(4), pool, enable_caching=True, kv_cache_group_id=0)
    req = make_request("a", list(range(9)), 4)
    mgr.allocate_new_blocks("a", 9, 9)
    mgr.cache_blocks(req, 8)
    hit = [pool.null_block, mgr.req_to_blocks["a"][1]]
    assert mgr.get_num_blocks_to_allocate("b", 9, hit, 8, 9) == pool.num_gpu_blocks + 1
    mgr.new_step_starts()
    assert mgr.get_num_blocks_to_allocate("b", 9, hit, 8, 9) == 1


# ----------------------------------------------------------------------------- cross / sink
def test_cross_attention_never_caches():
    pool = _pool(20, 4)
    spec = CrossAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = CrossAttentionManager(spec, pool, False, 1)
    assert mgr.get_num_blocks_to_allocate("r", 10, [], 0, 10) == 3
    assert _ids(mgr.allocate_new_blocks("r", 10, 10)) == [1, 2, 3]
    mgr.allocate_new_computed_blocks("r", [], 0, 0)
    assert "r" not in mgr.num_cached_block and mgr.get_num_common_prefix_blocks("r") == 0
    with pytest.raises(ValueError, match="prefix caching is disabled"):
        mgr.cache_blocks(make_request("r", [1, 2, 3, 4], 4), 4)
    with pytest.raises(NotImplementedError):
        CrossAttentionManager.find_longest_cache_hit([], 4, [1], pool, spec, False, 4)
    with pytest.raises(AssertionError):
        mgr.allocate_new_computed_blocks("x", [pool.blocks[5]], 4, 0)


def test_sink_manager_reserves_sink_blocks_at_start():
    pool = _pool(20, 4)
    spec = SinkFullAttentionSpec(
        block_size=4, num_kv_heads=1, head_size=1, dtype="float32", sink_len=8
    )
    mgr = SinkFullAttentionManager(spec, pool, True, 0)
    assert _ids(mgr.sink_blocks) == [1, 2] and [b.ref_cnt for b in mgr.sink_blocks] == [0, 0]
    assert pool.get_num_free_blocks() == 17
    assert _ids(mgr.allocate_new_blocks("r", 5, 5)) == [3, 4]
    bad = SinkFullAttentionSpec(
        block_size=4, num_kv_heads=1, head_size=1, dtype="float32", sink_len=6
    )
    with pytest.raises(AssertionError):  # sink_len must be a multiple of the block size
        SinkFullAttentionManager(bad, _pool(20, 4), True, 0)


# ----------------------------------------------------------------------------- spec map
def test_spec_manager_map_and_factory():
    assert spec_manager_map[type(full_spec(4))] is FullAttentionManager
    assert spec_manager_map[SlidingWindowMLASpec] is SlidingWindowManager
    pool = _pool(20, 4)
    kw = {"block_pool": pool, "enable_caching": True, "kv_cache_group_id": 0}
    sw = get_manager_for_kv_cache_spec(
        sw_spec(4, 10), max_num_batched_tokens=16, max_model_len=64, **kw
    )
    assert isinstance(sw, SlidingWindowManager)
    assert sw._max_admission_blocks_per_request == (9 + 16 + 3) // 4 + 1
    ch = get_manager_for_kv_cache_spec(
        chunked_spec(4, 8), max_num_batched_tokens=100, max_model_len=20, **kw
    )
    assert ch._max_admission_blocks_per_request == 5
    full = get_manager_for_kv_cache_spec(
        full_spec(4), max_num_batched_tokens=16, max_model_len=64, **kw
    )
    assert full._max_admission_blocks_per_request is None

    class OddSpec(type(full_spec(4))):
        pass

    with pytest.raises(TypeError, match="no KV cache manager"):
        get_manager_for_kv_cache_spec(
            OddSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32"), 16, 64, **kw
        )
