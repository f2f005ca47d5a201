"""MultiGroupBlockTable: per-group routing, row sizing (128-token alignment), atomic edits."""

from __future__ import annotations

import pytest

from kvlab.worker import MultiGroupBlockTable, align_max_num_blocks, default_max_num_blocks


def _mg(**kw) -> MultiGroupBlockTable:
    args = {
        "max_num_reqs": 3,
        "max_model_len": 100,
        "max_num_batched_tokens": 16,
        "pin_memory": False,
        "device": None,
        "block_sizes": [4, 8],
        "kernel_block_sizes": [4, 4],
        "max_num_blocks": [4, 2],
    }
    args.update(kw)
    return MultiGroupBlockTable(**args)


def test_default_row_sizes_and_alignment():
    # cdiv(100, 16) = 7 -> multiple of 128 // 16 = 8; cdiv(100, 32) = 4 -> multiple of 4;
    # 256-token blocks are not aligned.
    assert default_max_num_blocks(100, [16, 32, 256]) == [7, 4, 1]
    assert align_max_num_blocks([7, 4, 1], [16, 32, 256]) == [8, 4, 1]
    mg = _mg(block_sizes=[16, 32, 256], kernel_block_sizes=[16, 16, 256], max_num_blocks=None)
    assert [t.max_num_blocks_per_req for t in mg.block_tables] == [8, 8, 1]  # 4 * 2 kernel blocks
    # Context parallelism: each rank stores max_model_len / world tokens.
    assert default_max_num_blocks(100, [16], total_cp_world_size=2) == [4]
    mg2 = _mg(block_sizes=[16], kernel_block_sizes=[16], max_num_blocks=None, dcp_world_size=2)
    assert mg2[0].max_num_blocks_per_req == 8


def test_rows_route_per_group_and_slots_differ_by_block_size():
    mg = _mg()
    # max_num_blocks [4, 2] rounded up to 128 tokens: 32 and 16 blocks (32 kernel blocks each).
    assert [t.max_num_blocks_per_req for t in mg.block_tables] == [32, 32]
    mg.add_row(([3, 5], [2]), 0)
    mg.append_row(([9], []), 0)
    mg.add_row(([1], [0]), 1)
    assert mg[0].get_row(0) == [3, 5, 9] and mg[1].get_row(0) == [4, 5]
    assert len(mg) == 2
    g0, g1 = mg.compute_slot_mapping([0, 0, 1], [1, 6, 3])
    assert g0.tolist() == [13, 22, 7]  # 4-token blocks
    assert g1.tolist() == [17, 22, 3]  # 8-token blocks split into 4-token kernel blocks
    mg.swap_row(0, 1)
    assert mg[0].get_row(0) == [1] and mg[1].get_row(1) == [4, 5]
    mg.move_row(1, 2)
    assert mg[0].get_row(2) == [3, 5, 9]
    mg.clear_row(2)
    assert mg[0].num_blocks_per_row.tolist() == [1, 3, 0]
    mg.clear()
    assert mg[1].num_blocks_per_row.tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda mg: mg.append_row(([1],), 0), ValueError, "block_ids has 1 groups, expected 2"),
        # group 1 overflows: group 0 must not be touched either.
        # (rows hold 32 kernel blocks after the 128-token alignment)
        (
            lambda mg: mg.append_row(([1], [7] * 16), 0),
            ValueError,
            "row 0 holds 2 kernel blocks; adding 32 exceeds max_num_blocks_per_req=32",
        ),
        (lambda mg: mg.add_row(([1], [-1]), 0), ValueError, "block ids must be in"),
        (lambda mg: mg.add_row(([1], [1]), 3), ValueError, "row_idx 3 out of range"),
        (lambda mg: mg.swap_row(0, 3), ValueError, "tgt 3 out of range"),
        (lambda mg: mg.compute_slot_mapping([0], [8]), ValueError, "needs block index 2"),
    ],
)
def test_bad_multi_group_edits_change_no_group(call, exc, match):
    mg = _mg()
    mg.add_row(([3, 5], [2]), 0)
    mg.compute_slot_mapping([0], [0])
    before = [
        (t.block_table.np.tolist(), t.num_blocks_per_row.tolist(), t.slot_mapping.np.tolist())
        for t in mg.block_tables
    ]
    with pytest.raises(exc, match=match):
        call(mg)
    after = [
        (t.block_table.np.tolist(), t.num_blocks_per_row.tolist(), t.slot_mapping.np.tolist())
        for t in mg.block_tables
    ]
    assert after == before


def test_mismatched_group_lists():
    with pytest.raises(ValueError, match="kernel_block_sizes length"):
        _mg(kernel_block_sizes=[4])
    with pytest.raises(ValueError, match="max_num_blocks length"):
        _mg(max_num_blocks=[4])


def test_commit_with_torch_mirror():
    pytest.importorskip("torch")
    mg = _mg(device="cpu")
    mg.add_row(([3], [2]), 0)
    mg.compute_slot_mapping([0], [3])
    mg.commit_block_table(1)
    mg.commit_slot_mapping(1)
    assert mg[1].get_device_tensor(1)[0, :2].tolist() == [4, 5]
    assert [t.slot_mapping.gpu[0].item() for t in mg.block_tables] == [15, 19]
