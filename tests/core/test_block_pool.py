"""BlockHashToBlockMap and BlockPool: allocate, cache, evict, touch, free, reset, events, hooks.

Scenarios follow the BlockPool parts of vLLM 0.22.1's tests/v1/core/test_prefix_caching.py
(rewritten); exact block-id orders are worked out in the comments.
"""

from __future__ import annotations

import pytest

from kvlab.core import kv_cache_utils as bh
from kvlab.core.block_pool import BlockHashToBlockMap, BlockPool
from kvlab.core.kv_cache_utils import (
    BlockHash,
    BlockHashWithGroupId,
    KVCacheBlock,
    get_request_block_hasher,
    init_none_hash,
    make_block_hash_with_group_id,
    sha256,
)
from kvlab.core.kv_events import MEDIUM_GPU, AllBlocksCleared, BlockRemoved, BlockStored
from kvlab.core.request import LoRARequest, Request, SamplingParams


@pytest.fixture(autouse=True)
def _none_hash(monkeypatch):
    monkeypatch.setattr(bh, "KV_EVENTS_USE_INT_BLOCK_HASHES", True)
    if not hasattr(bh, "NONE_HASH"):
        init_none_hash(sha256)


class ListRecorder:
    """Records every hook call as a tuple (name, *args), sequences turned into lists."""

    def __init__(self):
        self.events = []

    def __getattr__(self, name):
        def hook(*args):
            self.events.append(
                (name, *[list(a) if isinstance(a, (list, tuple)) else a for a in args])
            )

        return hook


def make_request(tokens, block_size=2, request_id="r", **kwargs):
    return Request(
        request_id,
        list(tokens),
        SamplingParams(max_tokens=4),
        None,
        block_hasher=get_request_block_hasher(block_size, sha256),
        **kwargs,
    )


def free_ids(pool):
    return [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]


def key(h, group=0):
    return make_block_hash_with_group_id(h, group)


def as_int(h):
    return int.from_bytes(h, "big") & ((1 << 64) - 1)


# --- BlockHashToBlockMap ---------------------------------------------------------------


def test_map_single_block_per_key():
    cache = BlockHashToBlockMap()
    k0, k1 = BlockHashWithGroupId(b"hash0"), BlockHashWithGroupId(b"hash1")
    b0, b1 = KVCacheBlock(0), KVCacheBlock(1)
    assert cache.get_one_block(k0) is None
    cache.insert(k0, b0)
    cache.insert(k1, b1)
    assert cache.get_one_block(k0) is b0 and cache.get_one_block(k1) is b1 and len(cache) == 2
    assert cache.pop(k0, 100) is None and cache.get_one_block(k0) is b0  # id mismatch: kept
    assert cache.pop(k0, 0) is b0 and cache.get_one_block(k0) is None
    assert cache.pop(k0, 0) is None
    assert cache.pop(k1, 1) is b1 and len(cache) == 0


def test_map_multiple_blocks_per_key_first_inserted_wins():
    cache = BlockHashToBlockMap()
    k0 = BlockHashWithGroupId(b"hash0")
    b0, b1, b2 = KVCacheBlock(0), KVCacheBlock(1), KVCacheBlock(2)
    for b in (b0, b1, b2):
        cache.insert(k0, b)
    assert cache._cache == {k0: {0: b0, 1: b1, 2: b2}}
    assert cache.get_one_block(k0) is b0
    assert cache.pop(k0, 7) is None and cache.get_one_block(k0) is b0
    assert cache.pop(k0, 0) is b0 and cache.get_one_block(k0) is b1
    assert cache.pop(k0, 1) is b1 and cache.pop(k0, 2) is b2
    assert cache.get_one_block(k0) is None and len(cache) == 0


