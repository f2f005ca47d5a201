"""The block pool: every KVCacheBlock, the free queue, and the prefix-cache map.

Mirrors: vllm/v1/core/block_pool.py (BlockHashToBlockMap, BlockPool). Differs: bad caller
input raises ValueError before anything changes (vLLM asserts or corrupts state), and every
state change is reported to ``recorder`` when one is set (see ``kvlab.core.recorder``).

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

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kvlab.core.block_hash import (
    BlockHash,
    BlockHashList,
    BlockHashListWithBlockSize,
    ExternalBlockHash,
    get_block_hash,
    get_group_id,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
)
from kvlab.core import block_pool_checks as checks
from kvlab.core.block_pool_events import make_block_stored
from kvlab.core.block_hash_to_block_map import BlockHashToBlockMap
from kvlab.core.kv_cache_block import FreeKVCacheBlockQueue, KVCacheBlock
from kvlab.core.kv_events import (
    MEDIUM_GPU,
    AllBlocksCleared,
    BlockRemoved,
    KVCacheEvent,
)

if TYPE_CHECKING:
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector
    from kvlab.core.recorder import KVRecorder
    from kvlab.core.request import Request

logger = logging.getLogger(__name__)

__all__ = ["VLLM_METHOD_NAMES", "BlockHashToBlockMap", "BlockPool"]

VLLM_METHOD_NAMES = {
    "_touch_unchecked": "touch",
    "_get_new_blocks_unchecked": "get_new_blocks",
    "_free_blocks_unchecked": "free_blocks",
}
"""kvlab-only BlockPool methods -> the vLLM method each one is the body of.

