"""BlockTable: row edits, kernel-block mapping, slot mapping (seed 002's worked table), errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kvlab.worker import PAD_SLOT_ID, BlockTable, map_to_kernel_blocks


def _table(block_size=4, max_num_reqs=3, max_blocks=4, max_tokens=16, **kw) -> BlockTable:
    return BlockTable(block_size, max_num_reqs, max_blocks, max_tokens, **kw)


def _snapshot(bt: BlockTable) -> tuple[list, list, list]:
    return (
        bt.block_table.np.tolist(),
        bt.num_blocks_per_row.tolist(),
        bt.slot_mapping.np.tolist(),
    )


# --------------------------------------------------------------------------- slot mapping
def test_seed_002_worked_slot_mapping_table():
    # Seed 002, section 5.3: block_size=4, rows [5, 8], [2, 3, 10], [12].
    bt = _table()
    bt.add_row([5, 8], 0)
    bt.add_row([2, 3, 10], 1)
    bt.add_row([12], 2)
    out = bt.compute_slot_mapping(np.array([0, 0, 1, 1, 1, 2]), np.array([3, 7, 2, 5, 9, 1]))
    assert out.tolist() == [23, 35, 10, 13, 41, 49]
    # The rest of the buffer is padding (vLLM 0.22.1's kernel pads for CUDA graphs).
    assert bt.slot_mapping.np[6:].tolist() == [PAD_SLOT_ID] * 10
    assert out.dtype == np.int64


def test_seed_002_docstring_example_block_size_2():
    # Seed 002's compute_slot_mapping docstring: rows [B0, B1], [B5, B6, B7], [B10, B11].
    bt = _table(block_size=2, max_tokens=10)
    bt.add_row([0, 1], 0)
    bt.add_row([5, 6, 7], 1)
    bt.add_row([10, 11], 2)
    out = bt.compute_slot_mapping([0, 0, 1, 1, 1, 1, 1, 2, 2, 2], [0, 1, 0, 1, 2, 3, 4, 0, 1, 2])
    assert out.tolist() == [0, 1, 10, 11, 12, 13, 14, 20, 21, 22]


def test_slot_mapping_matches_direct_formula_random():
    rng = np.random.default_rng(0)
    bt = _table(block_size=8, max_num_reqs=5, max_blocks=6, max_tokens=64)
    rows = [rng.choice(1000, size=rng.integers(1, 7), replace=False).tolist() for _ in range(5)]
    for r, ids in enumerate(rows):
        bt.add_row(ids, r)
    req = rng.integers(0, 5, size=50)
    pos = np.array([rng.integers(0, len(rows[r]) * 8) for r in req])
    expected = [rows[r][p // 8] * 8 + p % 8 for r, p in zip(req.tolist(), pos.tolist())]
    assert bt.compute_slot_mapping(req, pos).tolist() == expected


def test_slot_mapping_empty_batch_pads_everything():
    bt = _table()
    bt.slot_mapping.np[:] = 7
    assert bt.compute_slot_mapping([], []).tolist() == []
    assert bt.slot_mapping.np.tolist() == [PAD_SLOT_ID] * 16


@pytest.mark.parametrize(
    "req, pos, match",
    [
        ([0, 1], [0], "equal length"),
        ([3], [0], r"req_indices must be in \[0, 3\)"),
        ([0], [-1], "positions must be >= 0"),
        ([0, 1], [7, 8], "token 0: position 7 of row 0 needs block index 1 but the row holds 1"),
        ([0] * 17, [0] * 17, "17 tokens exceed max_num_batched_tokens=16"),
    ],
)
def test_slot_mapping_bad_input_changes_nothing(req, pos, match):
    bt = _table()
    bt.add_row([5], 0)
    bt.add_row([6, 9], 1)
    bt.compute_slot_mapping([1], [5])
    before = _snapshot(bt)
    with pytest.raises(ValueError, match=match):
        bt.compute_slot_mapping(req, pos)
    assert _snapshot(bt) == before


# --------------------------------------------------------------------------- kernel blocks
def test_map_to_kernel_blocks_examples():
    assert map_to_kernel_blocks(np.array([0, 1, 2]), 2).tolist() == [0, 1, 2, 3, 4, 5]
    assert map_to_kernel_blocks(np.array([7, 3]), 4).tolist() == [28, 29, 30, 31, 12, 13, 14, 15]
    arange = np.arange(2).reshape(1, -1)
    assert BlockTable.map_to_kernel_blocks(np.array([5]), 2, arange).tolist() == [10, 11]
    ids = np.array([4, 9])
    assert map_to_kernel_blocks(ids, 1) is ids  # ratio 1: unchanged, as in vLLM
    with pytest.raises(ValueError, match="blocks_per_kv_block must be >= 1"):
        map_to_kernel_blocks(ids, 0)


def test_hybrid_blocks_row_and_slots_equal_allocator_view():
    # 32-token allocator blocks read by a 16-token kernel.
    hybrid = BlockTable(32, 2, 3, 16, kernel_block_size=16)
    plain = BlockTable(32, 2, 3, 16)
    assert (hybrid.block_size, hybrid.blocks_per_kv_block, hybrid.use_hybrid_blocks) == (
        16,
        2,
        True,
    )
    assert hybrid.max_num_blocks_per_req == 6 and plain.max_num_blocks_per_req == 3
    for bt in (hybrid, plain):
        bt.add_row([3, 7], 0)
        bt.append_row([1], 0)
        bt.add_row([0], 1)
    assert hybrid.get_row(0) == [6, 7, 14, 15, 2, 3]
    assert hybrid.num_blocks_per_row.tolist() == [6, 2]
    req = np.array([0, 0, 0, 0, 1, 1])
    pos = np.array([0, 20, 33, 95, 0, 31])
    # Same memory either way: slot = allocator block * 32 + pos % 32.
    expected = plain.compute_slot_mapping(req, pos).tolist()
    assert expected == [96, 116, 225, 63, 0, 31]
    assert hybrid.compute_slot_mapping(req, pos).tolist() == expected


def test_kernel_block_size_must_divide_block_size():
    with pytest.raises(ValueError, match="kernel_block_size 12 must divide block_size 32"):
        BlockTable(32, 2, 3, 16, kernel_block_size=12)


def test_hybrid_overflow_counts_kernel_blocks():
    bt = BlockTable(32, 1, 2, 16, kernel_block_size=8)  # 2 allocator blocks = 8 kernel blocks
    bt.append_row([1], 0)
    with pytest.raises(ValueError, match="row 0 holds 4 kernel blocks; adding 8 exceeds"):
        bt.append_row([2, 3], 0)
    assert bt.get_row(0) == [4, 5, 6, 7]


# --------------------------------------------------------------------------- row edits
def test_append_add_clear_rows_exact_state():
    bt = _table()
    bt.append_row([4, 2], 1)
    bt.append_row([], 1)
    bt.append_row([9], 1)
    assert bt.block_table.np[1].tolist() == [4, 2, 9, 0]
    bt.add_row([7], 1)  # overwrites the count; entries past it are stale, as in vLLM
    assert bt.get_row(1) == [7]
    assert bt.block_table.np[1].tolist() == [7, 2, 9, 0]
    bt.clear_row(1)
    assert bt.num_blocks_per_row.tolist() == [0, 0, 0]
    assert bt.block_table.np[1].tolist() == [0, 2, 9, 0]  # only the used prefix is zeroed


def test_move_and_swap_rows():
    bt = _table()
    bt.add_row([1, 2, 3], 0)
    bt.add_row([8], 1)
    bt.add_row([5, 6], 2)
    bt.move_row(1, 0)
    assert [bt.get_row(r) for r in range(3)] == [[8], [8], [5, 6]]
    assert bt.block_table.np[0].tolist() == [8, 2, 3, 0]
    bt.swap_row(0, 2)
    assert [bt.get_row(r) for r in range(3)] == [[5, 6], [8], [8]]
    assert bt.block_table.np[2].tolist() == [8, 2, 3, 0]  # whole rows swap, stale tail too
    bt.swap_row(1, 1)
    assert bt.get_row(1) == [8]


def test_clear_resets_everything():
    bt = _table()
    bt.add_row([1, 2], 0)
    bt.clear()
    assert bt.num_blocks_per_row.tolist() == [0, 0, 0]
    assert not bt.block_table.np.any()


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda bt: bt.append_row([1], 3), ValueError, r"row_idx 3 out of range \[0, 3\)"),
        (lambda bt: bt.append_row([1], -1), ValueError, "row_idx -1 out of range"),
        (lambda bt: bt.add_row([1], 1.0), TypeError, "row_idx must be an int"),
        (lambda bt: bt.append_row([1, 2, 3], 0), ValueError, "row 0 holds 2 kernel blocks"),
        (lambda bt: bt.add_row([1, 2, 3, 4, 5], 1), ValueError, "max_num_blocks_per_req=4"),
        (lambda bt: bt.append_row([-2], 1), ValueError, "block ids must be in"),
        (lambda bt: bt.append_row(["a"], 1), TypeError, "flat sequence of ints"),
        (lambda bt: bt.append_row([[1, 2]], 1), TypeError, "flat sequence of ints"),
        (lambda bt: bt.move_row(0, 5), ValueError, r"tgt 5 out of range"),
        (lambda bt: bt.swap_row(7, 0), ValueError, r"src 7 out of range"),
        (lambda bt: bt.clear_row(3), ValueError, "row_idx 3 out of range"),
        (lambda bt: bt.commit_block_table(4), ValueError, r"n must be in \[0, 3\]"),
    ],
)
def test_bad_row_edits_raise_and_change_nothing(call, exc, match):
    bt = _table()
    bt.add_row([3, 1], 0)
    bt.add_row([2], 1)
    before = _snapshot(bt)
    with pytest.raises(exc, match=match):
        call(bt)
    assert _snapshot(bt) == before


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"block_size": 0}, "block_size must be a positive int"),
        ({"max_num_reqs": -1}, "max_num_reqs must be a positive int"),
        ({"dcp_world_size": 2, "dcp_rank": 2}, "ranks must be inside their worlds"),
    ],
)
def test_bad_construction(kw, match):
    with pytest.raises(ValueError, match=match):
        _table(**kw)


# --------------------------------------------------------------------------- torch optional
def test_worker_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import kvlab.worker as w\n"
        "bt = w.BlockTable(4, 2, 2, 8)\n"
        "bt.add_row([3], 0); bt.commit_block_table(1)\n"
        "assert bt.get_cpu_tensor() is None and bt.get_device_tensor(1) is None\n"
        "assert bt.compute_slot_mapping([0], [2]).tolist() == [14]\n"
        "try:\n    w.BlockTable(4, 2, 2, 8, device='cpu')\nexcept ImportError as e:\n"
        "    assert 'torch is not installed' in str(e)\nelse:\n    raise SystemExit(1)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_torch_cpu_mirror_shares_memory_and_commits():
    torch = pytest.importorskip("torch")
    bt = _table(device="cpu")
    bt.add_row([5, 8], 0)
    bt.add_row([2], 1)
    assert bt.get_cpu_tensor()[0, :2].tolist() == [5, 8]  # .cpu views .np
    assert bt.get_device_tensor(2).sum().item() == 0  # not committed yet
    bt.commit_block_table(1)
    assert bt.get_device_tensor(2).tolist() == [[5, 8, 0, 0], [0, 0, 0, 0]]
    bt.compute_slot_mapping([0, 1], [6, 1])
    bt.commit_slot_mapping(2)
    assert bt.slot_mapping.gpu[:2].tolist() == [34, 9]
    assert bt.block_table.gpu.dtype == torch.int32 and bt.slot_mapping.gpu.dtype == torch.int64
    bt.clear()
    assert bt.get_device_tensor(3).sum().item() == 0


@pytest.mark.gpu
def test_torch_cuda_mirror():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    bt = _table(device="cuda", pin_memory=True)
    bt.add_row([5, 8], 0)
    bt.commit_block_table(1)
    torch.cuda.synchronize()
    assert bt.get_device_tensor(1).device.type == "cuda"
    assert bt.get_device_tensor(1).cpu().tolist() == [[5, 8, 0, 0]]
