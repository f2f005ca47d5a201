"""Wrong FreeKVCacheBlockQueues, written as learners write them: one per catalogue entry."""
from __future__ import annotations

import heapq
from collections import deque

from kvlab.labs.solutions.free_queue import FreeKVCacheBlockQueue as Reference


class EmptyPopleftReturnsNone(Reference):
    def popleft(self):
        if self.num_free_blocks == 0:
            return None
        return super().popleft()


class AppendAtHead(Reference):
    def append_n(self, blocks):
        for block in reversed(blocks):  # "recently freed first"
            first = self.fake_free_list_head.next_free_block
            block.prev_free_block, block.next_free_block = self.fake_free_list_head, first
            first.prev_free_block = block
            self.fake_free_list_head.next_free_block = block
            self.num_free_blocks += 1


class AppendNReversed(Reference):
    def append_n(self, blocks):
        super().append_n(list(reversed(blocks)))


class LowestIdFirst:
    """A heap of free block ids: 'the oldest block' = the lowest id."""

    def __init__(self, blocks):
        self.by_id = {b.block_id: b for b in blocks}
        self.heap = [b.block_id for b in blocks]
        heapq.heapify(self.heap)
        self.num_free_blocks = len(blocks)

    def popleft(self):
        if not self.heap:
            raise ValueError("No free blocks available")
        self.num_free_blocks -= 1
        return self.by_id[heapq.heappop(self.heap)]

    def popleft_n(self, n):
        return [self.popleft() for _ in range(n)]

    def remove(self, block):
        self.heap.remove(block.block_id)
        heapq.heapify(self.heap)
        self.num_free_blocks -= 1

    def append(self, block):
        self.by_id[block.block_id] = block
        heapq.heappush(self.heap, block.block_id)
        self.num_free_blocks += 1

    def append_n(self, blocks):
        for b in blocks:
            self.append(b)

    def get_all_free_blocks(self):
        return [self.by_id[i] for i in sorted(self.heap)]


class PopsFromTail(Reference):
    def popleft_n(self, n):
        out = []
        for _ in range(n):
            last = self.fake_free_list_tail.prev_free_block
            self.remove(last)
            out.append(last)
        return out


class PopleftNReversed(Reference):
    def popleft_n(self, n):
        return list(reversed(super().popleft_n(n)))


class RemoveKeepsStaleLink(Reference):
    def remove(self, block):
        block.prev_free_block.next_free_block = block.next_free_block
        # forgot: block.next_free_block.prev_free_block = block.prev_free_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1


class AppendNForgetsCount(Reference):
    def append_n(self, blocks):
        n = self.num_free_blocks
        super().append_n(blocks)
        self.num_free_blocks = n + (1 if blocks else 0)


class DequeQueue:
    """Correct decisions with a deque: remove is O(n)."""

    def __init__(self, blocks):
        self.q = deque(blocks)

    @property
    def num_free_blocks(self):
        return len(self.q)

    def popleft(self):
        if not self.q:
            raise ValueError("No free blocks available")
        return self.q.popleft()

    def popleft_n(self, n):
        return [self.q.popleft() for _ in range(n)]

    def remove(self, block):
        self.q.remove(block)

    def append(self, block):
        self.q.append(block)

    def append_n(self, blocks):
        self.q.extend(blocks)

    def get_all_free_blocks(self):
        return list(self.q)


class EndlessWalk(Reference):
    def get_all_free_blocks(self):
        out, curr = [], self.fake_free_list_head.next_free_block
        while curr is not None:
            if curr.block_id >= 0:
                out.append(curr)
            curr = curr.next_free_block or self.fake_free_list_head  # wraps around forever
        return out


class RaisesInRemove(Reference):
    def remove(self, block):
        raise KeyError(block.block_id)


class NotWrittenYet(Reference):
    def popleft(self):
        raise NotImplementedError
