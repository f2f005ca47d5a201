"""nano-vllm's Block, its chained xxhash64 and kvlab's counters for a NanoBlockManager.

Mirrors: nanovllm/engine/block_manager.py (Block, BlockManager.compute_hash).

Examples:
    >>> b = NanoBlock(3); b.reset(); (b.ref_count, b.hash)
    (1, -1)
    >>> compute_hash([3, 4], compute_hash([1, 2])) != compute_hash([3, 4])
    True
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import xxhash

__all__ = ["NO_HASH", "NanoBlock", "NanoStats", "compute_hash", "hash_key"]

NO_HASH = -1
"""``Block.hash`` of a block that is not full (or was just reset)."""


def compute_hash(token_ids: list[int], prefix: int = NO_HASH) -> int:
    """xxhash64 of the previous block's hash (8 bytes little-endian, if any) then the tokens.

    Mirrors: nanovllm/engine/block_manager.py::BlockManager.compute_hash (tokens as int64
    bytes, what ``np.array(token_ids)`` gives on 64-bit Linux).

    Args:
        token_ids: The block's tokens.
        prefix: The previous block's hash, or NO_HASH for the first block.

    Returns:
        An unsigned 64-bit int.
    """
    h = xxhash.xxh64()
    if prefix != NO_HASH:
        h.update(prefix.to_bytes(8, "little"))
    h.update(np.asarray(token_ids, dtype=np.int64).tobytes())
    return h.intdigest()


def hash_key(h: int, kv_cache_group_id: int = 0) -> bytes:
    """A nano hash as kvlab records keys: 8 bytes big-endian hash + 4 bytes big-endian group."""
    return h.to_bytes(8, "big") + kv_cache_group_id.to_bytes(4, "big")


class NanoBlock:
    """One KV block. Mirrors: nanovllm/engine/block_manager.py::Block.

    Attributes:
        block_id: Index in the pool.
        ref_count: Sequences holding it (0 = in free_block_ids).
        hash: Chained hash of its tokens when full, NO_HASH otherwise.
        token_ids: Its tokens when full (kept after it is freed, for the hit check).
    """

    __slots__ = ("block_id", "hash", "ref_count", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash = NO_HASH
        self.token_ids: list[int] = []

    def update(self, h: int, token_ids: list[int]) -> None:
        """Set the block's hash and tokens (it became full)."""
        self.hash = h
        self.token_ids = token_ids

    def reset(self) -> None:
        """Make it a fresh block held once: ref_count 1, no hash, no tokens."""
        self.ref_count = 1
        self.hash = NO_HASH
        self.token_ids = []

    def __repr__(self) -> str:
        return f"NanoBlock({self.block_id}, ref_count={self.ref_count}, hash={self.hash})"


@dataclass
class NanoStats:
    """Counters a NanoBlockManager keeps (kvlab's, not nano-vllm's).

    Attributes:
        num_lookups: Full-block probes before the first miss (blocks).
        num_hits: Probes that hit (blocks).
        num_token_mismatches: Probes whose map entry pointed at a block with other tokens.
        num_stale_hits: Hits through an entry whose block now has another hash (nano-vllm only
            checks the tokens: such a hit reuses KV computed under another prefix).
        num_reactivated_blocks: Hits on a freed block (taken back out of the deque).
        num_deque_scan_steps: Deque positions scanned by ``free_block_ids.remove`` (O(n)).
        num_evicted_blocks: Blocks that left the valid cache (hash reset or entry overwritten).
        num_allocated_blocks: Fresh blocks taken from the head of the deque.
    """

    num_lookups: int = 0
    num_hits: int = 0
    num_token_mismatches: int = 0
    num_stale_hits: int = 0
    num_reactivated_blocks: int = 0
    num_deque_scan_steps: int = 0
    num_evicted_blocks: int = 0
    num_allocated_blocks: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
