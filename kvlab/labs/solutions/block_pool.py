"""Reference solution of lab ``block_pool``: the notebook's BlockPool cell, bodies written.

Mirrors: vllm/v1/core/block_pool.py::BlockPool (statement order as vLLM's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvlab.core import (
    AllBlocksCleared,
    BlockHashListWithBlockSize,
    BlockHashToBlockMap,
    BlockRemoved,
    BlockStored,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
)
from kvlab.core.kv_cache_utils import (
    generate_block_hash_extra_keys,
    get_block_hash,
    get_group_id,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
)
from kvlab.core.kv_events import MEDIUM_GPU

# --- notebook cell ---
class BlockPool:
    """Allocates, frees and caches KVCacheBlocks; evicts cached blocks lazily (LRU).

    Mirrors: vllm/v1/core/block_pool.py::BlockPool

    Args:
        num_gpu_blocks: Blocks in the pool, the null block included (blocks).
        enable_caching: Whether prefix caching is on.
        hash_block_size: Tokens per hash in ``request.block_hashes`` (tokens).
        enable_kv_cache_events: Queue BlockStored / BlockRemoved / AllBlocksCleared events.
        metrics_collector: Not used in this lab (always None).
    """

    # ------------------------------------------------------------------ given
    def __init__(self, num_gpu_blocks: int, enable_caching: bool, hash_block_size: int,
                 enable_kv_cache_events: bool = False, metrics_collector=None) -> None:
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.hash_block_size = hash_block_size
        self.blocks = [KVCacheBlock(idx) for idx in range(num_gpu_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.enable_kv_cache_events = enable_kv_cache_events
        self.kv_event_queue = []

    def get_cached_block(self, block_hash, kv_cache_group_ids: list[int]) -> list[KVCacheBlock] | None:
        """The cached block for ``block_hash`` in each group, or None if any group misses."""
        cached_blocks = []
        for group_id in kv_cache_group_ids:
            block = self.cached_block_hash_to_block.get_one_block(make_block_hash_with_group_id(block_hash, group_id))
            if not block:
                return None
            cached_blocks.append(block)
        return cached_blocks

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        total_gpu_blocks = self.num_gpu_blocks - 1
        if not total_gpu_blocks:
            return 0
        return 1.0 - (self.get_num_free_blocks() / total_gpu_blocks)

    def evict_blocks(self, block_ids: set[int]) -> None:
        for block_id in block_ids:
            self._maybe_evict_cached_block(self.blocks[block_id])

    def reset_prefix_cache(self) -> bool:
        if self.num_gpu_blocks - self.get_num_free_blocks() != 1:
            return False
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        for block in self.blocks:
            block.reset_hash()
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(AllBlocksCleared())
        return True

    def take_events(self) -> list:
        if not self.enable_kv_cache_events:
            return []
        events, self.kv_event_queue = self.kv_event_queue, []
        return events

    def _block_stored(self, request, blocks, num_cached_blocks, num_full_blocks, block_size,
                      kv_cache_group_id, block_mask, block_hashes, new_hashes) -> BlockStored:
        """vLLM's BlockStored event for the blocks cache_full_blocks just cached (given)."""
        parent = None if num_cached_blocks == 0 else maybe_convert_block_hash(block_hashes[num_cached_blocks - 1])
        extra_keys_list, curr_mm_idx = [], 0
        for i in range(num_cached_blocks, num_full_blocks):
            if blocks[i].is_null or (block_mask is not None and not block_mask[i - num_cached_blocks]):
                continue
            extra_keys, curr_mm_idx = generate_block_hash_extra_keys(
                request, i * block_size, (i + 1) * block_size, curr_mm_idx)
            extra_keys_list.append(extra_keys)
        lora = request.lora_request
        return BlockStored(
            block_hashes=new_hashes, parent_block_hash=parent,
            token_ids=request.all_token_ids[num_cached_blocks * block_size: num_full_blocks * block_size],
            block_size=block_size, lora_id=lora.adapter_id if lora else None, medium=MEDIUM_GPU,
            lora_name=lora.name if lora else None, extra_keys=extra_keys_list or None,
            group_idx=kv_cache_group_id)

    # ------------------------------------------------------------------ yours
    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` blocks from the head of the free queue, each with ref_cnt 1.

        With caching on, a popped block that still has a block_hash is evicted from the prefix
        cache now (lazy eviction: ``_maybe_evict_cached_block``).

        Raises:
            ValueError: If ``num_blocks`` is more than the free blocks.
        """
        ### BEGIN SOLUTION
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        ret = self.free_block_queue.popleft_n(num_blocks)
        if self.enable_caching:
            for block in ret:
                self._maybe_evict_cached_block(block)
                assert block.ref_cnt == 0
                block.ref_cnt += 1
        else:
            for block in ret:
                assert block.ref_cnt == 0
                block.ref_cnt += 1
        return ret
        ### END SOLUTION

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop ``block`` from ``cached_block_hash_to_block`` if it is cached there.

        Pops the block (by its block_id) from its key, forgets its hash (``reset_hash``) and,
        with events on, queues ``BlockRemoved(block_hashes=[maybe_convert_block_hash(hash
        without group id)], medium=MEDIUM_GPU, group_idx=<its group id>)``.

        Returns:
            True if the block was cached and has been evicted.
        """
        ### BEGIN SOLUTION
        block_hash = block.block_hash
        if block_hash is None:
            return False
        if self.cached_block_hash_to_block.pop(block_hash, block.block_id) is None:
            return False
        block.reset_hash()
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(BlockRemoved(
                block_hashes=[maybe_convert_block_hash(get_block_hash(block_hash))],
                medium=MEDIUM_GPU, group_idx=get_group_id(block_hash)))
        return True
        ### END SOLUTION

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        """A prefix-cache hit: ref_cnt += 1 for each block; a free one leaves the free queue.

        The null block is counted too but is never in the free queue.
        """
        ### BEGIN SOLUTION
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
        ### END SOLUTION

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """ref_cnt -= 1 for each block; the blocks reaching 0 join the free queue in the given order.

        Callers pass a request's blocks tail first. The null block never joins the queue. A
        freed block keeps its block_hash: it stays cached until it is popped for reuse.
        """
        ### BEGIN SOLUTION
        blocks_list = list(ordered_blocks)
        for block in blocks_list:
            block.ref_cnt -= 1
        self.free_block_queue.append_n(
            [block for block in blocks_list if block.ref_cnt == 0 and not block.is_null])
        ### END SOLUTION

    def cache_full_blocks(self, request, blocks: list[KVCacheBlock], num_cached_blocks: int,
                          num_full_blocks: int, block_size: int, kv_cache_group_id: int,
                          block_mask: list[bool] | None = None) -> None:
        """Give ``blocks[num_cached_blocks:num_full_blocks]`` their hashes and cache them.

        Each block gets ``make_block_hash_with_group_id(block_hash, kv_cache_group_id)`` as its
        block_hash and is inserted under that key in ``cached_block_hash_to_block`` (next to any
        block already cached there). Null blocks and blocks whose ``block_mask`` entry is False
        are skipped. With events on, collect ``maybe_convert_block_hash(block_hash)`` of each
        cached block in ``new_hashes``: the given code then queues vLLM's BlockStored event.
        """
        if num_cached_blocks >= num_full_blocks:
            return
        new_full_blocks = blocks[num_cached_blocks:num_full_blocks]
        if block_size == self.hash_block_size:
            block_hashes = request.block_hashes
        else:  # bigger blocks hash as their hash_block_size hashes joined
            block_hashes = BlockHashListWithBlockSize(request.block_hashes, self.hash_block_size, block_size)
        new_block_hashes = block_hashes[num_cached_blocks:]
        new_hashes = [] if self.enable_kv_cache_events else None
        ### BEGIN SOLUTION
        for i, blk in enumerate(new_full_blocks):
            if blk.is_null or (block_mask is not None and not block_mask[i]):
                continue
            block_hash = new_block_hashes[i]
            block_hash_with_group_id = make_block_hash_with_group_id(block_hash, kv_cache_group_id)
            blk.block_hash = block_hash_with_group_id
            self.cached_block_hash_to_block.insert(block_hash_with_group_id, blk)
            if new_hashes is not None:
                new_hashes.append(maybe_convert_block_hash(block_hash))
        ### END SOLUTION
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(self._block_stored(
                request, blocks, num_cached_blocks, num_full_blocks, block_size, kv_cache_group_id,
                block_mask, block_hashes, new_hashes))


SOLUTION = BlockPool
