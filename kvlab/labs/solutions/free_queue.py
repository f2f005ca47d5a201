"""Reference solution of lab ``free_queue``: the notebook's FreeKVCacheBlockQueue cell, bodies written.

Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue (statement order as vLLM's).
"""

from __future__ import annotations

from kvlab.core import KVCacheBlock

# --- notebook cell ---
class FreeKVCacheBlockQueue:
    """The free blocks in eviction order: O(1) popleft, append and remove-from-the-middle.

    Mirrors: vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue

    Args:
        blocks: The blocks to link, in queue order (head first).

    Attributes:
        num_free_blocks: Blocks in the queue (blocks).
        fake_free_list_head: Sentinel before the first block (a KVCacheBlock with block_id -1).
        fake_free_list_tail: Sentinel after the last block (block_id -1).
    """

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        ### BEGIN SOLUTION
        self.num_free_blocks = len(blocks)
        for i in range(self.num_free_blocks):
            if i > 0:
                blocks[i].prev_free_block = blocks[i - 1]
            if i < self.num_free_blocks - 1:
                blocks[i].next_free_block = blocks[i + 1]
        self.fake_free_list_head = KVCacheBlock(block_id=-1)
        self.fake_free_list_tail = KVCacheBlock(block_id=-1)
        if self.num_free_blocks > 0:
            self.fake_free_list_head.next_free_block = blocks[0]
            blocks[0].prev_free_block = self.fake_free_list_head
            self.fake_free_list_tail.prev_free_block = blocks[-1]
            blocks[-1].next_free_block = self.fake_free_list_tail
        else:
            self.fake_free_list_head.next_free_block = self.fake_free_list_tail
            self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        ### END SOLUTION

    def popleft(self) -> KVCacheBlock:
        """Unlink and return the head block (the least recently freed).

        Raises:
            ValueError: If the queue is empty ("No free blocks available").
        """
        ### BEGIN SOLUTION
        if (self.fake_free_list_head.next_free_block is self.fake_free_list_tail
                or self.fake_free_list_head.next_free_block is None):
            raise ValueError("No free blocks available")
        first_block = self.fake_free_list_head.next_free_block
        if first_block.next_free_block is None:
            raise RuntimeError("Invalid block found in popleft() which doesn't have a valid next_free_block")
        self.fake_free_list_head.next_free_block = first_block.next_free_block
        first_block.next_free_block.prev_free_block = self.fake_free_list_head
        first_block.prev_free_block = first_block.next_free_block = None
        self.num_free_blocks -= 1
        return first_block
        ### END SOLUTION

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Unlink and return the first ``n`` blocks (0 <= n <= num_free_blocks), head first."""
        ### BEGIN SOLUTION
        if n == 0:
            return []
        assert self.num_free_blocks >= n
        self.num_free_blocks -= n
        curr_block = self.fake_free_list_head.next_free_block
        ret = []
        for _ in range(n):
            assert curr_block is not None
            ret.append(curr_block)
            last_block = curr_block
            curr_block = curr_block.next_free_block
            last_block.prev_free_block = None
            last_block.next_free_block = None
        if curr_block is not None:
            self.fake_free_list_head.next_free_block = curr_block
            curr_block.prev_free_block = self.fake_free_list_head
        return ret
        ### END SOLUTION

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block``, which is in the queue, from wherever it is, in O(1)."""
        ### BEGIN SOLUTION
        if block.prev_free_block is None or block.next_free_block is None:
            raise RuntimeError(f"remove() called on an invalid block: {block}")
        block.prev_free_block.next_free_block = block.next_free_block
        block.next_free_block.prev_free_block = block.prev_free_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1
        ### END SOLUTION

    def append(self, block: KVCacheBlock) -> None:
        """Link ``block`` (not in the queue) at the tail: it will be evicted last."""
        ### BEGIN SOLUTION
        if self.fake_free_list_tail.prev_free_block is None:
            raise RuntimeError("prev_free_block of fake_free_list_tail should always exist")
        last_block = self.fake_free_list_tail.prev_free_block
        last_block.next_free_block = block
        block.prev_free_block = last_block
        block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = block
        self.num_free_blocks += 1
        ### END SOLUTION

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        """Link ``blocks`` at the tail in the given order (blocks[0] is evicted first of them)."""
        ### BEGIN SOLUTION
        if len(blocks) == 0:
            return
        last_block = self.fake_free_list_tail.prev_free_block
        assert last_block is not None, "prev_free_block of fake_free_list_tail should always exist"
        for block in blocks:
            block.prev_free_block = last_block
            last_block.next_free_block = block
            last_block = block
        last_block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = last_block
        self.num_free_blocks += len(blocks)
        ### END SOLUTION

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """The queued blocks, head to tail (sentinels excluded)."""
        ### BEGIN SOLUTION
        ret = []
        if self.fake_free_list_head.next_free_block is None:
            raise RuntimeError("next_free_block of fake_free_list_head should always exist")
        curr_block = self.fake_free_list_head.next_free_block
        while curr_block.next_free_block is not None:
            ret.append(curr_block)
            curr_block = curr_block.next_free_block
        return ret
        ### END SOLUTION


SOLUTION = FreeKVCacheBlockQueue