def test_maybe_evict_cached_block_keeps_key_while_duplicates_remain():
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=16)
    k0, k1, k2 = (
        key(BlockHash(b"10"), 1000),
        key(BlockHash(b"20"), 2000),
        key(BlockHash(b"30"), 3000),
    )
    for block, k in zip(pool.blocks, [k0, k1, k2, k0], strict=True):
        block.block_hash = k
        pool.cached_block_hash_to_block.insert(k, block)
    b0, b1, b2, b3 = pool.blocks
    assert pool._maybe_evict_cached_block(b1) is True
    assert pool.cached_block_hash_to_block._cache == {k0: {0: b0, 3: b3}, k2: b2}
    assert pool._maybe_evict_cached_block(b0) is True
    assert pool.cached_block_hash_to_block._cache == {k0: {3: b3}, k2: b2}
    assert pool._maybe_evict_cached_block(b0) is False  # no hash any more
    pool._maybe_evict_cached_block(b2)
    pool._maybe_evict_cached_block(b3)
    assert pool.cached_block_hash_to_block._cache == {} and b3.block_hash is None


# --- allocation and free order ---------------------------------------------------------


def test_init_pops_null_block():
    pool = BlockPool(num_gpu_blocks=5, enable_caching=True, hash_block_size=4)
    assert pool.null_block is pool.blocks[0] and pool.null_block.is_null
    assert free_ids(pool) == [1, 2, 3, 4] and pool.get_num_free_blocks() == 4
    assert pool.get_usage() == 0.0
    assert BlockPool(1, True, 4).get_usage() == 0
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="num_gpu_blocks"):
            BlockPool(bad, True, 4)
    with pytest.raises(ValueError, match="hash_block_size"):
        BlockPool(4, True, 0)


def test_get_new_blocks_and_free_in_eviction_order():
    pool = BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=4)
    a = pool.get_new_blocks(3)
    b = pool.get_new_blocks(2)
    assert [x.block_id for x in a] == [1, 2, 3] and [x.block_id for x in b] == [4, 5]
    assert all(x.ref_cnt == 1 for x in a + b) and free_ids(pool) == [6, 7]
    assert pool.get_usage() == pytest.approx(5 / 7)
    pool.free_blocks(reversed(a))  # a request frees its tail block first
    pool.free_blocks(reversed(b))
    assert free_ids(pool) == [6, 7, 3, 2, 1, 5, 4]
    assert [x.block_id for x in pool.get_new_blocks(4)] == [6, 7, 3, 2]


def test_free_blocks_shared_block_stays_until_last_reference():
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=4)
    blocks = pool.get_new_blocks(2)
    pool.touch([blocks[0]])  # a second request shares block 1
    assert blocks[0].ref_cnt == 2
    pool.free_blocks(reversed(blocks))
    assert free_ids(pool) == [3, 2] and blocks[0].ref_cnt == 1
    pool.free_blocks([blocks[0]])
    assert free_ids(pool) == [3, 2, 1]


def test_free_blocks_caller_built_blocks_follow_vllm_whatever_their_ref_cnt():
    # vLLM's test_single_type_kv_cache_manager frees KVCacheBlock(1000), ... built outside the
    # pool with ref_cnt 0: vLLM takes them to -1 and appends nothing; kvlab does the same.
    pool = BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=4)
    held = pool.get_new_blocks(2)  # blocks 1, 2
    outside = [KVCacheBlock(3), KVCacheBlock(1000)]  # id 3 is the pool's, this object is not
    pool.free_blocks([outside[0], held[1], outside[1]])
    assert [b.ref_cnt for b in outside] == [-1, -1] and held[1].ref_cnt == 0
    assert free_ids(pool) == [3, 4, 5, 6, 7, 2]
    # One with ref_cnt 1 reaches 0 and joins the queue, as in vLLM.
    extra = KVCacheBlock(1001, ref_cnt=1)
    pool.free_blocks([extra])
    assert extra.ref_cnt == 0 and free_ids(pool) == [3, 4, 5, 6, 7, 2, 1001]