The single-type managers call these unchecked internals (their arguments were validated once at
KVCacheManager's API boundary); the public methods of vLLM's names check, then run the same body.
A profile or call tree that teaches vLLM's layering shows them under vLLM's names."""


class BlockPool:
    """Allocates, frees and caches KVCacheBlocks; evicts cached blocks lazily (LRU).

    Mirrors: vllm/v1/core/block_pool.py::BlockPool. Block 0 is popped at construction as the
    ``null_block`` (a placeholder for skipped blocks, e.g. outside a sliding window).

    Recording: hooks fire after the change they describe and only when something changed
    (empty get_new_blocks/touch/free_blocks, and cache_full_blocks that cached no block, report
    nothing). reset_prefix_cache reports one ``reset`` and no per-block ``evict``: vLLM's reset
    drops the map and clears every hash directly, without going through eviction (and emits
    one AllBlocksCleared, no BlockRemoved).

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
        if not isinstance(num_gpu_blocks, int) or num_gpu_blocks <= 0:
            raise ValueError(
                f"num_gpu_blocks must be a positive int (blocks), got {num_gpu_blocks!r}"
            )
        if not isinstance(hash_block_size, int) or hash_block_size <= 0:
            raise ValueError(
                f"hash_block_size must be a positive int (tokens), got {hash_block_size!r}"
            )
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.hash_block_size = hash_block_size
        self.blocks: list[KVCacheBlock] = [KVCacheBlock(idx) for idx in range(num_gpu_blocks)]
        # NOTE: holds every block with ref_cnt == 0 except the null block, in eviction order.
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        # NOTE: a block is in this map iff its block_hash is set (null blocks never are).
        self.cached_block_hash_to_block: BlockHashToBlockMap = BlockHashToBlockMap()
        # NOTE: the null block's ref_cnt is not meaningful; it is never appended to the queue.
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.enable_kv_cache_events = enable_kv_cache_events
        self.kv_event_queue: list[KVCacheEvent] = []
        self.metrics_collector = metrics_collector
        self.recorder: KVRecorder | None = None

    def set_recorder(self, recorder: KVRecorder | None) -> None:
        """Attach (or detach with None) a recorder to the pool and its free_block_queue."""
        self.recorder = recorder
        self.free_block_queue.recorder = recorder

    def get_cached_block(
        self, block_hash: BlockHash, kv_cache_group_ids: list[int]
    ) -> list[KVCacheBlock] | None:
        """The cached block for ``block_hash`` in each group, or None if any group misses.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.get_cached_block (stops at the first
        group that misses; reports one ``lookup`` per group probed, block_id -1 on a miss).

        Args:
            block_hash: The block's BlockHash (without group id).
            kv_cache_group_ids: Groups to look in.

        Returns:
            One block per group (the first cached one if duplicated), or None.

        Raises:
            TypeError: block_hash is not bytes, or kv_cache_group_ids is not a list of ints.
            ValueError: A group id outside [0, 2**32) (the key holds it in 4 bytes). Nothing
                is looked up or recorded.
        """
        try:
            if self.recorder is not None:
                return self._get_cached_block(block_hash, kv_cache_group_ids)
            cached_blocks = []  # NOTE: the hot path (recording off), inlined
            for group_id in kv_cache_group_ids:
                block = self.cached_block_hash_to_block.get_one_block(
                    make_block_hash_with_group_id(block_hash, group_id)
                )
                if block is None:
                    return None
                cached_blocks.append(block)
            return cached_blocks
        except (TypeError, AttributeError, OverflowError):
            # NOTE: no check on the hot path; a bad argument is named here. Int-likes (numpy)
            # pass the check and are looked up once more, unguarded.
            group_ids = checks.check_cached_block_args(block_hash, kv_cache_group_ids)
        return self._get_cached_block(block_hash, group_ids)

    def _get_cached_block(
        self, block_hash: BlockHash, kv_cache_group_ids: Iterable[int]
    ) -> list[KVCacheBlock] | None:
        """get_cached_block off its fast path: every key is built before the first lookup, so
        a bad argument raises before anything is recorded."""
        if not isinstance(block_hash, bytes):
            raise TypeError
        group_ids = list(kv_cache_group_ids)
        keys = [make_block_hash_with_group_id(block_hash, g) for g in group_ids]
        rec = self.recorder
        cached_blocks = []
        for group_id, key in zip(group_ids, keys):
            block = self.cached_block_hash_to_block.get_one_block(key)
            if rec is not None:
                rec.lookup(block_hash, group_id, -1 if block is None else block.block_id)
            if block is None:
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

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.cache_full_blocks.

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
        num_cached_blocks, num_full_blocks, block_size, kv_cache_group_id = (
            checks.check_cache_full_blocks_args(
                request, blocks, num_cached_blocks, num_full_blocks, block_size, kv_cache_group_id
            )
        )
        if num_cached_blocks >= num_full_blocks:
            return
        new_full_blocks = blocks[num_cached_blocks:num_full_blocks]
        checks.check_cache_full_blocks(
            request, new_full_blocks, num_full_blocks, block_size, self.hash_block_size, block_mask
        )
        block_hashes: BlockHashList = request.block_hashes
        if block_size != self.hash_block_size:  # a group whose blocks span several hashes
            block_hashes = BlockHashListWithBlockSize(
                block_hashes, self.hash_block_size, block_size
            )
        new_block_hashes = block_hashes[num_cached_blocks:]
        new_hashes: list[ExternalBlockHash] | None = [] if self.enable_kv_cache_events else None
        rec = self.recorder
        stored: list[KVCacheBlock] | None = [] if rec is not None else None
        cached_map = self.cached_block_hash_to_block
        for i, blk in enumerate(new_full_blocks):
            if blk.is_null or (block_mask is not None and not block_mask[i]):
                continue  # null (skipped) or masked-out blocks are never cached
            block_hash = new_block_hashes[i]
            key = make_block_hash_with_group_id(block_hash, kv_cache_group_id)
            blk._block_hash = key  # NOTE: the slot: check_cache_full_blocks proved it unset
            cached_map.insert(key, blk)
            if new_hashes is not None:
                new_hashes.append(maybe_convert_block_hash(block_hash))
            if stored is not None:
                stored.append(blk)
        if new_hashes is not None:
            self.kv_event_queue.append(make_block_stored(
                request, blocks, block_hashes, new_hashes, num_cached_blocks, num_full_blocks,
                block_size, kv_cache_group_id, block_mask,
            ))  # fmt: skip
        if stored:
            rec.cache_full_blocks(
                request.request_id, kv_cache_group_id, num_cached_blocks, num_full_blocks,
                [b.block_id for b in stored], [b.block_hash for b in stored],
            )  # fmt: skip

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` blocks from the head of the free queue, evicting their old hashes.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.get_new_blocks (does not look at the
        prefix cache; eviction is lazy: a cached free block loses its hash only when reused).

        Args:
            num_blocks: Blocks to allocate (blocks).

        Returns:
            The blocks in free-queue order, each with ref_cnt 1.

        Raises:
            TypeError: If num_blocks is not an int (nothing changed).
            ValueError: If num_blocks < 0 or more than the free blocks (nothing changed).
        """
        num_free = self.free_block_queue.num_free_blocks
        if num_blocks.__class__ is not int:
            checks.check_num_blocks_type(num_blocks, num_free)
        if num_blocks > num_free or num_blocks < 0:
            raise ValueError(
                f"Cannot get {num_blocks} free blocks from the pool: {num_free} free "
                f"(allowed: 0 <= num_blocks <= {num_free})"
            )
        ret: list[KVCacheBlock] = self.free_block_queue.popleft_n(num_blocks)
        metrics_collector = self.metrics_collector
        if self.enable_caching:
            # NOTE: vLLM evicts and counts block by block in one loop; kvlab evicts them all
            # first. Same outcome (popleft_n never repeats a block), and a recorded trace then
            # matches the live state at every event: each BLOCK_REMOVED happens before the one
            # GET_NEW_BLOCKS event that counts the blocks.
            for block in ret:
                self._maybe_evict_cached_block(block)
        for block in ret:
            assert block.ref_cnt == 0, f"free block {block.block_id} has ref_cnt {block.ref_cnt}"
            block.ref_cnt += 1
            if metrics_collector is not None:
                metrics_collector.on_block_allocated(block)
        rec = self.recorder
        if rec is not None and ret:
            rec.get_new_blocks([b.block_id for b in ret])
        return ret

    def _get_new_blocks_unchecked(self, num_blocks: int) -> list[KVCacheBlock]:
        """get_new_blocks for the managers, which pass an int they computed themselves.

        allocate_slots has already checked that the pool holds that many free blocks, so the
        type and count checks of the public get_new_blocks are skipped (popleft_n still
        refuses a count outside [0, free blocks] before any change). With a recorder or a
        metrics collector attached it is get_new_blocks.
        """
        if self.recorder is not None or self.metrics_collector is not None:
            return self.get_new_blocks(num_blocks)
        ret: list[KVCacheBlock] = self.free_block_queue.popleft_n(num_blocks)
        if self.enable_caching:
            # NOTE: one loop, and the evict call only for blocks that still have a hash
            # (vLLM calls _maybe_evict_cached_block for every block).
            for block in ret:
                if block._block_hash is not None:
                    self._maybe_evict_cached_block(block)
                block.ref_cnt += 1
        else:
            for block in ret:
                block.ref_cnt += 1
        return ret

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop ``block`` from the prefix cache if it is cached there.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool._maybe_evict_cached_block (the metrics
        collector hears of every call, cached or not).

        Returns:
            True if the block was cached and has been evicted.
        """
        if self.metrics_collector is not None:
            self.metrics_collector.on_block_evicted(block)
        block_hash = block._block_hash
        if block_hash is None:
            return False
        if self.cached_block_hash_to_block.pop(block_hash, block.block_id) is None:
            return False
        block._block_hash = None  # reset_hash(), inlined (hot)
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(
                BlockRemoved(
                    block_hashes=[maybe_convert_block_hash(get_block_hash(block_hash))],
                    medium=MEDIUM_GPU,
                    group_idx=get_group_id(block_hash),
                )
            )
        rec = self.recorder
        if rec is not None:
            rec.evict(block.block_id, block_hash)
        return True

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        """ref_cnt += 1 for each block (a cache hit), taking free ones out of the free queue.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.touch (the null block is counted too,
        but never removed from the queue it is not in).

        Args:
            blocks: The hit blocks.

        Raises:
            TypeError: If ``blocks`` is not a sequence of KVCacheBlock (nothing changed).
        """
        queue = self.free_block_queue
        metrics_collector = self.metrics_collector
        # NOTE: two passes where vLLM has one: every REMOVE happens before the one TOUCH event
        # that counts the blocks, so a recorded trace matches the live state at every event.
        # Same outcome: a block leaves the queue iff it was free (ref_cnt 0, not null); a block
        # listed twice is removed once (prev_free_block is None once it left the queue). The
        # free ones are listed first, so an item that is not a block fails before any change.
        try:
            free = [b for b in blocks if b.ref_cnt == 0 and not b.is_null]
        except (TypeError, AttributeError):
            raise checks.blocks_type_error("touch", "blocks", blocks) from None
        for block in free:
            if block.prev_free_block is not None:
                queue.remove(block)
        if metrics_collector is None:
            for block in blocks:
                block.ref_cnt += 1
        else:
            for block in blocks:
                block.ref_cnt += 1
                metrics_collector.on_block_accessed(block)
        rec = self.recorder
        if rec is not None and blocks:
            rec.touch([b.block_id for b in blocks])

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """ref_cnt -= 1 for each block; blocks reaching 0 are appended to the free queue in order.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.free_blocks.

        Args:
            ordered_blocks: Blocks in eviction priority, first evicted first (callers pass a
                request's blocks reversed, so its tail blocks are evicted before its head).

        A block that is not one of this pool's (a KVCacheBlock built by the caller, as vLLM's
        own tests do) is handled as vLLM does, whatever its ref_cnt: ``ref_cnt -= 1``, and it
        joins the free queue only if that makes it 0 (so from 0 it goes to -1 and the pool
        is untouched).

        Raises:
            ValueError: If one of this pool's blocks (other than the null block) is already
                free: ref_cnt 0, e.g. freed twice, or listed more times than it is held
                (nothing changed). vLLM would drive its ref_cnt to -1: a block still linked
                in the free queue that ``touch`` no longer unlinks and ``get_new_blocks``
                asserts on, or a block lost to the pool.
            TypeError: If ``ordered_blocks`` is not an iterable of KVCacheBlock (nothing changed).
        """
        blocks_list = checks.list_blocks(ordered_blocks)
        it = iter(blocks_list)
        try:
            # NOTE: one compare per block on the hot path; undo_free restores the blocks
            # before a bad one (a double free, or an item that is not a block).
            for block in it:
                if (
                    block.ref_cnt <= 0
                    and not block.is_null
                    and checks.is_pool_block(self.blocks, block)
                ):
                    raise checks.double_free_error(block)
                block.ref_cnt -= 1
        except (ValueError, AttributeError) as exc:
            checks.undo_free(blocks_list, it, exc)
        rec = self.recorder
        if rec is not None and blocks_list:
            rec.free_blocks([b.block_id for b in blocks_list])
        to_append = [b for b in blocks_list if b.ref_cnt == 0 and not b.is_null]
        try:
            self.free_block_queue.append_n(to_append)
        except ValueError:
            # NOTE: a block listed k times with ref_cnt k reached 0 once: link it once, at its
            # first position (vLLM links it k times and corrupts the queue). append_n changed
            # nothing when it refused the duplicate.
            self.free_block_queue.append_n(list({id(b): b for b in to_append}.values()))

    def _touch_unchecked(self, blocks: Sequence[KVCacheBlock]) -> None:
        """touch for the managers, whose hit blocks come from the pool's own cached map.

        One pass, as vLLM's touch; with a recorder or a metrics collector attached it is
        touch (whose two passes keep a recorded trace equal to the live state).
        """
        if self.recorder is not None or self.metrics_collector is not None:
            self.touch(blocks)
            return
        queue = self.free_block_queue
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                queue.remove(block)
            block.ref_cnt += 1

    def _free_blocks_unchecked(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """free_blocks for the managers, which free only blocks a request holds.

        A request's block list holds each of this pool's blocks at most once (only the null
        block repeats) and only blocks with ref_cnt >= 1, so the double-free and duplicate
        checks of the public free_blocks cannot fire here and are skipped: one pass that
        decrements ref_cnt and links each block that reaches 0 at the queue's tail, in order.
        Caller-built blocks get vLLM's treatment, as in free_blocks. With a recorder attached
        it is free_blocks (the recorder hears ``free_blocks`` and then ``append_n``).
        """
        if self.recorder is not None:
            self.free_blocks(ordered_blocks)
            return
        queue = self.free_block_queue
        tail = queue.fake_free_list_tail
        last_block = tail.prev_free_block
        if last_block is None:  # NOTE: as append_n (vLLM asserts here)
            raise AssertionError("prev_free_block of fake_free_list_tail should always exist")
        num_appended = 0
        for block in ordered_blocks:
            ref_cnt = block.ref_cnt - 1
            block.ref_cnt = ref_cnt
            if ref_cnt == 0 and not block.is_null:
                block.prev_free_block = last_block
                last_block.next_free_block = block
                last_block = block
                num_appended += 1
        if num_appended:
            last_block.next_free_block = tail
            tail.prev_free_block = last_block
            queue.num_free_blocks += num_appended

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        """Drop the given blocks from the prefix cache (used ones stay allocated).

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.evict_blocks (in the iteration order
        of ``block_ids``).

        Args:
            block_ids: Block ids (a set in vLLM); uncached ones are ignored.

        Raises:
            TypeError: If ``block_ids`` is not an iterable of ints (nothing changed).
            ValueError: If an id is not in [0, num_gpu_blocks) (nothing changed).
        """
        block_ids = checks.check_evict_block_ids(block_ids, len(self.blocks))
        for block_id in block_ids:
            self._maybe_evict_cached_block(self.blocks[block_id])

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash, if no block other than the null block is in use.

        Mirrors: vllm/v1/core/block_pool.py::BlockPool.reset_prefix_cache.

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
        if self.metrics_collector is not None:
            self.metrics_collector.reset()
        logger.info("Successfully reset prefix cache")
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(AllBlocksCleared())
        rec = self.recorder
        if rec is not None:
            rec.reset()
        return True

    def get_num_free_blocks(self) -> int:
        """Blocks in the free queue, cached eviction candidates included (blocks)."""
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Fraction of non-null blocks in use, 0.0 to 1.0 (0 if the pool is only the null block)."""
        total_gpu_blocks = self.num_gpu_blocks - 1
        if not total_gpu_blocks:
            return 0
        return 1.0 - (self.get_num_free_blocks() / total_gpu_blocks)

    def take_events(self) -> list[KVCacheEvent]:
        """Return and clear the queued KV events ([] when events are off)."""
        if not self.enable_kv_cache_events:
            return []
        events, self.kv_event_queue = self.kv_event_queue, []
        return events
