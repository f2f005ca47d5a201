"""KVCacheBlock and the free block queue (an intrusive doubly linked list in LRU order).

Mirrors: vllm/v1/core/kv_cache_utils.py::KVCacheBlock and ::FreeKVCacheBlockQueue.
Re-exported by ``kvlab.core.kv_cache_utils``.

The queue links the blocks themselves (``prev_free_block`` / ``next_free_block``), between two
fake sentinel blocks that are never popped::

    fake_head <-> b1 <-> b2 <-> ... <-> bn <-> fake_tail
                  ^ popleft / popleft_n        ^ append / append_n
                  (evicted first)              (evicted last)

Examples:
    >>> blocks = [KVCacheBlock(i) for i in range(4)]
    >>> q = FreeKVCacheBlockQueue(blocks)
    >>> q.popleft().block_id, q.num_free_blocks
    (0, 3)
    >>> q.remove(blocks[2]); q.append(blocks[0])
    >>> [b.block_id for b in q.get_all_free_blocks()]
    [1, 3, 0]
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvlab.core.block_hash import BlockHashWithGroupId

if TYPE_CHECKING:
    from kvlab.core.recorder import KVRecorder

__all__ = ["FreeKVCacheBlockQueue", "KVCacheBlock"]


@dataclass(slots=True)
class KVCacheBlock:
    """Metadata of one KV-cache block (the tensors live in the worker).

    Mirrors: vllm/v1/core/kv_cache_utils.py::KVCacheBlock (same fields and repr).

    Attributes:
        block_id: Index of the block, 0 <= block_id < num_gpu_blocks.
        ref_cnt: How many requests (per group) hold the block; 0 = free or evictable.
        prev_free_block: Free-list link; only FreeKVCacheBlockQueue writes it.
        next_free_block: Free-list link; only FreeKVCacheBlockQueue writes it.
        is_null: True for the pool's null_block (block 0), which is never cached or freed.
    """

    block_id: int
    ref_cnt: int = 0
    # NOTE: set only while the block is full AND in cached_block_hash_to_block.
    _block_hash: BlockHashWithGroupId | None = None
    prev_free_block: KVCacheBlock | None = None
    next_free_block: KVCacheBlock | None = None
    is_null: bool = False

    @property
    def block_hash(self) -> BlockHashWithGroupId | None:
        """The cached-map key (BlockHashWithGroupId) of a cached block, else None.

        Raises:
            ValueError: On assignment when the block already has a hash (reset_hash first).
        """
        return self._block_hash

    @block_hash.setter
    def block_hash(self, block_hash: BlockHashWithGroupId) -> None:
        if self._block_hash is not None:
            raise ValueError(
                f"block {self.block_id} already has a block_hash; call reset_hash() first"
            )
        self._block_hash = block_hash

    def reset_hash(self) -> None:
        """Forget the block's hash (on eviction from the prefix cache)."""
        self._block_hash = None

    def __repr__(self) -> str:
        prev_id = self.prev_free_block.block_id if self.prev_free_block else None
        next_id = self.next_free_block.block_id if self.next_free_block else None
        return (
            f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, "
            f"_block_hash={self._block_hash!r}, prev_free_block={prev_id}, "
            f"next_free_block={next_id})"
        )