@pytest.mark.parametrize("twice", ["queued", "listed twice"])
def test_free_blocks_double_free_of_a_pool_block_raises_and_changes_nothing(twice):
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=4)
    a, b = pool.get_new_blocks(2)  # blocks 1, 2
    pool.free_blocks([b])
    blocks = [a, b] if twice == "queued" else [a, a]
    with pytest.raises(ValueError, match=r"block \d is already free \(ref_cnt 0\)"):
        pool.free_blocks(blocks)
    assert (a.ref_cnt, b.ref_cnt) == (1, 0) and free_ids(pool) == [3, 2]


@pytest.mark.parametrize("n", [4, -1])
def test_get_new_blocks_bad_count_raises_and_changes_nothing(n):
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=4)
    with pytest.raises(ValueError, match=rf"Cannot get {n} free blocks from the pool: 3 free"):
        pool.get_new_blocks(n)
    assert free_ids(pool) == [1, 2, 3] and all(b.ref_cnt == 0 for b in pool.blocks[1:])


def test_touch_removes_free_cached_block_and_counts_null_block():
    pool = BlockPool(num_gpu_blocks=5, enable_caching=True, hash_block_size=2)
    req = make_request([1, 2, 3, 4])
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 2, 0)
    pool.free_blocks(reversed(blocks))
    assert free_ids(pool) == [3, 4, 2, 1]
    pool.touch([pool.blocks[1], pool.null_block])
    assert (
        free_ids(pool) == [3, 4, 2] and pool.blocks[1].ref_cnt == 1 and pool.null_block.ref_cnt == 1
    )
    assert pool.blocks[1].block_hash == key(req.block_hashes[0])  # still cached


# --- caching, lookup, eviction ---------------------------------------------------------


def test_cache_full_blocks_and_lookup():
    pool = BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=2)
    req = make_request([1, 2, 3, 4, 5])
    h0, h1 = req.block_hashes
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, blocks, 0, 1, 2, 0)
    pool.cache_full_blocks(req, blocks, 1, 2, 2, 0)
    pool.cache_full_blocks(req, blocks, 2, 2, 2, 0)  # nothing new: no-op
    assert [b.block_hash for b in blocks] == [key(h0), key(h1), None]
    assert [b.block_id for b in pool.get_cached_block(h0, [0])] == [1]
    assert pool.get_cached_block(h1, [0, 1]) is None  # group 1 misses
    # a second request fills an identical block: cached next to the first, no de-dup
    req2 = make_request([1, 2], request_id="r2")
    (dup,) = pool.get_new_blocks(1)
    pool.cache_full_blocks(req2, [dup], 0, 1, 2, 0)
    assert pool.cached_block_hash_to_block._cache[key(h0)] == {1: blocks[0], 4: dup}
    assert pool.get_cached_block(h0, [0]) == [blocks[0]]


def test_cache_full_blocks_skips_null_and_masked_blocks():
    pool = BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=2)
    req = make_request(range(8))
    b = pool.get_new_blocks(3)
    blocks = [pool.null_block, b[0], b[1], b[2]]
    pool.cache_full_blocks(req, blocks, 0, 4, 2, 0, block_mask=[True, True, False, True])
    assert pool.null_block.block_hash is None and b[1].block_hash is None
    assert b[0].block_hash == key(req.block_hashes[1]) and b[2].block_hash == key(
        req.block_hashes[3]
    )
    assert len(pool.cached_block_hash_to_block) == 2


def test_cache_full_blocks_with_bigger_block_size_concatenates_hashes():
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=2)
    req = make_request(range(9))  # 4 hashes at 2 tokens
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 1)
    h = req.block_hashes
    assert blocks[0].block_hash == key(h[0] + h[1], 1) and blocks[1].block_hash == key(
        h[2] + h[3], 1
    )
    assert pool.get_cached_block(h[2] + h[3], [1]) == [blocks[1]]


