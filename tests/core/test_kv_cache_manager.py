"""KVCacheManager: the allocate_slots stages, the public API, bad input, and the recorder.

Allocation scenarios are checked against vLLM 0.22.1's results for the same calls (lookahead
from tests/v1/core/test_kv_cache_utils.py, the admission gate from test_prefix_caching.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from _core_top_helpers import (  # noqa: F401 (none_hash is an autouse fixture)
    ListRecorder,
    check_invariants,
    config,
    full_spec,
    make_request,
    manager,
    none_hash,
    pool_free_ids,
    sw_spec,
)

from kvlab.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from kvlab.core.request import Request
from kvlab.core.request_params import SamplingParams


def _state(mgr: KVCacheManager) -> tuple:
    """Everything a call may change, as plain values."""
    pool = mgr.block_pool
    per_group = tuple(
        (
            {rid: [b.block_id for b in bl] for rid, bl in m.req_to_blocks.items()},
            dict(m.num_cached_block),
            list(m.new_block_ids),
        )
        for m in mgr.coordinator.single_type_managers
    )
    blocks = tuple((b.ref_cnt, b.block_hash) for b in pool.blocks)
    cmap = {
        k: (v.block_id,) if not isinstance(v, dict) else tuple(v)
        for k, v in pool.cached_block_hash_to_block._cache.items()
    }
    return pool_free_ids(mgr), blocks, cmap, per_group, list(pool.kv_event_queue)


# ----------------------------------------------------------------------------- KVCacheBlocks
def test_kv_cache_blocks_helpers():
    mgr = manager(10, full_spec(4))
    req = make_request("r", list(range(10)), 4)
    new = mgr.allocate_slots(req, 10)
    assert new.get_block_ids() == ([1, 2, 3],)
    assert new.get_unhashed_block_ids() == [3]
    assert (new + new).get_block_ids() == ([1, 2, 3, 1, 2, 3],)
    assert new.new_empty().get_block_ids(allow_none=True) is None
    assert mgr.empty_kv_cache_blocks.get_block_ids() == ([],)
    two = KVCacheBlocks(([mgr.block_pool.null_block, new.blocks[0][2]], []))
    assert two.get_unhashed_block_ids_all_groups() == [[3], []]
    with pytest.raises(AssertionError, match="Only one group is supported"):  # as vLLM
        two.get_unhashed_block_ids()
    # As vLLM, groups are zipped: the shorter one decides (one group here).
    assert (two + new).get_block_ids() == ([0, 3, 1, 2, 3],)


# ----------------------------------------------------------------------------- allocation
def test_lookahead_slots_are_allocated_but_not_cached():
    for lookahead, expect in ((2, [1, 2]), (4, [1, 2])):
        mgr = manager(10, full_spec(4), max_model_len=100)
        req = make_request("0", [1, 2, 3], 4)
        new = mgr.allocate_slots(req, num_new_tokens=3, num_lookahead_tokens=lookahead)
        assert new.get_block_ids() == (expect,)
        assert len(mgr.block_pool.cached_block_hash_to_block) == 0


def test_max_model_len_caps_the_slots():
    mgr = manager(10, full_spec(4), max_model_len=10)
    req = make_request("0", list(range(9)), 4)
    new = mgr.allocate_slots(req, 9, num_lookahead_tokens=8)
    assert new.get_block_ids() == ([1, 2, 3],)


def test_external_computed_tokens_get_blocks_first():
    mgr = manager(10, full_spec(4))
    req = make_request("0", list(range(16)), 4)
    new = mgr.allocate_slots(req, 4, num_external_computed_tokens=8)
    assert new.get_block_ids() == ([3],)
    assert mgr.get_block_ids("0") == ([1, 2, 3],)
    assert mgr.coordinator.single_type_managers[0].num_cached_block["0"] == 3
    assert mgr.take_new_block_ids() == [1, 2, 3]
    assert mgr.take_new_block_ids() == []


def test_delay_cache_blocks_then_cache_later():
    mgr = manager(10, full_spec(4))
    req = make_request("0", list(range(16)), 4)
    new = mgr.allocate_slots(req, 0, num_external_computed_tokens=12, delay_cache_blocks=True)
    assert new.get_block_ids() == ([],) and mgr.get_block_ids("0") == ([1, 2, 3],)
    assert len(mgr.block_pool.cached_block_hash_to_block) == 0
    mgr.cache_blocks(req, 12)
    assert len(mgr.block_pool.cached_block_hash_to_block) == 3


def test_allocation_failure_changes_nothing_but_skipped_blocks():
    mgr = manager(8, full_spec(4), sw_spec(4, 4))
    req = make_request("0", list(range(12)), 4)
    assert mgr.allocate_slots(req, 8).get_block_ids() == ([1, 2], [3, 4])
    req.num_computed_tokens = 8
    other = make_request("1", list(range(100, 104)), 4)
    assert mgr.allocate_slots(other, 4).get_block_ids() == ([5], [6])
    # 8 computed tokens, window 4: the first sliding-window block is freed even though the
    # allocation of 2 + 1 blocks then fails (only 1 block is free before, 2 after).
    assert mgr.allocate_slots(req, 4, num_lookahead_tokens=4) is None
    assert mgr.get_block_ids("0") == ([1, 2], [0, 4])
    assert pool_free_ids(mgr) == [7, 3]
    check_invariants(mgr)


def test_full_sequence_must_fit_uses_the_sliding_window_cap():
    bs = 16
    specs = (full_spec(bs), sw_spec(bs, 4 * bs))
    kw = {"max_model_len": 64 * bs, "max_num_batched_tokens": 8 * bs}
    mgr = KVCacheManager(config(64 + 13 + 1, *specs), hash_block_size=bs, **kw)
    req = make_request("long", list(range(32 * bs)), bs)
    assert mgr.allocate_slots(req, bs, full_sequence_must_fit=True) is not None
    small = KVCacheManager(config(5, *specs), hash_block_size=bs, **kw)
    req = make_request("big", list(range(16 * bs)), bs)
    assert small.allocate_slots(req, bs, full_sequence_must_fit=True) is None
    assert small.allocate_slots(req, bs) is not None


def test_running_request_fast_path_and_spec_decode_rejections():
    mgr = manager(10, full_spec(4))
    req = make_request("0", list(range(6)), 4)
    assert mgr.allocate_slots(req, 6, num_lookahead_tokens=6).get_block_ids() == ([1, 2, 3],)
    req.num_computed_tokens = 6
    req.append_output_token_ids([9])
    # Drafts were rejected: the request holds more blocks than it needs now.
    assert mgr.allocate_slots(req, 1).get_block_ids() == ([],)
    assert mgr.get_block_ids("0") == ([1, 2, 3],)


# ----------------------------------------------------------------------------- API
def test_set_recorder_reaches_every_layer():
    mgr = manager(10, full_spec(4), sw_spec(4, 8))
    rec = ListRecorder()
    mgr.set_recorder(rec)
    assert mgr.recorder is rec and mgr.coordinator.recorder is rec
    assert all(m.recorder is rec for m in mgr.coordinator.single_type_managers)
    assert mgr.block_pool.recorder is rec and mgr.block_pool.free_block_queue.recorder is rec
    mgr.set_recorder(None)
    assert mgr.block_pool.free_block_queue.recorder is None
    built = KVCacheManager(
        config(10, full_spec(4)), max_model_len=64, hash_block_size=4, recorder=rec
    )
    assert built.coordinator.single_type_managers[0].recorder is rec


def test_usage_free_and_unknown_requests():
    mgr = manager(11, full_spec(4))
    req = make_request("0", list(range(20)), 4)
    mgr.allocate_slots(req, 20)
    assert mgr.usage == pytest.approx(0.5)
    assert mgr.get_block_ids("nobody") == ([],)
    assert mgr.get_blocks("nobody") is mgr.empty_kv_cache_blocks
    mgr.free(make_request("nobody", [1], 4))
    mgr.remove_skipped_blocks("nobody", 10)
    mgr.free(req)
    assert mgr.usage == 0.0


def test_evict_blocks_drops_hashes_only():
    mgr = manager(10, full_spec(4), enable_kv_cache_events=True)
    req = make_request("0", list(range(12)), 4)
    mgr.allocate_slots(req, 12)
    mgr.take_events()
    mgr.evict_blocks({3, 1, 7})
    assert [b.block_hash is None for b in mgr.block_pool.blocks[1:4]] == [True, False, True]
    assert [b.ref_cnt for b in mgr.block_pool.blocks[1:4]] == [1, 1, 1]
    assert len(mgr.take_events()) == 2
    with pytest.raises(ValueError, match="out of range"):
        mgr.evict_blocks({2, 10})
    with pytest.raises(ValueError, match="out of range"):
        mgr.evict_blocks({-1})
    with pytest.raises(TypeError, match="ints"):
        mgr.evict_blocks({"2"})
    assert mgr.block_pool.blocks[2].block_hash is not None


def test_common_prefix_blocks_per_group():
    mgr = manager(20, full_spec(4), sw_spec(4, 8))
    tokens = list(range(9))
    for rid in ("a", "b"):
        req = make_request(rid, tokens, 4)
        blocks, hit = mgr.get_computed_blocks(req)
        mgr.allocate_slots(req, 9 - hit, hit, blocks)
    assert mgr.get_num_common_prefix_blocks("a") == [2, 0]
    with pytest.raises(KeyError, match="holds no blocks"):
        mgr.get_num_common_prefix_blocks("zzz")
    assert "zzz" not in mgr.coordinator.single_type_managers[0].req_to_blocks


def test_take_events_stamps_known_groups_only():
    from kvlab.core.kv_events import BlockStored

    mgr = manager(5, full_spec(4), enable_kv_cache_events=True)
    event = BlockStored(
        block_hashes=[1], parent_block_hash=None, token_ids=[0, 1, 2, 3], block_size=4,
        lora_id=None, medium=None, lora_name=None, group_idx=1,
    )  # fmt: skip
    mgr.block_pool.kv_event_queue.append(event)
    assert mgr.take_events() == [event] and event.kv_cache_spec_kind is None
    assert manager(5, full_spec(4)).take_events() == []


def test_constructor_rejects_bad_sizes_and_cross_attention_caching():
    from kvlab.core.kv_cache_interface import CrossAttentionSpec

    with pytest.raises(ValueError, match="max_model_len"):
        KVCacheManager(config(5, full_spec(4)), max_model_len=0, hash_block_size=4)
    with pytest.raises(ValueError, match="hash_block_size"):
        KVCacheManager(config(5, full_spec(4)), max_model_len=8, hash_block_size=-4)
    with pytest.raises(TypeError, match="KVCacheConfig"):
        KVCacheManager(object(), max_model_len=8, hash_block_size=4)
    cross = CrossAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    with pytest.raises(ValueError, match="enable_caching=False"):
        KVCacheManager(config(5, full_spec(4), cross), max_model_len=8, hash_block_size=4)
    mgr = KVCacheManager(
        config(10, full_spec(4), cross), max_model_len=64, hash_block_size=4, enable_caching=False
    )
    req = make_request("0", list(range(5)), 4)
    new = mgr.allocate_slots(req, 5, num_encoder_tokens=9)
    assert new.get_block_ids() == ([1, 2], [3, 4, 5])


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_new_tokens": 0}, ValueError, "num_new_tokens must be > 0"),
        ({"num_new_tokens": -1}, ValueError, "num_new_tokens must be >= 0"),
        ({"num_new_tokens": 2.0}, TypeError, "num_new_tokens must be an int"),
        ({"num_new_tokens": 4, "num_lookahead_tokens": -2}, ValueError, "num_lookahead_tokens"),
        ({"num_new_tokens": 4, "num_new_computed_tokens": 4}, ValueError, "needs the hit blocks"),
        ({"num_new_tokens": 4, "new_computed_blocks": [[]]}, TypeError, "KVCacheBlocks"),
        (
            {"num_new_tokens": 4, "new_computed_blocks": KVCacheBlocks(((), ()))},
            ValueError,
            "2 groups",
        ),
    ],
)
def test_allocate_slots_rejects_bad_arguments_without_changes(kwargs, error, match):
    mgr = manager(10, full_spec(4))
    rec = ListRecorder()
    mgr.set_recorder(rec)
    req = make_request("0", list(range(8)), 4)
    before = _state(mgr)
    with pytest.raises(error, match=match):
        mgr.allocate_slots(req, **kwargs)
    assert _state(mgr) == before and rec.calls == []


def test_hits_for_running_or_uncached_requests_are_rejected():
    mgr = manager(10, full_spec(4))
    req0 = make_request("0", list(range(9)), 4)
    mgr.allocate_slots(req0, 9)
    req1 = make_request("1", list(range(9)), 4)
    blocks, hit = mgr.get_computed_blocks(req1)
    req0.num_computed_tokens = 9
    before = _state(mgr)
    with pytest.raises(ValueError, match="running"):
        mgr.allocate_slots(req0, 1, hit, blocks)
    assert _state(mgr) == before
    off = manager(10, full_spec(4), enable_caching=False)
    with pytest.raises(ValueError, match="disabled"):
        off.allocate_slots(req1, 1, hit, blocks)
    plain = manager(10, full_spec(4), enable_caching=False)
    r = make_request("p", list(range(8)), 4)
    plain.allocate_slots(r, 4)
    with pytest.raises(ValueError, match="already holds blocks"):
        plain.allocate_slots(r, 4, num_external_computed_tokens=4)


def test_missing_block_hashes_are_rejected_before_allocation():
    mgr = manager(10, full_spec(4))
    req = Request("0", list(range(8)), SamplingParams(max_tokens=4), None)  # no block_hasher
    before = _state(mgr)
    with pytest.raises(ValueError, match="block hashes"):
        mgr.allocate_slots(req, 8)
    assert _state(mgr) == before
    assert mgr.allocate_slots(req, 8, delay_cache_blocks=True) is not None


def test_cache_blocks_and_other_calls_reject_bad_input():
    mgr = manager(10, full_spec(4))
    req = make_request("0", list(range(12)), 4)
    mgr.allocate_slots(req, 8)
    before = _state(mgr)
    with pytest.raises(ValueError, match="holds 2"):
        mgr.cache_blocks(req, 12)
    with pytest.raises(ValueError, match=">= 0"):
        mgr.cache_blocks(req, -4)
    with pytest.raises(ValueError, match=">= 0"):
        mgr.remove_skipped_blocks("0", -1)
    assert _state(mgr) == before
    fake = SimpleNamespace(
        request_id="e", num_tokens=0, block_hashes=[], skip_reading_prefix_cache=False
    )
    with pytest.raises(ValueError, match="no tokens"):
        mgr.get_computed_blocks(fake)


# ----------------------------------------------------------------------------- recorder
def test_recorder_brackets_every_call_with_its_arguments():
    mgr = manager(6, full_spec(4), log_stats=True)
    rec = ListRecorder()
    mgr.set_recorder(rec)
    req = make_request("r", list(range(10)), 4)
    blocks, hit = mgr.get_computed_blocks(req)
    mgr.allocate_slots(req, 10, hit, blocks, num_lookahead_tokens=1)
    big = make_request("big", list(range(50, 70)), 4)
    assert mgr.allocate_slots(big, 20) is None
    mgr.cache_blocks(req, 10)
    mgr.remove_skipped_blocks("r", 10)
    mgr.evict_blocks({2, 1})
    assert not mgr.reset_prefix_cache()
    mgr.new_step_starts()
    mgr.free(req)
    assert mgr.reset_prefix_cache()
    brackets = [c for c in rec.calls if c[0] in ("begin_call", "end_call")]
    assert brackets == [
        ("begin_call", "get_computed_blocks", "r", (10, 2)),
        ("end_call", "get_computed_blocks", (0,)),
        ("begin_call", "allocate_slots", "r", (0, 0, 0, 10, 1, 0, 0, 0)),
        ("end_call", "allocate_slots", (1, 3)),
        ("begin_call", "allocate_slots", "big", (0, 0, 0, 20, 0, 0, 0, 0)),
        ("end_call", "allocate_slots", (0, 5)),
        ("begin_call", "cache_blocks", "r", (10,)),
        ("end_call", "cache_blocks", ()),
        ("begin_call", "remove_skipped_blocks", "r", (10,)),
        ("end_call", "remove_skipped_blocks", ()),
        ("begin_call", "evict_blocks", None, (1, 2)),
        ("end_call", "evict_blocks", ()),
        ("begin_call", "reset_prefix_cache", None, ()),
        ("end_call", "reset_prefix_cache", (0,)),
        ("begin_call", "new_step_starts", None, ()),
        ("end_call", "new_step_starts", ()),
        ("begin_call", "free", "r", ()),
        ("end_call", "free", ()),
        ("begin_call", "reset_prefix_cache", None, ()),
        ("end_call", "reset_prefix_cache", (1,)),
    ]
    mine = [c for c in rec.calls if c[0] in ("req_blocks_add", "req_blocks_null", "req_free")]
    # vLLM's allocate_new_blocks reads the entry (creating it) before it pops the blocks.
    assert mine == [
        ("req_blocks_add", "r", 0, ()),
        ("req_blocks_add", "r", 0, (1, 2, 3)),
        ("req_free", "r", 0),
    ]


def test_recorder_events_nest_inside_allocate_slots():
    mgr = manager(20, full_spec(4), sw_spec(4, 4))
    req0 = make_request("a", list(range(13)), 4)
    mgr.allocate_slots(req0, 13)
    mgr.free(req0)
    rec = ListRecorder()
    mgr.set_recorder(rec)
    req1 = make_request("b", list(range(13)), 4)
    blocks, hit = mgr.get_computed_blocks(req1)
    assert hit == 12 and blocks.get_block_ids() == ([1, 2, 3], [0, 0, 7])
    rec.calls.clear()
    mgr.allocate_slots(req1, 1, hit, blocks)
    names = [c[0] for c in rec.calls]
    assert names[0] == "begin_call" and names[-1] == "end_call"
    mine = [c for c in rec.calls if c[0].startswith("req_")]
    assert mine == [
        ("req_blocks_add", "b", 1, ()),  # remove_skipped_blocks reads the new request's entry
        ("req_blocks_add", "b", 0, ()),  # allocate_new_computed_blocks creates it, then touches
        ("req_blocks_add", "b", 0, (1, 2, 3)),
        ("req_blocks_add", "b", 1, (0, 0, 7)),  # 2 skipped positions + the hit in the window
        ("req_blocks_add", "b", 0, (9,)),
        ("req_blocks_add", "b", 1, (10,)),
    ]
    # vLLM's touch loop: each hit leaves the free queue, then its ref_cnt goes up.
    assert rec.calls[3:9] == [("remove", 1), ("touch", (1,)), ("remove", 2), ("touch", (2,)),
                               ("remove", 3), ("touch", (3,))]  # fmt: skip
    # full: 1 new + 3 evictable hits; window: 1 new + 1 evictable hit.
    assert rec.calls[-1] == ("end_call", "allocate_slots", (1, 6))
    check_invariants(mgr)
