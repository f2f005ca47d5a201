"""Slot-mapping arithmetic: which cache slot each scheduled token's K/V is written to.

A *slot* is a flat index into the paged KV cache viewed as ``[num_blocks * block_size]``:
``slot = block_id * block_size + offset_in_block``. The attention kernel's cache write uses
``slot_mapping[i]`` for token ``i`` of the batch; ``PAD_SLOT_ID`` (-1) means "do not write".

Mirrors: vllm/v1/worker/block_table.py::_compute_slot_mapping_kernel (a Triton kernel in
vLLM 0.22.1) as plain numpy over a whole batch, including the context-parallel (DCP/PCP)
virtual-block arithmetic. Worked example (block_size=4, no context parallelism)::

    block_table rows: req 0 -> [5, 8], req 1 -> [2, 3, 10], req 2 -> [12]
    req_indices = [0, 0, 1, 1, 1, 2]
    positions   = [3, 7, 2, 5, 9, 1]
    block index = pos // 4        -> [0, 1, 0, 1, 2, 0]
    block_id    = row[block index] -> [5, 8, 2, 3, 10, 12]
    offset      = pos % 4         -> [3, 3, 2, 1, 1, 1]
    slot        = block_id*4+off  -> [23, 35, 10, 13, 41, 49]
"""

from __future__ import annotations

import numpy as np

__all__ = ["PAD_SLOT_ID", "compute_slot_ids", "query_start_loc_to_req_indices"]

PAD_SLOT_ID = -1
"""Slot id for tokens whose K/V this rank must not write (padding, or another CP rank's token).

Mirrors: vllm/v1/attention/backends/utils.py::PAD_SLOT_ID."""


def compute_slot_ids(
    block_table: np.ndarray,
    block_size: int,
    req_indices: np.ndarray,
    positions: np.ndarray,
    total_cp_world_size: int = 1,
    total_cp_rank: int = 0,
    cp_kv_cache_interleave_size: int = 1,
) -> np.ndarray:
    """Slot id of every token, from its row in the block table and its position.

    With context parallelism (``total_cp_world_size = pcp * dcp > 1``) the KV of one
    request is spread over ranks: a *virtual block* of ``block_size * world`` consecutive
    positions is dealt out to the ranks in runs of ``cp_kv_cache_interleave_size`` tokens.
    Each rank stores only its own runs, packed into its local block; tokens of other ranks
    get ``PAD_SLOT_ID``. With ``world == 1`` every token is local and the offset is simply
    ``position % block_size``.

    Mirrors: vllm/v1/worker/block_table.py::_compute_slot_mapping_kernel (same integer
    arithmetic; numpy over explicit ``req_indices`` instead of ``query_start_loc``).

    Args:
        block_table: [max_num_reqs, max_num_blocks_per_req] int block ids (kernel blocks).
        block_size: Tokens per (kernel) block.
        req_indices: [num_tokens] row of the block table each token belongs to.
        positions: [num_tokens] position of each token inside its request (tokens).
        total_cp_world_size: pcp_world_size * dcp_world_size.
        total_cp_rank: pcp_rank * dcp_world_size + dcp_rank.
        cp_kv_cache_interleave_size: Tokens per run dealt to one CP rank.

    Returns:
        [num_tokens] int64 slot ids (``PAD_SLOT_ID`` for non-local tokens).
    """
    positions = positions.astype(np.int64, copy=False)
    virtual_block_size = block_size * total_cp_world_size
    block_indices = positions // virtual_block_size
    block_numbers = block_table[req_indices, block_indices].astype(np.int64)
    virtual_block_offsets = positions - block_indices * virtual_block_size
    interleave = cp_kv_cache_interleave_size
    is_local = (virtual_block_offsets // interleave) % total_cp_world_size == total_cp_rank
    local_block_offsets = (
        virtual_block_offsets // (total_cp_world_size * interleave)
    ) * interleave + virtual_block_offsets % interleave
    slot_ids = block_numbers * block_size + local_block_offsets
    return np.where(is_local, slot_ids, PAD_SLOT_ID)


def query_start_loc_to_req_indices(query_start_loc: np.ndarray | list[int]) -> np.ndarray:
    """Expand vLLM's ``query_start_loc`` ([num_reqs + 1] cumulative token offsets) to rows.

    vLLM 0.22.1 passes ``query_start_loc`` to its slot-mapping kernel, whose program ``r``
    handles tokens ``query_start_loc[r]:query_start_loc[r + 1]`` of row ``r``. This gives the
    equivalent per-token ``req_indices`` for :func:`compute_slot_ids`.

    Examples:
        >>> query_start_loc_to_req_indices([0, 2, 5, 6]).tolist()
        [0, 0, 1, 1, 1, 2]

    Args:
        query_start_loc: [num_reqs + 1] non-decreasing token offsets starting at 0.

    Returns:
        [query_start_loc[-1]] int64 row index of every token.

    Raises:
        ValueError: If it is empty, does not start at 0, or decreases.
    """
    qsl = np.asarray(query_start_loc, dtype=np.int64)
    if qsl.ndim != 1 or qsl.shape[0] == 0 or qsl[0] != 0:
        raise ValueError("query_start_loc must be a non-empty 1-D sequence starting at 0")
    counts = np.diff(qsl)
    if (counts < 0).any():
        raise ValueError(f"query_start_loc must be non-decreasing, got {qsl.tolist()}")
    return np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
