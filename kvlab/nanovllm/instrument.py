"""kvlab's instrumentation of nano-vllm's BlockManager: its counters and recorded hash keys.

Neither is nano-vllm's: ``NanoStats`` counts what the views and the comparison report (lookups,
token-id mismatches, O(n) deque scans, evictions), and ``hash_key`` is how a nano-vllm hash is
written into a kvlab trace (the key format kvlab.core's recorder uses).

Examples:
    >>> hash_key(1)
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x00\\x00\\x00'
    >>> NanoStats().as_dict()["num_hits"]
    0
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["NanoStats", "hash_key"]


def hash_key(h: int, kv_cache_group_id: int = 0) -> bytes:
    """A nano hash as kvlab records keys: 8 bytes big-endian hash + 4 bytes big-endian group."""
    return h.to_bytes(8, "big") + kv_cache_group_id.to_bytes(4, "big")


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
