"""Wrong nano-vllm BlockManagers, written as learners write them: one per catalogue entry."""
from __future__ import annotations

from kvlab.labs.solutions.nano_block_manager import BlockManager as Reference


class HashOnlyHit(Reference):
    def allocate(self, seq):
        h, miss = -1, False
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1
            block_id = self.hash_to_block_id.get(h, -1)
            miss = miss or block_id == -1  # "same hash, same tokens"
            if miss:
                block = self._allocate_block(self.free_block_ids[0])
            else:
                seq.num_cached_tokens += self.block_size
                if block_id in self.used_block_ids:
                    block = self.blocks[block_id]
                    block.ref_count += 1
                else:
                    block = self._allocate_block(block_id)
            if h != -1:
                block.update(h, token_ids)
                self.hash_to_block_id[h] = block.block_id
            seq.block_table.append(block.block_id)


class KeepsCachedCount(Reference):
    def deallocate(self, seq):
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._deallocate_block(block_id)
        seq.block_table.clear()


class CountsHits(Reference):
    def can_allocate(self, seq):
        h, hits = -1, 0
        for i in range(seq.num_blocks):
            tokens = seq.block(i)
            h = self.compute_hash(tokens, h) if len(tokens) == self.block_size else -1
            b = self.hash_to_block_id.get(h, -1)
            if b == -1 or self.blocks[b].token_ids != tokens:
                break
            hits += 1
        return len(self.free_block_ids) >= seq.num_blocks - hits


class HeadFirst(Reference):
    def deallocate(self, seq):
        for block_id in seq.block_table:
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._deallocate_block(block_id)
        seq.num_cached_tokens = 0
        seq.block_table.clear()


class UnchainedAppend(Reference):
    def may_append(self, seq):
        if len(seq) % self.block_size == 0:
            last = self.blocks[seq.block_table[-1]]
            token_ids = seq.block(seq.num_blocks - 1)
            h = self.compute_hash(token_ids)
            last.update(h, token_ids)
            self.hash_to_block_id[h] = last.block_id
        else:
            super().may_append(seq)


class NoReactivation(Reference):
    def allocate(self, seq):
        h, miss = -1, False
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1
            block_id = self.hash_to_block_id.get(h, -1)
            miss = miss or block_id == -1 or self.blocks[block_id].token_ids != token_ids
            if miss:
                block = self._allocate_block(self.free_block_ids[0])
            else:
                seq.num_cached_tokens += self.block_size
                block = self.blocks[block_id]
                block.ref_count += 1
                self.used_block_ids.add(block_id)
            if h != -1:
                block.update(h, token_ids)
                self.hash_to_block_id[h] = block.block_id
            seq.block_table.append(block.block_id)


BUGS = {"no_token_check": HashOnlyHit, "keeps_cached_count": KeepsCachedCount,
        "can_allocate_counts_hits": CountsHits, "deallocate_head_first": HeadFirst,
        "unchained_append": UnchainedAppend, "no_reactivation": NoReactivation}
