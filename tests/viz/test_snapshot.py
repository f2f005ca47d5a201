"""Block status, pool cells, free-queue windows and block-table rows at exact events."""

from __future__ import annotations

import pytest

from kvlab.trace import EventKind, KVState, Trace
from kvlab.viz import (
    BlockStatus,
    block_cells,
    block_statuses,
    block_table_rows,
    free_queue_window,
)
from kvlab.viz.snapshot import group_label

S = BlockStatus
K = EventKind


def test_fresh_pool_is_null_then_free() -> None:
    assert block_statuses(KVState.fresh(4)) == [S.NULL, S.FREE, S.FREE, S.FREE]


def test_statuses_follow_the_shared_prefix_story(shared: Trace) -> None:
    c_alloc = shared.calls("allocate_slots", request="c")[0]
    popped = shared.find(K.POPLEFT_N, start=c_alloc.begin)
    assert shared.payload(popped) == [5, 6, 7, 8, 9, 3, 4, 2]
    # POPLEFT_N took 5 6 7 8 9 3 4 2 (ref_cnt still 0): in transit; 1 stays cached
    assert block_statuses(shared.state_at(popped)) == [S.NULL, S.EVICTABLE] + [S.IN_TRANSIT] * 8
    # vLLM's get_new_blocks counts block by block: 5 ... 4 are c's, 2 is still in transit
    # until its cached hash is evicted (BLOCK_REMOVED) and it is counted too
    counted = shared.find(K.GET_NEW_BLOCKS, start=popped)
    assert shared.payload(counted) == [5, 6, 7, 8, 9, 3, 4]
    assert shared.cols.kind[counted + 1] == K.BLOCK_REMOVED
    assert block_statuses(shared.state_at(counted + 1)) == (
        [S.NULL, S.EVICTABLE, S.IN_TRANSIT] + [S.IN_USE] * 7
    )
    # at the end of the call c holds all eight
    assert block_statuses(shared.state_at(c_alloc.end)) == [S.NULL, S.EVICTABLE] + [S.IN_USE] * 8
    # d's touch: REMOVE takes block 1 out of the queue (in transit), TOUCH counts it
    d_alloc = shared.calls("allocate_slots", request="d")[0]
    removed = shared.find(K.REMOVE, start=d_alloc.begin)
    assert shared.cols.kind[removed + 1] == K.TOUCH and shared.payload(removed + 1) == [1]
    assert block_statuses(shared.state_at(removed))[:3] == [S.NULL, S.IN_TRANSIT, S.FREE]
    # c's freed blocks are cached except block 2 (evicted in c's allocate_slots; c's last
    # block is partial so it was never re-cached)
    assert block_statuses(shared.state_at(removed + 1)) == (
        [S.NULL, S.IN_USE, S.FREE] + [S.EVICTABLE] * 7
    )


def test_cells_carry_ref_cnt_hash_and_owner(shared: Trace) -> None:
    cells = block_cells(shared, 20)  # a: 1 2 3, b: 1 2 4 (1 and 2 shared)
    assert [c.ref_cnt for c in cells[:5]] == [0, 2, 2, 1, 1]
    h0 = shared.tables.hash_bytes(0)[:4].hex()
    assert (cells[1].hash, cells[1].kv_cache_group_id) == (h0, 0)
    assert cells[3].hash is None and cells[0].kv_cache_group_id is None
    assert cells[5].status is S.FREE and cells[5].kv_cache_group_id is None


def test_owner_group_in_a_hybrid_pool(hybrid: Trace) -> None:
    cells = block_cells(hybrid, hybrid.calls("allocate_slots", request="b")[0].end)
    owners = {c.block_id: c.kv_cache_group_id for c in cells if c.kv_cache_group_id is not None}
    assert owners == {1: 0, 2: 0, 3: 0, 4: 0, 9: 0, 10: 0, 5: 1, 6: 1, 7: 1, 11: 1, 12: 1}


def test_cells_reject_an_index_outside_the_trace(shared: Trace) -> None:
    with pytest.raises(IndexError, match=rf"outside \[-1, {len(shared)}\)"):
        block_cells(shared, len(shared))
    with pytest.raises(IndexError):
        block_cells(shared, -2)


def test_free_queue_window_keeps_head_and_tail() -> None:
    order = list(range(100, 140))  # 40 blocks
    w = free_queue_window(order, 8)
    assert (w.head, w.tail, w.num_hidden, w.length) == (
        [100, 101, 102, 103, 104, 105],
        [138, 139],
        32,
        40,
    )
    assert free_queue_window(order[:8], 8).shown() == order[:8]
    with pytest.raises(ValueError, match="max_blocks must be >= 2"):
        free_queue_window(order, 1)


def test_block_table_rows_match_req_to_blocks(hybrid: Trace) -> None:
    rows = block_table_rows(hybrid.state_at(hybrid.calls("allocate_slots", request="b")[1].end))
    assert [(r.request_id, r.kv_cache_group_id, r.block_ids) for r in rows] == [
        ("b", 0, [1, 2, 3, 9, 10, 13]),
        ("b", 1, [0, 0, 0, 11, 12, 14]),
    ]
    assert block_table_rows(hybrid.state_at(-1)) == []


def test_group_label_names_spec_and_window(hybrid: Trace) -> None:
    assert group_label(hybrid.config, 0) == "group 0 · FullAttention"
    assert group_label(hybrid.config, 1) == "group 1 · SlidingWindow (window 8)"
    assert group_label({}, 3) == "group 3"