def test_cache_full_blocks_bad_input_changes_nothing():
    pool = BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=2)
    req = make_request([1, 2, 3])  # one hash
    blocks = pool.get_new_blocks(2)
    with pytest.raises(ValueError, match="1 block hashes, fewer than num_full_blocks=2"):
        pool.cache_full_blocks(req, blocks, 0, 2, 2, 0)
    with pytest.raises(ValueError, match="block_mask has 2 entries for 1"):
        pool.cache_full_blocks(req, blocks, 0, 1, 2, 0, block_mask=[True, True])
    with pytest.raises(ValueError, match="multiple of hash_block_size"):
        pool.cache_full_blocks(req, blocks, 0, 1, 3, 0)
    assert all(b.block_hash is None for b in blocks) and len(pool.cached_block_hash_to_block) == 0
    pool.cache_full_blocks(req, blocks, 0, 1, 2, 0)
    with pytest.raises(ValueError, match="block 1 is already cached"):
        pool.cache_full_blocks(req, blocks, 0, 1, 2, 0)
    assert len(pool.cached_block_hash_to_block) == 1


def test_lazy_eviction_on_reuse():
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=2)
    req = make_request([1, 2, 3, 4])
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 2, 0)
    pool.free_blocks(reversed(blocks))
    assert free_ids(pool) == [3, 2, 1]
    assert pool.get_cached_block(req.block_hashes[0], [0]) == [blocks[0]]  # still hit-able
    new = pool.get_new_blocks(2)  # 3 (never cached), then 2 (evicted now)
    assert [b.block_id for b in new] == [3, 2]
    assert blocks[1].block_hash is None and pool.get_cached_block(req.block_hashes[1], [0]) is None
    assert pool.get_cached_block(req.block_hashes[0], [0]) == [blocks[0]]


def test_caching_disabled_never_evicts():
    pool = BlockPool(num_gpu_blocks=3, enable_caching=False, hash_block_size=2)
    blocks = pool.get_new_blocks(2)
    pool.free_blocks(blocks)
    assert free_ids(pool) == [1, 2] and pool.take_events() == []


def test_evict_blocks_drops_hashes_only():
    pool = BlockPool(
        num_gpu_blocks=4, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True
    )
    req = make_request([1, 2, 3, 4])
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 2, 0)
    pool.take_events()
    with pytest.raises(ValueError, match="Invalid block_id 4"):
        pool.evict_blocks({1, 4})
    assert blocks[0].block_hash is not None  # checked before any change
    pool.evict_blocks({1, 3})
    assert (
        blocks[0].block_hash is None and blocks[0].ref_cnt == 1 and blocks[1].block_hash is not None
    )
    assert pool.take_events() == [BlockRemoved([as_int(req.block_hashes[0])], MEDIUM_GPU, 0)]


def test_reset_prefix_cache_refused_while_in_use():
    pool = BlockPool(
        num_gpu_blocks=4, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True
    )
    req = make_request([1, 2, 3, 4])
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, 2, 0)
    pool.take_events()
    assert pool.reset_prefix_cache() is False
    assert blocks[0].block_hash is not None and len(pool.cached_block_hash_to_block) == 2
    assert pool.take_events() == []
    pool.free_blocks(reversed(blocks))
    assert pool.reset_prefix_cache() is True
    assert (
        all(b.block_hash is None for b in pool.blocks) and len(pool.cached_block_hash_to_block) == 0
    )
    assert free_ids(pool) == [3, 2, 1]  # reset does not reorder the free queue
    assert pool.take_events() == [AllBlocksCleared()]  # one event, no BlockRemoved


# --- KV events -------------------------------------------------------------------------


