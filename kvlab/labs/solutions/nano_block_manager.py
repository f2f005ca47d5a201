"""Reference solution of lab ``nano_block_manager``: the notebook's BlockManager cell.

Mirrors: nanovllm/engine/block_manager.py::BlockManager (as study note 004 reads it).
"""

from __future__ import annotations

from collections import deque

from kvlab.compare import NanoBlock, NanoSequence, compute_hash

# --- notebook cell ---
class BlockManager:
    """nano-vllm's BlockManager: a hash map of full blocks, a deque of free block ids.

    Given: the constructor, ``compute_hash`` (xxhash64 of the parent's hash and the tokens),
    ``_allocate_block`` (reset a block, take it out of ``free_block_ids`` wherever it is) and
    ``_deallocate_block`` (back at the end of ``free_block_ids``).

    Mirrors: nanovllm/engine/block_manager.py::BlockManager
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.blocks = [NanoBlock(i) for i in range(num_blocks)]
        self.hash_to_block_id: dict[int, int] = {}
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.used_block_ids: set[int] = set()

    @classmethod
    def compute_hash(cls, token_ids: list[int], prefix: int = -1) -> int:
        return compute_hash(token_ids, prefix)

    def _allocate_block(self, block_id: int) -> NanoBlock:
        block = self.blocks[block_id]
        assert block.ref_count == 0
        block.reset()
        self.free_block_ids.remove(block_id)
        self.used_block_ids.add(block_id)
        return block

    def _deallocate_block(self, block_id: int) -> None:
        assert self.blocks[block_id].ref_count == 0
        self.used_block_ids.remove(block_id)
        self.free_block_ids.append(block_id)

    def can_allocate(self, seq: NanoSequence) -> bool:
        """Whether ``free_block_ids`` has a block for every block of ``seq`` (hits included)."""
        ### BEGIN SOLUTION
        return len(self.free_block_ids) >= seq.num_blocks
        ### END SOLUTION

    def allocate(self, seq: NanoSequence) -> None:
        """Give each block of ``seq`` a block id (``seq.block_table``), reusing cached ones.

        Per block i (``seq.block(i)``): a full block's hash chains the previous block's
        (``-1`` for a partial block); it hits when ``hash_to_block_id`` has it *and* that block
        holds the same tokens, and only until the first miss. A hit adds ``block_size`` to
        ``seq.num_cached_tokens`` and takes a reference (a freed block is taken back with
        ``_allocate_block``); a miss takes ``free_block_ids[0]``. A full block then records its
        hash and tokens and enters the map under its hash.
        """
        ### BEGIN SOLUTION
        assert not seq.block_table
        h = -1
        cache_miss = False
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1
            block_id = self.hash_to_block_id.get(h, -1)
            if block_id == -1 or self.blocks[block_id].token_ids != token_ids:
                cache_miss = True
            if cache_miss:
                block_id = self.free_block_ids[0]
                block = self._allocate_block(block_id)
            else:
                seq.num_cached_tokens += self.block_size
                if block_id in self.used_block_ids:
                    block = self.blocks[block_id]
                    block.ref_count += 1
                else:
                    block = self._allocate_block(block_id)
            if h != -1:
                block.update(h, token_ids)
                self.hash_to_block_id[h] = block_id
            seq.block_table.append(block_id)
        ### END SOLUTION

    def deallocate(self, seq: NanoSequence) -> None:
        """Drop one reference to each block of ``seq``, last block first; clear its table.

        A block reaching ref_count 0 goes back with ``_deallocate_block`` (it keeps its hash
        and tokens); ``seq.num_cached_tokens`` returns to 0.
        """
        ### BEGIN SOLUTION
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._deallocate_block(block_id)
        seq.num_cached_tokens = 0
        seq.block_table.clear()
        ### END SOLUTION

    def can_append(self, seq: NanoSequence) -> bool:
        """Whether the token just appended to ``seq`` has a slot: a free block iff it starts one."""
        ### BEGIN SOLUTION
        return len(self.free_block_ids) >= (len(seq) % self.block_size == 1)
        ### END SOLUTION

    def may_append(self, seq: NanoSequence) -> None:
        """Make room for ``seq``'s last token (called after each appended token).

        ``len(seq) % block_size == 1``: the token starts a block, take ``free_block_ids[0]``;
        ``== 0``: it fills the last block, hash it (chained to the block before) and enter it in
        the map; otherwise nothing.
        """
        ### BEGIN SOLUTION
        block_table = seq.block_table
        last_block = self.blocks[block_table[-1]]
        if len(seq) % self.block_size == 1:
            assert last_block.hash != -1
            block_id = self.free_block_ids[0]
            self._allocate_block(block_id)
            block_table.append(block_id)
        elif len(seq) % self.block_size == 0:
            assert last_block.hash == -1
            token_ids = seq.block(seq.num_blocks - 1)
            prefix = self.blocks[block_table[-2]].hash if len(block_table) > 1 else -1
            h = self.compute_hash(token_ids, prefix)
            last_block.update(h, token_ids)
            self.hash_to_block_id[h] = last_block.block_id
        else:
            assert last_block.hash == -1
        ### END SOLUTION


SOLUTION = BlockManager