class FreeKVCacheBlockQueue:
    """The free blocks in eviction order: O(1) popleft, append and remove-from-the-middle.

    Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue. Differs: bad caller input
    raises before any change, where vLLM asserts or corrupts the list: popleft_n with n < 0,
    n > num_free_blocks or a non-int; append / append_n of a block already queued (or listed
    twice), found in O(1) per block from its prev link. Every operation reports to
    ``recorder`` when one is set.

    The queue starts in block_id order. BlockPool.free_blocks appends a request's blocks tail
    first, so the least recently used block, and within one request the block with the most
    hashed tokens, sits at the head and is evicted first.

    Args:
        blocks: The blocks to link, in queue order (head first).

    Attributes:
        num_free_blocks: Blocks in the queue (blocks).
        fake_free_list_head: Sentinel before the first block (block_id -1).
        fake_free_list_tail: Sentinel after the last block (block_id -1).
        recorder: None (off) or a ``kvlab.core.recorder.KVRecorder``.
    """

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.num_free_blocks = len(blocks)
        self.recorder: KVRecorder | None = None
        self.fake_free_list_head = KVCacheBlock(block_id=-1)
        self.fake_free_list_tail = KVCacheBlock(block_id=-1)
        # NOTE: invariant: every real block in the queue has non-None prev and next links;
        # every block outside the queue has both links None.
        prev = self.fake_free_list_head
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = prev

    def popleft(self) -> KVCacheBlock:
        """Unlink and return the head block.

        Returns:
            The first free block.

        Raises:
            ValueError: If the queue is empty ("No free blocks available", as vLLM).
            RuntimeError: If the head block has no next link (corrupted list).
        """
        first_block = self.fake_free_list_head.next_free_block
        if first_block is self.fake_free_list_tail or first_block is None:
            raise ValueError("No free blocks available")
        if first_block.next_free_block is None:
            raise RuntimeError(
                "Invalid block found in popleft() which doesn't have a valid next_free_block"
            )
        self.fake_free_list_head.next_free_block = first_block.next_free_block
        first_block.next_free_block.prev_free_block = self.fake_free_list_head
        first_block.prev_free_block = first_block.next_free_block = None
        self.num_free_blocks -= 1
        rec = self.recorder
        if rec is not None:
            rec.popleft(first_block.block_id)
        return first_block

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Unlink and return the first ``n`` blocks, head first.

        Args:
            n: Number of blocks to pop (blocks), 0 <= n <= num_free_blocks.

        Returns:
            The popped blocks in queue order (empty for n == 0).

        Raises:
            ValueError: If n < 0 or n > num_free_blocks (nothing is changed).
            TypeError: If n is not a number (nothing is changed).
        """
        if n == 0:
            return []
        if n.__class__ is not int:  # NOTE: numpy ints pass; float, str, bool do not
            if isinstance(n, bool) or not hasattr(n, "__index__"):
                raise TypeError(
                    f"popleft_n: n must be an int in [0, num_free_blocks={self.num_free_blocks}]"
                    f", got {type(n).__name__} {n!r}"
                )
            n = n.__index__()
        if n < 0 or n > self.num_free_blocks:
            raise ValueError(
                f"popleft_n({n}): n must be in [0, num_free_blocks={self.num_free_blocks}]"
            )
        self.num_free_blocks -= n
        curr_block = self.fake_free_list_head.next_free_block
        ret = []
        for _ in range(n):
            ret.append(curr_block)
            last_block = curr_block
            curr_block = curr_block.next_free_block
            last_block.prev_free_block = last_block.next_free_block = None
        # curr_block is now the new first block or the fake tail.
        self.fake_free_list_head.next_free_block = curr_block
        curr_block.prev_free_block = self.fake_free_list_head
        rec = self.recorder
        if rec is not None:
            rec.popleft_n([b.block_id for b in ret])
        return ret

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from anywhere in the queue (a cache hit on an evictable block).

        Args:
            block: A block currently in the queue.

        Raises:
            RuntimeError: If ``block`` is not linked into the queue (as vLLM; nothing changed).
        """
        if block.prev_free_block is None or block.next_free_block is None:
            raise RuntimeError(
                f"remove() called on an invalid block: {block} (allowed: a block in the free "
                "queue, i.e. with free-list links)"
            )
        block.prev_free_block.next_free_block = block.next_free_block
        block.next_free_block.prev_free_block = block.prev_free_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1
        rec = self.recorder
        if rec is not None:
            rec.remove(block.block_id)

    def append(self, block: KVCacheBlock) -> None:
        """Link ``block`` at the tail (evicted last).

        Args:
            block: A block not currently in the queue.

        Raises:
            ValueError: If ``block`` is already in the queue (it has a free-list link; nothing
                changed). vLLM does not check and corrupts the list.
            RuntimeError: If the fake tail lost its prev link (corrupted list).
        """
        if block.prev_free_block is not None or block.next_free_block is not None:
            raise ValueError(_already_queued(block))
        last_block = self.fake_free_list_tail.prev_free_block
        if last_block is None:
            raise RuntimeError("prev_free_block of fake_free_list_tail should always exist")
        last_block.next_free_block = block
        block.prev_free_block = last_block
        block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = block
        self.num_free_blocks += 1
        rec = self.recorder
        if rec is not None:
            rec.append(block.block_id)

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        """Link ``blocks`` at the tail, in the given order (blocks[0] is evicted first of them).

        Args:
            blocks: Blocks not currently in the queue, each listed once.

        Raises:
            ValueError: If a block is already in the queue or listed twice (nothing changed).
                vLLM does not check and corrupts the list.
            AssertionError: If the fake tail lost its prev link (corrupted list; as vLLM).
        """
        if len(blocks) == 0:
            return
        tail = self.fake_free_list_tail.prev_free_block
        if tail is None:  # NOTE: vLLM asserts here; kvlab raises the same exception type
            raise AssertionError("prev_free_block of fake_free_list_tail should always exist")
        last_block = tail
        it = iter(blocks)
        for block in it:
            # NOTE: O(1) check: a queued block (or one linked earlier in this loop) has a
            # prev link. On failure the k blocks linked so far are unlinked again.
            if block.prev_free_block is not None:
                k = len(blocks) - operator.length_hint(it) - 1
                for linked in blocks[:k]:
                    linked.prev_free_block = linked.next_free_block = None
                tail.next_free_block = self.fake_free_list_tail
                raise ValueError(_already_queued(block))
            block.prev_free_block = last_block
            last_block.next_free_block = block
            last_block = block
        last_block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = last_block
        self.num_free_blocks += len(blocks)
        rec = self.recorder
        if rec is not None:
            rec.append_n([b.block_id for b in blocks])

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Return the queued blocks head to tail (O(n); for tests and views).

        Raises:
            RuntimeError: If the fake head lost its next link (corrupted list).
        """
        curr_block = self.fake_free_list_head.next_free_block
        if curr_block is None:
            raise RuntimeError("next_free_block of fake_free_list_head should always exist")
        ret = []
        while curr_block.next_free_block is not None:
            ret.append(curr_block)
            curr_block = curr_block.next_free_block
        return ret


def _already_queued(block: KVCacheBlock) -> str:
    return (
        f"block {block.block_id} is already in the free queue (ref_cnt {block.ref_cnt}); "
        "allowed: blocks outside the queue, each appended once"
    )