def test_block_stored_events_chain_parents_and_carry_keys():
    pool = BlockPool(
        num_gpu_blocks=6, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True
    )
    req = make_request([5, 6, 7, 8, 9, 10], lora_request=LoRARequest("ad", 7), cache_salt="s")
    h = req.block_hashes
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, blocks, 0, 1, 2, 2)
    pool.cache_full_blocks(req, blocks, 1, 3, 2, 2)
    first, second = pool.take_events()
    assert first == BlockStored(
        block_hashes=[as_int(h[0])],
        parent_block_hash=None,
        token_ids=[5, 6],
        block_size=2,
        lora_id=7,
        medium=MEDIUM_GPU,
        lora_name="ad",
        extra_keys=[("ad", "s")],
        group_idx=2,
    )
    assert second.block_hashes == [
        as_int(h[1]),
        as_int(h[2]),
    ] and second.parent_block_hash == as_int(h[0])
    assert second.token_ids == [7, 8, 9, 10] and second.extra_keys == [("ad",), ("ad",)]
    assert pool.take_events() == []


def test_block_stored_event_skips_masked_blocks_but_keeps_their_tokens():
    pool = BlockPool(
        num_gpu_blocks=6, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True
    )
    req = make_request([1, 2, 3, 4, 5, 6])
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, blocks, 0, 3, 2, 0, block_mask=[False, True, True])
    (ev,) = pool.take_events()
    assert ev.block_hashes == [as_int(req.block_hashes[1]), as_int(req.block_hashes[2])]
    assert (
        ev.token_ids == [1, 2, 3, 4, 5, 6]
        and ev.extra_keys == [None, None]
        and ev.parent_block_hash is None
    )


def test_block_removed_event_on_eviction_and_events_off():
    pool = BlockPool(
        num_gpu_blocks=3, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True
    )
    req = make_request([1, 2])
    (blk,) = pool.get_new_blocks(1)
    pool.cache_full_blocks(req, [blk], 0, 1, 2, 5)
    pool.free_blocks([blk])
    pool.take_events()
    pool.get_new_blocks(2)  # pops 2 then 1: 1 is evicted
    assert pool.take_events() == [
        BlockRemoved(block_hashes=[as_int(req.block_hashes[0])], medium=MEDIUM_GPU, group_idx=5)
    ]
    quiet = BlockPool(num_gpu_blocks=3, enable_caching=True, hash_block_size=2)
    (blk,) = quiet.get_new_blocks(1)
    quiet.cache_full_blocks(req, [blk], 0, 1, 2, 0)
    assert quiet.take_events() == [] and quiet.kv_event_queue == []


def test_event_hashes_as_bytes_when_int_conversion_off(monkeypatch):
    monkeypatch.setattr(bh, "KV_EVENTS_USE_INT_BLOCK_HASHES", False)
    pool = BlockPool(
        num_gpu_blocks=3, enable_caching=True, hash_block_size=2, enable_kv_cache_events=True
    )
    req = make_request([1, 2])
    pool.cache_full_blocks(req, pool.get_new_blocks(1), 0, 1, 2, 0)
    assert pool.take_events()[0].block_hashes == [req.block_hashes[0]]


# --- metrics collector hooks -----------------------------------------------------------


def test_metrics_collector_hooks():
    calls = ListRecorder()

    class Collector:
        def __getattr__(self, name):
            return lambda *args: calls.events.append((name, *[a.block_id for a in args]))

    pool = BlockPool(
        num_gpu_blocks=4, enable_caching=True, hash_block_size=2, metrics_collector=Collector()
    )
    blocks = pool.get_new_blocks(2)
    pool.touch([blocks[0]])
    pool.free_blocks(blocks)
    pool.free_blocks([blocks[0]])
    assert pool.reset_prefix_cache()
    assert calls.events == [
        # vLLM's get_new_blocks loop: each popped block is evicted (if cached), then counted
        ("on_block_evicted", 1),
        ("on_block_allocated", 1),
        ("on_block_evicted", 2),
        ("on_block_allocated", 2),
        ("on_block_accessed", 1),
        ("reset",),
    ]


# --- recorder hooks --------------------------------------------------------------------


