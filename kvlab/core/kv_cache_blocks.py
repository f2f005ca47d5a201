"""KVCacheBlocks: what KVCacheManager hands the scheduler (blocks per KV cache group).

Re-exported by ``kvlab.core.kv_cache_manager`` (vLLM defines it there).

Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheBlocks
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.core.kv_cache_utils import KVCacheBlock

__all__ = ["KVCacheBlocks"]


@dataclass
class KVCacheBlocks:
    """Blocks per KV cache group: ``blocks[i][j]`` is group i's j-th block.

    The scheduler sees this instead of the managers' lists. Groups come first (not block
    positions) because groups may use different block sizes. An empty group is ``()`` in the
    manager's shared ``empty_kv_cache_blocks`` (immutable, no allocation per call).

    Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheBlocks

    Examples:
        >>> KVCacheBlocks(((), ())).get_block_ids(allow_none=True) is None
        True
    """

    blocks: tuple[Sequence[KVCacheBlock], ...]

    def __add__(self, other: KVCacheBlocks) -> KVCacheBlocks:
        """Concatenate group by group.

        Raises:
            ValueError: The two have different numbers of groups.
        """
        if len(self.blocks) != len(other.blocks):
            raise ValueError(
                f"cannot add KVCacheBlocks with {len(self.blocks)} and {len(other.blocks)} groups"
            )
        return KVCacheBlocks(
            tuple(list(itertools.chain(a, b)) for a, b in zip(self.blocks, other.blocks))
        )

    def get_block_ids(self, allow_none: bool = False) -> tuple[list[int], ...] | None:
        """Block ids per group; ``None`` when ``allow_none`` and every group is empty."""
        if allow_none and all(len(group) == 0 for group in self.blocks):
            return None
        return tuple([blk.block_id for blk in group] for group in self.blocks)

    def get_unhashed_block_ids(self) -> list[int]:
        """Ids of the blocks without a block_hash (single-group only).

        Raises:
            ValueError: There is not exactly one group.
        """
        if len(self.blocks) != 1:
            raise ValueError(
                f"get_unhashed_block_ids needs exactly one group, got {len(self.blocks)}"
            )
        return [block.block_id for block in self.blocks[0] if block.block_hash is None]

    def get_unhashed_block_ids_all_groups(self) -> list[list[int]]:
        """Ids of the blocks without a block_hash, per group (null blocks left out)."""
        return [
            [block.block_id for block in group if block.block_hash is None and not block.is_null]
            for group in self.blocks
        ]

    def new_empty(self) -> KVCacheBlocks:
        """A KVCacheBlocks with the same number of groups and no blocks."""
        return KVCacheBlocks(tuple(() for _ in range(len(self.blocks))))
