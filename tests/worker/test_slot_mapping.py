"""Slot-mapping arithmetic, incl. context parallelism, against pure-Python references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.worker import (
    PAD_SLOT_ID,
    BlockTable,
    compute_slot_ids,
    query_start_loc_to_req_indices,
)


def _reference_cp_slot(row, pos, block_size, world, rank, interleave):
    """Deal positions of each virtual block to ranks in runs; count this rank's earlier tokens."""
    virtual = block_size * world
    vb, off = divmod(pos, virtual)

    def owner(o):
        return (o // interleave) % world

    if owner(off) != rank:
        return PAD_SLOT_ID
    local = sum(1 for o in range(off) if owner(o) == rank)
    return row[vb] * block_size + local


def test_query_start_loc_to_req_indices():
    assert query_start_loc_to_req_indices([0, 2, 5, 6]).tolist() == [0, 0, 1, 1, 1, 2]
    assert query_start_loc_to_req_indices([0, 0, 3]).tolist() == [1, 1, 1]
    assert query_start_loc_to_req_indices([0]).tolist() == []
    with pytest.raises(ValueError, match="starting at 0"):
        query_start_loc_to_req_indices([1, 2])
    with pytest.raises(ValueError, match="non-decreasing"):
        query_start_loc_to_req_indices([0, 3, 2])


def test_cp_two_ranks_interleave_one_worked_example():
    # block_size=2, world 2: virtual block of 4 positions dealt 0,1,0,1 to ranks.
    table = np.array([[7, 9]], dtype=np.int32)
    pos = np.arange(8)
    req = np.zeros(8, dtype=np.int64)
    r0 = compute_slot_ids(table, 2, req, pos, total_cp_world_size=2, total_cp_rank=0)
    r1 = compute_slot_ids(table, 2, req, pos, total_cp_world_size=2, total_cp_rank=1)
    assert r0.tolist() == [14, -1, 15, -1, 18, -1, 19, -1]
    assert r1.tolist() == [-1, 14, -1, 15, -1, 18, -1, 19]


def test_cp_interleave_two_worked_example():
    # block_size=4, world 2, interleave 2: offsets 0-1 -> rank 0, 2-3 -> rank 1, 4-5 -> rank 0 ...
    table = np.array([[3]], dtype=np.int32)
    pos = np.arange(8)
    req = np.zeros(8, dtype=np.int64)
    r0 = compute_slot_ids(table, 4, req, pos, 2, 0, 2)
    assert r0.tolist() == [12, 13, -1, -1, 14, 15, -1, -1]


@settings(max_examples=60, deadline=None)
@given(
    block_size=st.sampled_from([1, 2, 4, 8]),
    dcp=st.sampled_from([1, 2, 4]),
    pcp=st.sampled_from([1, 2]),
    interleave=st.sampled_from([1, 2, 4]),
    data=st.data(),
)
def test_block_table_cp_slots_match_reference(block_size, dcp, pcp, interleave, data):
    interleave = min(interleave, block_size)
    world = dcp * pcp
    rows = data.draw(
        st.lists(st.lists(st.integers(0, 500), min_size=1, max_size=4), min_size=1, max_size=3)
    )
    tokens = data.draw(
        st.lists(
            st.integers(0, len(rows) - 1).flatmap(
                lambda r: st.tuples(
                    st.just(r), st.integers(0, len(rows[r]) * block_size * world - 1)
                )
            ),
            max_size=20,
        )
    )
    req = np.array([t[0] for t in tokens], dtype=np.int64)
    pos = np.array([t[1] for t in tokens], dtype=np.int64)
    owners_per_token = np.zeros(len(tokens), dtype=np.int64)
    for dcp_rank in range(dcp):
        for pcp_rank in range(pcp):
            bt = BlockTable(
                block_size,
                len(rows),
                4,
                32,
                None,
                None,
                block_size,
                interleave,
                dcp_world_size=dcp,
                dcp_rank=dcp_rank,
                pcp_world_size=pcp,
                pcp_rank=pcp_rank,
            )
            for r, ids in enumerate(rows):
                bt.add_row(ids, r)
            got = bt.compute_slot_mapping(req, pos).tolist()
            rank = pcp_rank * dcp + dcp_rank
            expected = [
                _reference_cp_slot(rows[r], p, block_size, world, rank, interleave)
                for r, p in tokens
            ]
            assert got == expected
            owners_per_token += np.array(got, dtype=np.int64) != PAD_SLOT_ID
    # Every token is stored by exactly one rank.
    assert owners_per_token.tolist() == [1] * len(tokens)


def test_cp_local_offsets_fill_each_block_exactly_once():
    block_size, world, interleave = 4, 4, 2
    table = np.array([[0]], dtype=np.int32)
    pos = np.arange(block_size * world)
    req = np.zeros_like(pos)
    for rank in range(world):
        slots = compute_slot_ids(table, block_size, req, pos, world, rank, interleave)
        assert sorted(s for s in slots.tolist() if s != PAD_SLOT_ID) == list(range(block_size))