def test_recorder_event_sequence():
    pool = BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=2)
    rec = ListRecorder()
    pool.set_recorder(rec)
    assert pool.free_block_queue.recorder is rec
    req = make_request([1, 2, 3, 4, 5])
    h0, h1 = req.block_hashes
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, blocks, 0, 2, 2, 0)
    pool.get_cached_block(h0, [0, 1])  # hit in group 0, miss in group 1: stops
    pool.get_cached_block(h1, [1, 0])  # miss in group 1 first: group 0 not probed
    pool.free_blocks(reversed(blocks))  # ref counts drop first, then append_n
    pool.touch([blocks[0], pool.null_block])  # block 1 leaves the queue; null not queued
    pool.get_new_blocks(4)  # queue 4 5 3 2: block 2 evicted on reuse
    pool.get_new_blocks(0)  # nothing changes: nothing reported
    # Core reports block by block inside vLLM's loops (a recorder merges them into events).
    assert rec.events == [
        ("popleft_n", [1, 2, 3]),
        ("get_new_blocks", [1]),
        ("get_new_blocks", [2]),
        ("get_new_blocks", [3]),
        ("cache_full_blocks", "r", 0, 0, 2, [1, 2], [key(h0), key(h1)]),
        ("lookup", h0, 0, 1),
        ("lookup", h0, 1, -1),
        ("lookup", h1, 1, -1),
        ("free_blocks", [3, 2, 1]),
        ("append_n", [3, 2, 1]),
        ("remove", 1),
        ("touch", [1]),
        ("touch", [0]),
        ("popleft_n", [4, 5, 3, 2]),
        ("get_new_blocks", [4]),
        ("get_new_blocks", [5]),
        ("get_new_blocks", [3]),
        ("evict", 2, key(h1)),
        ("get_new_blocks", [2]),
    ]


def test_recorder_reset_and_single_block_queue_ops():
    pool = BlockPool(num_gpu_blocks=3, enable_caching=True, hash_block_size=2)
    rec = ListRecorder()
    pool.set_recorder(rec)
    req = make_request([1, 2])
    (blk,) = pool.get_new_blocks(1)
    pool.cache_full_blocks(req, [blk], 0, 1, 2, 0)
    assert pool.reset_prefix_cache() is False  # refused: no event
    pool.free_blocks([blk])
    assert pool.reset_prefix_cache() is True  # one reset, no per-block evict
    pool.free_block_queue.append(pool.free_block_queue.popleft())
    pool.evict_blocks([1])  # no hash left: nothing reported
    pool.set_recorder(None)
    pool.get_new_blocks(1)
    assert rec.events[-5:] == [
        ("free_blocks", [1]),
        ("append_n", [1]),
        ("reset",),
        ("popleft", 2),
        ("append", 2),
    ]
    assert pool.free_block_queue.recorder is None


# --- trust inside core, checks outside it -------------------------------------------------


def test_public_free_blocks_still_refuses_a_double_free_after_a_manager_free():
    # A manager frees through the pool (a caller inside kvlab.core: trusted, as in vLLM); a
    # call from here (outside core) is checked.
    from kvlab.core.kv_cache_interface import FullAttentionSpec
    from kvlab.core.single_type_kv_cache_manager import FullAttentionManager

    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=4)
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = FullAttentionManager(spec, block_pool=pool, enable_caching=True, kv_cache_group_id=0)
    a, b = mgr.allocate_new_blocks("r", 8, 8)
    mgr.free("r")
    with pytest.raises(ValueError, match=r"block 2 is already free \(ref_cnt 0\)"):
        pool.free_blocks([b])
    assert free_ids(pool) == [3, 2, 1] and (a.ref_cnt, b.ref_cnt) == (0, 0)


@pytest.mark.parametrize("method", ["touch", "free_blocks"])
def test_pool_methods_called_from_outside_core_get_full_checks(method):
    pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=4)
    before = free_ids(pool)
    with pytest.raises(TypeError, match=rf"{method}: .* must be an iterable of KVCacheBlock"):
        getattr(pool, method)([pool.blocks[1], "not a block"])
    assert free_ids(pool) == before and [b.ref_cnt for b in pool.blocks[1:]] == [0, 0, 0]
