"""KVState: fresh pools, live snapshots, canonical equality, diffs and copies."""

from __future__ import annotations

import pytest
from _trace_helpers import admit, init_hashing, make_manager, make_request

from kvlab.core.block_pool import BlockPool
from kvlab.trace import KVState


def test_fresh_state_mirrors_a_new_block_pool() -> None:
    pool = BlockPool(num_gpu_blocks=6, enable_caching=True, hash_block_size=4)
    assert KVState.fresh(6, num_groups=0) == KVState.from_manager(pool)
    assert KVState.fresh(6).free_queue_order() == [1, 2, 3, 4, 5]


def test_from_manager_captures_every_field() -> None:
    init_hashing()
    m = make_manager(12)
    a, b = make_request("a", list(range(10))), make_request("b", list(range(10)))
    assert admit(m, a) and admit(m, b)
    m.free(a)
    s = KVState.from_manager(m)
    assert s.null_block_id == 0
    assert s.free_queue_order() == [5, 6, 7, 8, 9, 10, 11, 3]
    assert s.ref_cnt[:5] == [0, 1, 1, 0, 1]
    assert s.blocks_of("b") == [1, 2, 4] and s.blocks_of("a") == []
    canon = s.canonical()
    assert [k[-4:] for k in canon["cached"]] == [b"\x00\x00\x00\x00"] * 2
    assert sorted(ids[0] for ids in canon["cached"].values()) == [1, 2]
    assert s.num_free_blocks == 8


def test_equality_ignores_intern_order_but_not_content() -> None:
    init_hashing()
    m = make_manager(12)
    assert admit(m, make_request("a", list(range(10))))
    x = KVState.from_manager(m)
    y = KVState.from_manager(m)
    y.tables.request_index("unrelated")  # different tables, same state
    assert x == y and x.diff(y) == []
    y.ref_cnt[5] = 3
    assert x != y
    assert x.diff(y) == ["ref_cnt differs at block_ids [5]: 5: 0 != 3"]


def test_copy_is_independent() -> None:
    s = KVState.fresh(4)
    s.req_to_blocks[0][0] = [1]
    c = s.copy()
    c.free_queue.popitem(last=False)
    c.req_to_blocks[0][0].append(2)
    c.ref_cnt[1] = 5
    assert s.free_queue_order() == [1, 2, 3] and s.req_to_blocks[0][0] == [1] and s.ref_cnt[1] == 0


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="num_blocks > 0"):
        KVState.fresh(0)
    with pytest.raises(TypeError, match="KVCacheManager or BlockPool"):
        KVState.from_manager(object())
