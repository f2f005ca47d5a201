"""The prefix-cache map: BlockHashWithGroupId -> the cached block(s) with that key.

Mirrors: vllm/v1/core/block_pool.py::BlockHashToBlockMap. Re-exported by
``kvlab.core.block_pool``.

Examples:
    >>> from kvlab.core.kv_cache_block import KVCacheBlock
    >>> cache = BlockHashToBlockMap()
    >>> cache.insert(b"k", KVCacheBlock(3)); cache.insert(b"k", KVCacheBlock(5))
    >>> cache.get_one_block(b"k").block_id, len(cache)
    (3, 1)
    >>> cache.pop(b"k", 3).block_id, cache.get_one_block(b"k").block_id
    (3, 5)
"""

from __future__ import annotations

from kvlab.core.block_hash import BlockHashWithGroupId
from kvlab.core.kv_cache_block import KVCacheBlock

__all__ = ["BlockHashToBlockMap"]


class BlockHashToBlockMap:
    """BlockHashWithGroupId -> the cached block(s) with that key.

    Mirrors: vllm/v1/core/block_pool.py::BlockHashToBlockMap. A key usually maps to one
    KVCacheBlock; when two requests filled identical blocks, it maps to ``{block_id: block}``.

    NOTE: no de-duplication: an identical block that becomes full is cached next to the
    existing one instead of replacing it, so a request's block ids never change (block
    tables stay append-only). The single-block form avoids a dict per key (less GC work).
    """

    def __init__(self) -> None:
        self._cache: dict[BlockHashWithGroupId, KVCacheBlock | dict[int, KVCacheBlock]] = {}

    def get_one_block(self, key: BlockHashWithGroupId) -> KVCacheBlock | None:
        """Any block cached under ``key`` (the first inserted of a dict), or None."""
        blocks = self._cache.get(key)
        if blocks is None:
            return None
        if isinstance(blocks, KVCacheBlock):
            return blocks
        return next(iter(blocks.values()))

    def insert(self, key: BlockHashWithGroupId, block: KVCacheBlock) -> None:
        """Cache ``block`` under ``key`` (next to any block already there)."""
        blocks = self._cache.get(key)
        if blocks is None:
            self._cache[key] = block
        elif isinstance(blocks, KVCacheBlock):
            self._cache[key] = {blocks.block_id: blocks, block.block_id: block}
        else:
            blocks[block.block_id] = block

    def pop(self, key: BlockHashWithGroupId, block_id: int) -> KVCacheBlock | None:
        """Remove and return the block ``block_id`` cached under ``key``; None if it is not there.

        NOTE: as vLLM, the key is popped and re-inserted when the block is not found (or other
        blocks remain under it), which moves the key to the end of the dict's order.
        """
        blocks = self._cache.pop(key, None)
        if blocks is None:
            return None
        if isinstance(blocks, KVCacheBlock):
            if blocks.block_id == block_id:
                return blocks
            self._cache[key] = blocks
            return None
        block = blocks.pop(block_id, None)
        if len(blocks) > 0:
            self._cache[key] = blocks
        return block

    def __len__(self) -> int:
        return len(self._cache)
