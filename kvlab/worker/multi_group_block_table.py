"""One BlockTable per KV-cache group (hybrid models: full attention + sliding window, ...).

Mirrors: vllm/v1/worker/block_table.py::MultiGroupBlockTable. The scheduler's block ids come
as a tuple with one list per ``kv_cache_group_id`` (``KVCacheBlocks.get_block_ids()``);
``MultiGroupBlockTable`` routes list ``i`` to ``block_tables[i]``. Every group shares the
persistent-batch rows, so row edits apply to all groups together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kvlab.worker.block_table import BlockTable

__all__ = ["MultiGroupBlockTable", "align_max_num_blocks", "cdiv", "default_max_num_blocks"]


def cdiv(a: int, b: int) -> int:
    """Ceiling division of ints >= 0: ``cdiv(7, 4) == 2``. Mirrors vllm.utils.math_utils.cdiv."""
    return -(a // -b)


def default_max_num_blocks(
    max_model_len: int, block_sizes: Sequence[int], total_cp_world_size: int = 1
) -> list[int]:
    """Blocks a row needs to hold ``max_model_len`` tokens, per group.

    Each CP rank stores only ``max_model_len / world`` tokens, hence the product in the
    divisor. Mirrors the ``max_num_blocks is None`` branch of MultiGroupBlockTable.__init__.
    """
    return [cdiv(max_model_len, bs * total_cp_world_size) for bs in block_sizes]


def align_max_num_blocks(max_num_blocks: Sequence[int], block_sizes: Sequence[int]) -> list[int]:
    """Round each count up to a multiple of ``128 // block_size`` (when ``block_size <= 128``).

    Mirrors vLLM 0.22.1's alignment for attention backends such as TRTLLM (vLLM #39324):
    a row then always spans a multiple of 128 tokens.

    Examples:
        >>> align_max_num_blocks([5, 3], [16, 256])
        [8, 3]
    """
    return [
        cdiv(n, 128 // bs) * (128 // bs) if bs <= 128 else n
        for n, bs in zip(max_num_blocks, block_sizes)
    ]


def _resolve_max_num_blocks(
    max_model_len: int,
    block_sizes: Sequence[int],
    kernel_block_sizes: Sequence[int],
    max_num_blocks: Sequence[int] | None,
    total_cp_world_size: int,
) -> list[int]:
    """Check the per-group lists agree in length; default max_num_blocks from max_model_len."""
    if len(kernel_block_sizes) != len(block_sizes):
        raise ValueError(
            f"kernel_block_sizes length ({len(kernel_block_sizes)}) "
            f"must match block_sizes length ({len(block_sizes)})"
        )
    if max_num_blocks is None:
        max_num_blocks = default_max_num_blocks(max_model_len, block_sizes, total_cp_world_size)
    if len(max_num_blocks) != len(block_sizes):
        raise ValueError(
            f"max_num_blocks length ({len(max_num_blocks)}) "
            f"must match block_sizes length ({len(block_sizes)})"
        )
    return list(max_num_blocks)


class MultiGroupBlockTable:
    """The BlockTables of all KV-cache groups, edited row by row together.

    Mirrors: vllm/v1/worker/block_table.py::MultiGroupBlockTable (differs: a multi-group
    edit is checked against every group before any group changes, so a bad tuple leaves
    all tables untouched; CP layout passed as arguments).

    Args:
        max_num_reqs: Rows per table.
        max_model_len: Longest request (tokens); sizes rows when ``max_num_blocks`` is None.
        max_num_batched_tokens: Slot-mapping length (tokens per step).
        pin_memory: Pin the CPU mirrors (CUDA only).
        device: None for numpy only, else the torch device of the mirrors.
        block_sizes: Allocator block size per group (tokens).
        kernel_block_sizes: Kernel block size per group (tokens), dividing block_sizes.
        max_num_blocks: Allocator blocks per row per group; default from max_model_len.
        cp_kv_cache_interleave_size: Tokens per run dealt to one CP rank.
        dcp_world_size, dcp_rank, pcp_world_size, pcp_rank: Context-parallel layout.

    Raises:
        ValueError: If the per-group lists differ in length, or a BlockTable rejects its sizes.
    """

    def __init__(
        self,
        max_num_reqs: int,
        max_model_len: int,
        max_num_batched_tokens: int,
        pin_memory: bool,
        device: Any,
        block_sizes: Sequence[int],
        kernel_block_sizes: Sequence[int],
        max_num_blocks: Sequence[int] | None = None,
        cp_kv_cache_interleave_size: int = 1,
        *,
        dcp_world_size: int = 1,
        dcp_rank: int = 0,
        pcp_world_size: int = 1,
        pcp_rank: int = 0,
    ) -> None:
        max_num_blocks = _resolve_max_num_blocks(
            max_model_len,
            block_sizes,
            kernel_block_sizes,
            max_num_blocks,
            dcp_world_size * pcp_world_size,
        )
        max_num_blocks = align_max_num_blocks(max_num_blocks, block_sizes)
        cp = {
            "dcp_world_size": dcp_world_size,
            "dcp_rank": dcp_rank,
            "pcp_world_size": pcp_world_size,
            "pcp_rank": pcp_rank,
        }
        self.block_tables = [
            BlockTable(
                bs,
                max_num_reqs,
                n,
                max_num_batched_tokens,
                pin_memory,
                device,
                kbs,
                cp_kv_cache_interleave_size,
                **cp,
            )
            for bs, kbs, n in zip(block_sizes, kernel_block_sizes, max_num_blocks)
        ]

    def _check_groups(self, block_ids: Sequence[Sequence[int]], row_idx: int, append: bool) -> None:
        if len(block_ids) != len(self.block_tables):
            raise ValueError(
                f"block_ids has {len(block_ids)} groups, expected {len(self.block_tables)} "
                "(one list per kv_cache_group_id)"
            )
        for table, ids in zip(self.block_tables, block_ids):
            row = table._check_row(row_idx)
            start = int(table.num_blocks_per_row[row]) if append else 0
            table._prepare_block_ids(ids, row, start)

    def append_row(self, block_ids: Sequence[Sequence[int]], row_idx: int) -> None:
        """Append ``block_ids[i]`` to row ``row_idx`` of group ``i``'s table.

        Mirrors: vllm/v1/worker/block_table.py::MultiGroupBlockTable.append_row.

        Args:
            block_ids: One list of allocator block ids per KV-cache group.
            row_idx: Persistent-batch row.

        Raises:
            TypeError, ValueError: Wrong group count or any group's check fails; no table changes.
        """
        self._check_groups(block_ids, row_idx, append=True)
        for table, ids in zip(self.block_tables, block_ids):
            table.append_row(ids, row_idx)

    def add_row(self, block_ids: Sequence[Sequence[int]], row_idx: int) -> None:
        """Replace row ``row_idx`` of every group with ``block_ids[i]``.

        Mirrors: vllm/v1/worker/block_table.py::MultiGroupBlockTable.add_row.

        Raises:
            TypeError, ValueError: As :meth:`append_row`; no table changes.
        """
        self._check_groups(block_ids, row_idx, append=False)
        for table, ids in zip(self.block_tables, block_ids):
            table.add_row(ids, row_idx)

    def clear_row(self, row_idx: int) -> None:
        """Clear ``row_idx`` in every group. Mirrors MultiGroupBlockTable.clear_row."""
        self._check_row_all(row_idx=row_idx)
        for table in self.block_tables:
            table.clear_row(row_idx)

    def move_row(self, src: int, tgt: int) -> None:
        """Copy row ``src`` onto ``tgt`` in every group. Mirrors MultiGroupBlockTable.move_row."""
        self._check_row_all(src=src, tgt=tgt)
        for table in self.block_tables:
            table.move_row(src, tgt)

    def swap_row(self, src: int, tgt: int) -> None:
        """Swap rows ``src`` and ``tgt`` in every group. Mirrors MultiGroupBlockTable.swap_row."""
        self._check_row_all(src=src, tgt=tgt)
        for table in self.block_tables:
            table.swap_row(src, tgt)

    def _check_row_all(self, **rows: int) -> None:
        # Every group has the same rows: checking against the first table covers all.
        for name, row in rows.items():
            if self.block_tables:
                self.block_tables[0]._check_row(row, name)

    def compute_slot_mapping(
        self, req_indices: np.ndarray, positions: np.ndarray
    ) -> list[np.ndarray]:
        """Compute every group's slot mapping (groups differ in block size and ids).

        Mirrors: MultiGroupBlockTable.compute_slot_mapping (differs as BlockTable's).

        Args:
            req_indices: [num_tokens] row of each token.
            positions: [num_tokens] position of each token (tokens).

        Returns:
            One [num_tokens] int64 view per group.

        Raises:
            ValueError: As :meth:`BlockTable.compute_slot_mapping`, checked for every group
                before any group's slot mapping is written.
        """
        for table in self.block_tables:
            table._check_tokens(req_indices, positions)
        return [t.compute_slot_mapping(req_indices, positions) for t in self.block_tables]

    def commit_block_table(self, num_reqs: int) -> None:
        """Copy the first ``num_reqs`` rows of every group to the device (no-op without torch)."""
        for table in self.block_tables:
            table.commit_block_table(num_reqs)

    def commit_slot_mapping(self, num_tokens: int) -> None:
        """Copy every group's ``slot_mapping[:num_tokens]`` to the device (no-op without torch)."""
        for table in self.block_tables:
            table.commit_slot_mapping(num_tokens)

    def clear(self) -> None:
        """Clear every group's table. Mirrors MultiGroupBlockTable.clear."""
        for table in self.block_tables:
            table.clear()

    def __getitem__(self, idx: int) -> BlockTable:
        """The BlockTable of KV-cache group ``idx``."""
        return self.block_tables[idx]

    def __len__(self) -> int:
        """Number of KV-cache groups."""
        return len(self.block_tables)
