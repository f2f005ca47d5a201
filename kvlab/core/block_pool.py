"""The block pool: every KVCacheBlock, the free queue, and the prefix-cache map.

Mirrors: vllm/v1/core/block_pool.py (BlockHashToBlockMap, BlockPool), statement for statement.
kvlab adds a ``recorder`` (one line after each state change it reports, see
``kvlab.core.recorder``) and one guard call at the top of each public method: a call from
outside kvlab.core with bad input raises a clear ValueError / TypeError before anything
changes (vLLM asserts, or corrupts the free queue). Inside kvlab.core the pool trusts its
callers, as vLLM's does.

Life of a block with prefix caching on::

    free (ref_cnt 0, no hash) --get_new_blocks--> in use (ref_cnt >= 1)
    in use --cache_full_blocks--> in use + cached (block_hash set, in cached_block_hash_to_block)
    in use + cached --free_blocks--> free + cached (ref_cnt 0: an eviction candidate)
    free + cached --touch (a cache hit)--> in use + cached
    free + cached --get_new_blocks pops it--> evicted (hash cleared) and reused

Examples:
    >>> pool = BlockPool(num_gpu_blocks=5, enable_caching=True, hash_block_size=4)
    >>> pool.null_block.block_id, pool.get_num_free_blocks()
    (0, 4)
    >>> blocks = pool.get_new_blocks(2); [b.block_id for b in blocks]
    [1, 2]
    >>> pool.free_blocks(reversed(blocks))  # a request frees its blocks tail first
    >>> [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]
    [3, 4, 2, 1]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kvlab.core.logger import init_logger
from kvlab.core.guards import (
    guard_block_pool,
    guard_cache_full_blocks,
    guard_evict_blocks,
    guard_free_blocks,
    guard_get_cached_block,
    guard_get_new_blocks,
    guard_touch,
)
from kvlab.core.kv_cache_utils import (
    BlockHash,
    BlockHashList,
    BlockHashListWithBlockSize,
    BlockHashWithGroupId,
    ExternalBlockHash,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    generate_block_hash_extra_keys,
    get_block_hash,
    get_group_id,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
)
from kvlab.core.kv_events import (
    MEDIUM_GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVCacheEvent,
)

if TYPE_CHECKING:
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector
    from kvlab.core.recorder import KVRecorder
    from kvlab.core.request import Request

logger = init_logger(__name__)

__all__ = ["BlockHashToBlockMap", "BlockPool"]


class BlockHashToBlockMap:
    """The prefix cache: block_hash (with group id) -> the cached block, or several.

    Mostly one block per key; a key maps to ``{block_id: block}`` when identical blocks were
    filled by different requests. Full blocks are never de-duplicated (a block's id must not
    change once handed out, so block tables stay append-only); the single-block form avoids an
    inner dict per key.

    Mirrors: vllm/v1/core/block_pool.py::BlockHashToBlockMap

    Examples:
        >>> m = BlockHashToBlockMap()
        >>> a, b = KVCacheBlock(1), KVCacheBlock(2)
        >>> m.insert(b"k", a); m.insert(b"k", b)   # a duplicate: both cached under b"k"
        >>> m.get_one_block(b"k").block_id, len(m)
        (1, 1)
        >>> m.pop(b"k", 1).block_id, m.get_one_block(b"k").block_id  # the other copy stays
        (1, 2)
    """

    def __init__(self) -> None:
        self._cache: dict[BlockHashWithGroupId, KVCacheBlock | dict[int, KVCacheBlock]] = {}

    def get_one_block(self, key: BlockHashWithGroupId) -> KVCacheBlock | None:
        """Any block cached under ``key`` (the first inserted of duplicates), or None.

        Mirrors: vllm/v1/core/block_pool.py::BlockHashToBlockMap.get_one_block
        """
        blocks = self._cache.get(key)
        if blocks is not None:
            if isinstance(blocks, KVCacheBlock):
                return blocks
            if isinstance(blocks, dict):
                return next(iter(blocks.values()))
            self._unexpected_blocks_type(blocks)
        return None

    def insert(self, key: BlockHashWithGroupId, block: KVCacheBlock) -> None:
        """Cache ``block`` under ``key`` (next to any block already there).

        Mirrors: vllm/v1/core/block_pool.py::BlockHashToBlockMap.insert
        """
        blocks = self._cache.get(key)
        if blocks is None:
            self._cache[key] = block
        elif isinstance(blocks, KVCacheBlock):
            # A second block under the same key: switch to the dict form.
            self._cache[key] = {blocks.block_id: blocks, block.block_id: block}
        elif isinstance(blocks, dict):
            blocks[block.block_id] = block
        else:
            self._unexpected_blocks_type(blocks)

    def pop(self, key: BlockHashWithGroupId, block_id: int) -> KVCacheBlock | None:
        """Remove block ``block_id`` from ``key``; any other block under ``key`` stays cached.

        Mirrors: vllm/v1/core/block_pool.py::BlockHashToBlockMap.pop

        Returns:
            The removed block, or None if ``block_id`` was not cached under ``key``.
        """
        blocks = self._cache.pop(key, None)
        if blocks is None:
            return None
        # NOTE: as vLLM, a key whose block has another id is put back untouched.
        if isinstance(blocks, KVCacheBlock):
            if blocks.block_id == block_id:
                return blocks
            self._cache[key] = blocks
            return None
        if isinstance(blocks, dict):
            block = blocks.pop(block_id, None)
            if len(blocks) > 0:
                self._cache[key] = blocks
            return block
        self._unexpected_blocks_type(blocks)
        return None

    def __len__(self) -> int:
        return len(self._cache)

    def _unexpected_blocks_type(self, blocks: Any) -> None:
        raise AssertionError(f"Invalid KV cache block type {type(blocks)}")


class BlockPool:
    """Allocates, frees and caches KVCacheBlocks; evicts cached blocks lazily (LRU).

    The free queue holds the free blocks in eviction order (cached ones included: they stay
    cached until popped for reuse); ``cached_block_hash_to_block`` finds cached blocks by hash.
    Block 0 is popped at construction as the ``null_block`` (a placeholder for skipped blocks,
    e.g. outside a sliding window; its ref_cnt is not meaningful and it is never freed).

    Mirrors: vllm/v1/core/block_pool.py::BlockPool

    Recording: a hook fires after each change it describes. ``touch`` and ``get_new_blocks``
    report block by block inside their loops (the free queue's ``remove`` and the evictions
    happen between them); ``free_blocks`` and ``cache_full_blocks`` report once after their
    loops. ``reset_prefix_cache`` reports one ``reset`` and no per-block ``evict``: vLLM's reset
    drops the map and clears every hash directly (and emits one AllBlocksCleared).

    Args:
        num_gpu_blocks: Blocks in the pool, null block included (blocks), > 0.
        enable_caching: Whether prefix caching is on.
        hash_block_size: Tokens per hash in ``request.block_hashes`` (tokens); groups with a
            bigger block size (a multiple) see concatenated hashes.
        enable_kv_cache_events: Queue BlockStored/BlockRemoved/AllBlocksCleared for take_events.
        metrics_collector: Optional KVCacheMetricsCollector (residency sampling).

    Raises:
        ValueError: If num_gpu_blocks or hash_block_size is not a positive int.
    """

    def __init__(
        self,
        num_gpu_blocks: int,
        enable_caching: bool,
        hash_block_size: int,
        enable_kv_cache_events: bool = False,
        metrics_collector: KVCacheMetricsCollector | None = None,
    ) -> None:
        guard_block_pool(num_gpu_blocks, hash_block_size)
        assert isinstance(num_gpu_blocks, int) and num_gpu_blocks > 0
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.hash_block_size = hash_block_size
        self.blocks: list[KVCacheBlock] = [KVCacheBlock(idx) for idx in range(num_gpu_blocks)]
        # NOTE: holds every block with ref_cnt == 0 except the null block, in eviction order.
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)

        # NOTE: a block is in this map iff its block_hash is set (the null block never is).
        self.cached_block_hash_to_block: BlockHashToBlockMap = BlockHashToBlockMap()

        # NOTE: the null block's ref_cnt is not maintained; it is never appended to the queue.
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True

        self.enable_kv_cache_events = enable_kv_cache_events
        self.kv_event_queue: list[KVCacheEvent] = []

        self.metrics_collector = metrics_collector
        self.recorder: KVRecorder | None = None

    def set_recorder(self, recorder: KVRecorder | None) -> None:
        """Attach (or detach with None) a recorder to the pool and its free_block_queue.

        kvlab only (see ``kvlab.core.recorder``).
        """
        self.recorder = recorder
        self.free_block_queue.recorder = recorder

    def get_cached_block(
        self, block_hash: BlockHash, kv_cache_group_ids: list[int]
    ) -> list[KVCacheBlock] | None:
        """The cached block for ``block_hash`` in each group, or None if any group misses.

        Stops at the first group that misses; with duplicates, the first cached block.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.get_cached_block (reports one ``lookup``
        per group probed, with None on a miss).

        Args:
            block_hash: The block's BlockHash (without group id).
            kv_cache_group_ids: Groups to look in (ints, 0 <= id < 2**32).

        Returns:
            One block per group, or None.

        Raises:
            TypeError: block_hash is not bytes, or kv_cache_group_ids is not a list of ints.
            ValueError: A group id outside [0, 2**32) (the key holds it in 4 bytes). Nothing
                is looked up or recorded.
        """
        kv_cache_group_ids = guard_get_cached_block(block_hash, kv_cache_group_ids)
        cached_blocks = []
        for group_id in kv_cache_group_ids:
            block_hash_with_group_id = make_block_hash_with_group_id(block_hash, group_id)
            block = self.cached_block_hash_to_block.get_one_block(block_hash_with_group_id)
            if self.recorder is not None:
                self.recorder.lookup(block_hash, group_id, block.block_id if block else -1)
            if not block:
                return None
            cached_blocks.append(block)
        return cached_blocks

    def cache_full_blocks(
        self,
        request: Request,
        blocks: list[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int,
        block_mask: list[bool] | None = None,
    ) -> None:
        """Give ``blocks[num_cached_blocks:num_full_blocks]`` their hashes and cache them.

        The hashes come from ``request.block_hashes`` (computed when tokens are appended),
        joined into ``block_size``-token hashes when the group's blocks are bigger than
        ``hash_block_size``. Null blocks and blocks whose ``block_mask`` entry is False are
        skipped (groups whose lookups only read some blocks, e.g. a sliding window inside an
        aligned hit, keep the others out of the map).

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.cache_full_blocks

        Args:
            request: The request; its block_hashes (at hash_block_size) must cover the blocks.
            blocks: All of the request's blocks in this group.
            num_cached_blocks: Blocks already cached (blocks).
            num_full_blocks: Full blocks after this call (blocks).
            block_size: The group's block size (tokens), a multiple of hash_block_size.
            kv_cache_group_id: The group.
            block_mask: Per new full block, False to skip it (like a null block).

        Raises:
            TypeError: A request without block_hashes, blocks that are not a list of
                KVCacheBlock, or a count / size / group id that is not an int.
            ValueError: Too few hashes, a mask of the wrong length, a block_size that is not a
                multiple of hash_block_size, counts outside 0 <= num_cached_blocks and
                0 <= num_full_blocks <= len(blocks), a group id outside [0, 2**32), or a block
                that is already cached. Nothing is changed.
        """
        guard_cache_full_blocks(
            self, request, blocks, num_cached_blocks, num_full_blocks, block_size,
            kv_cache_group_id, block_mask,
        )  # fmt: skip
        if num_cached_blocks >= num_full_blocks:
            return
        new_full_blocks = blocks[num_cached_blocks:num_full_blocks]
        assert len(request.block_hashes) >= num_full_blocks
        assert block_mask is None or len(block_mask) == len(new_full_blocks)
        if block_size == self.hash_block_size:
            block_hashes: BlockHashList = request.block_hashes
        else:
            # Groups with bigger blocks hash a block as its hash_block_size hashes joined.
            assert block_size % self.hash_block_size == 0
            block_hashes = BlockHashListWithBlockSize(
                request.block_hashes, self.hash_block_size, block_size
            )

        new_block_hashes = block_hashes[num_cached_blocks:]
        new_hashes: list[ExternalBlockHash] | None = [] if self.enable_kv_cache_events else None
        for i, blk in enumerate(new_full_blocks):
            # Null (skipped) and masked-out blocks are never cached.
            if blk.is_null or (block_mask is not None and not block_mask[i]):
                continue
            assert blk.block_hash is None
            block_hash = new_block_hashes[i]

            block_hash_with_group_id = make_block_hash_with_group_id(block_hash, kv_cache_group_id)
            blk.block_hash = block_hash_with_group_id
            self.cached_block_hash_to_block.insert(block_hash_with_group_id, blk)
            if new_hashes is not None:
                new_hashes.append(maybe_convert_block_hash(block_hash))
        if self.recorder is not None:
            self.recorder.cache_full_blocks(
                request.request_id, kv_cache_group_id, num_cached_blocks, num_full_blocks,
                [b.block_id for b in new_full_blocks if b.block_hash is not None],
                [b.block_hash for b in new_full_blocks if b.block_hash is not None],
            )  # fmt: skip

        if self.enable_kv_cache_events:
            if num_cached_blocks == 0:
                parent_block_hash: ExternalBlockHash | None = None
            else:
                parent_block_hash = maybe_convert_block_hash(block_hashes[num_cached_blocks - 1])

            # The stored blocks' token range.
            start_token_idx = num_cached_blocks * block_size
            end_token_idx = num_full_blocks * block_size

            # One extra-keys entry per stored block (mm items, cache_salt on the first block),
            # skipping null and masked-out blocks as new_hashes does.
            extra_keys_list: list[tuple[Any, ...] | None] = []
            curr_mm_idx = 0
            for i in range(num_cached_blocks, num_full_blocks):
                if blocks[i].is_null:
                    continue
                if block_mask is not None and not block_mask[i - num_cached_blocks]:
                    continue
                block_start = i * block_size
                block_end = block_start + block_size
                extra_keys, curr_mm_idx = generate_block_hash_extra_keys(
                    request, block_start, block_end, curr_mm_idx
                )
                extra_keys_list.append(extra_keys)

            self.kv_event_queue.append(
                BlockStored(
                    block_hashes=new_hashes,
                    parent_block_hash=parent_block_hash,
                    token_ids=request.all_token_ids[start_token_idx:end_token_idx],
                    block_size=block_size,
                    lora_id=request.lora_request.adapter_id if request.lora_request else None,
                    medium=MEDIUM_GPU,
                    lora_name=request.lora_request.name if request.lora_request else None,
                    extra_keys=extra_keys_list if extra_keys_list else None,
                    group_idx=kv_cache_group_id,
                )
            )

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` blocks from the head of the free queue, evicting their old hashes.

        Does not look at the prefix cache; eviction is lazy: a cached free block loses its hash
        only when it is popped for reuse.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.get_new_blocks

        Args:
            num_blocks: Blocks to allocate (blocks).

        Returns:
            The blocks in free-queue order, each with ref_cnt 1.

        Raises:
            TypeError: If num_blocks is not an int (nothing changed).
            ValueError: If num_blocks < 0 or more than the free blocks (nothing changed).
        """
        guard_get_new_blocks(self, num_blocks)
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(
                f"Cannot get {num_blocks} free blocks from the pool: {self.get_num_free_blocks()} "
                f"free (allowed: 0 <= num_blocks <= {self.get_num_free_blocks()})"
            )

        ret: list[KVCacheBlock] = self.free_block_queue.popleft_n(num_blocks)

        # One loop per branch, so each block is visited once (as vLLM).
        if self.enable_caching:
            for block in ret:
                self._maybe_evict_cached_block(block)
                assert block.ref_cnt == 0
                block.ref_cnt += 1
                if self.recorder is not None:
                    self.recorder.get_new_blocks((block.block_id,))
                if self.metrics_collector:
                    self.metrics_collector.on_block_allocated(block)
        else:
            for block in ret:
                assert block.ref_cnt == 0
                block.ref_cnt += 1
                if self.recorder is not None:
                    self.recorder.get_new_blocks((block.block_id,))
                if self.metrics_collector:
                    self.metrics_collector.on_block_allocated(block)
        return ret

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop ``block`` from the prefix cache if it is cached there.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool._maybe_evict_cached_block (the metrics
        collector hears of every call, cached or not).

        Returns:
            True if the block was cached and has been evicted.
        """
        if self.metrics_collector:
            self.metrics_collector.on_block_evicted(block)

        block_hash = block.block_hash
        if block_hash is None:
            return False

        if self.cached_block_hash_to_block.pop(block_hash, block.block_id) is None:
            return False

        block.reset_hash()
        if self.recorder is not None:
            self.recorder.evict(block.block_id, block_hash)

        if self.enable_kv_cache_events:
            self.kv_event_queue.append(
                BlockRemoved(
                    block_hashes=[maybe_convert_block_hash(get_block_hash(block_hash))],
                    medium=MEDIUM_GPU,
                    group_idx=get_group_id(block_hash),
                )
            )
        return True

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        """ref_cnt += 1 for each block (a cache hit), taking free ones out of the free queue.

        A block with ref_cnt 0 sits in the free queue as an eviction candidate; a hit takes it
        out. The null block is counted too, but it is never in the queue.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.touch

        Args:
            blocks: The hit blocks.

        Raises:
            TypeError: If ``blocks`` is not an iterable of KVCacheBlock (nothing changed).
        """
        blocks = guard_touch(self, blocks)
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
            if self.recorder is not None:
                self.recorder.touch((block.block_id,))
            if self.metrics_collector:
                self.metrics_collector.on_block_accessed(block)

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """ref_cnt -= 1 for each block; blocks reaching 0 are appended to the free queue in order.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.free_blocks

        Args:
            ordered_blocks: Blocks in eviction priority, first evicted first (callers pass a
                request's blocks reversed, so its tail blocks are evicted before its head).

        A block that is not one of this pool's (a KVCacheBlock built by the caller, as vLLM's
        own tests do) is handled as vLLM does, whatever its ref_cnt: ``ref_cnt -= 1``, and it
        joins the free queue only if that makes it 0.

        Raises:
            ValueError: If one of this pool's blocks (other than the null block) would be freed
                below ref_cnt 0 (freed twice, or listed more times than it is held), or listed
                twice and freed to 0 (vLLM would link it twice): nothing changed.
            TypeError: If ``ordered_blocks`` is not an iterable of KVCacheBlock (nothing changed).
        """
        ordered_blocks = guard_free_blocks(self, ordered_blocks)
        blocks_list = list(ordered_blocks)
        for block in blocks_list:
            block.ref_cnt -= 1
        if self.recorder is not None:
            self.recorder.free_blocks([b.block_id for b in blocks_list])
        self.free_block_queue.append_n(
            [block for block in blocks_list if block.ref_cnt == 0 and not block.is_null]
        )

    def evict_blocks(self, block_ids: set[int]) -> None:
        """Drop the given blocks from the prefix cache (used ones stay allocated).

        vLLM calls it to invalidate blocks whose KV a connector failed to load.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.evict_blocks (in the iteration order
        of ``block_ids``).

        Args:
            block_ids: Block ids (a set in vLLM); uncached ones are ignored.

        Raises:
            TypeError: If ``block_ids`` is not an iterable of ints (nothing changed).
            ValueError: If an id is not in [0, num_gpu_blocks) (nothing changed).
        """
        block_ids = guard_evict_blocks(self, block_ids)
        for block_id in block_ids:
            assert block_id < len(self.blocks), (
                f"Invalid block_id {block_id} >= {len(self.blocks)}: workers should only report "
                "block IDs that were allocated by the scheduler."
            )
            block = self.blocks[block_id]
            self._maybe_evict_cached_block(block)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash, if no block other than the null block is in use.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.reset_prefix_cache

        Returns:
            True if reset; False (nothing changed) while requests still hold blocks.
        """
        num_used_blocks = self.num_gpu_blocks - self.get_num_free_blocks()
        if num_used_blocks != 1:  # the null block always counts as used
            logger.warning(
                "Failed to reset prefix cache because some blocks (%d) are not freed yet",
                num_used_blocks - 1,
            )
            return False

        self.cached_block_hash_to_block = BlockHashToBlockMap()

        for block in self.blocks:
            block.reset_hash()
        if self.recorder is not None:
            self.recorder.reset()

        if self.metrics_collector:
            self.metrics_collector.reset()

        logger.info("Successfully reset prefix cache")

        if self.enable_kv_cache_events:
            self.kv_event_queue.append(AllBlocksCleared())

        return True

    def get_num_free_blocks(self) -> int:
        """Blocks in the free queue, cached eviction candidates included (blocks).

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.get_num_free_blocks
        """
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Fraction of non-null blocks in use, 0.0 to 1.0 (0 if the pool is only the null block).

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.get_usage
        """
        total_gpu_blocks = self.num_gpu_blocks - 1
        if not total_gpu_blocks:
            return 0
        return 1.0 - (self.get_num_free_blocks() / total_gpu_blocks)

    def take_events(self) -> list[KVCacheEvent]:
        """Return and clear the queued KV events ([] when events are off).

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.take_events
        """
        if not self.enable_kv_cache_events:
            return []
        events = self.kv_event_queue
        self.kv_event_queue = []
        return events
