"""Wrong BlockPools, written as learners write them: one per catalogue entry."""
from __future__ import annotations

from kvlab.core.kv_cache_utils import make_block_hash_with_group_id, maybe_convert_block_hash
from kvlab.labs.solutions.block_pool import BlockPool as Reference


class EagerEviction(Reference):
    """Evicts a block from the prefix cache as soon as it is freed."""

    def free_blocks(self, ordered_blocks):
        blocks = list(ordered_blocks)
        super().free_blocks(blocks)
        for block in blocks:
            if block.ref_cnt == 0:
                self._maybe_evict_cached_block(block)


class TouchKeepsQueued(Reference):
    def touch(self, blocks):
        for block in blocks:
            block.ref_cnt += 1


class FreeAppendsHeld(Reference):
    def free_blocks(self, ordered_blocks):
        blocks = list(ordered_blocks)
        for block in blocks:
            block.ref_cnt -= 1
        self.free_block_queue.append_n([b for b in blocks if not b.is_null and b.prev_free_block is None])


class FreeReversesAgain(Reference):
    def free_blocks(self, ordered_blocks):
        super().free_blocks(list(ordered_blocks)[::-1])


class NullBlockQueued(Reference):
    def free_blocks(self, ordered_blocks):
        blocks = list(ordered_blocks)
        for block in blocks:
            block.ref_cnt -= 1
        self.free_block_queue.append_n([b for b in blocks if b.ref_cnt <= 0 and b.prev_free_block is None])


class NoLazyEviction(Reference):
    """Pops blocks for reuse without evicting their old hash."""

    def get_new_blocks(self, num_blocks):
        if num_blocks > self.get_num_free_blocks():
            raise ValueError("not enough free blocks")
        ret = self.free_block_queue.popleft_n(num_blocks)
        for block in ret:
            block.ref_cnt += 1
        return ret


class ForgetsMapOnEviction(Reference):
    """Forgets the hash of a reused block but leaves its map entry behind."""

    def _maybe_evict_cached_block(self, block):
        if block.block_hash is None:
            return False
        block.reset_hash()
        return True


class Dedupes(Reference):
    """Caches a block only if its hash is not cached yet ("no duplicates")."""

    def cache_full_blocks(self, request, blocks, num_cached_blocks, num_full_blocks, block_size,
                          kv_cache_group_id, block_mask=None):
        if num_cached_blocks >= num_full_blocks:
            return
        hashes = request.block_hashes
        new_hashes = [] if self.enable_kv_cache_events else None
        for i, blk in enumerate(blocks[num_cached_blocks:num_full_blocks]):
            if blk.is_null or (block_mask is not None and not block_mask[i]):
                continue
            key = make_block_hash_with_group_id(hashes[num_cached_blocks + i], kv_cache_group_id)
            if self.cached_block_hash_to_block.get_one_block(key) is not None:
                continue
            blk.block_hash = key
            self.cached_block_hash_to_block.insert(key, blk)
            if new_hashes is not None:
                new_hashes.append(maybe_convert_block_hash(hashes[num_cached_blocks + i]))
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(self._block_stored(
                request, blocks, num_cached_blocks, num_full_blocks, block_size, kv_cache_group_id,
                block_mask, hashes, new_hashes))


class RecachesFromZero(Reference):
    def cache_full_blocks(self, request, blocks, num_cached_blocks, num_full_blocks, block_size,
                          kv_cache_group_id, block_mask=None):
        super().cache_full_blocks(request, blocks, 0 if block_mask is None else num_cached_blocks,
                                  num_full_blocks, block_size, kv_cache_group_id, block_mask)


class NoRemovedEvent(Reference):
    def _maybe_evict_cached_block(self, block):
        events = self.enable_kv_cache_events
        self.enable_kv_cache_events = False
        try:
            return super()._maybe_evict_cached_block(block)
        finally:
            self.enable_kv_cache_events = events
