"""nano-vllm's BlockManager: the simple prefix cache that vLLM V1 is best understood against.

Mirrors: nanovllm/engine/block_manager.py (Block, BlockManager) at nano-vllm 82f5ca2, the
version study note 004 reads.
Same data structures and the same decisions, block by block::

    blocks              [Block(0) .. Block(n-1)]   block_id, ref_count, hash (-1 = none), token_ids
    hash_to_block_id    {hash: block_id}           never cleaned: entries go stale when a block is reused
    free_block_ids      deque, all ids at start    allocate takes free_block_ids[0]; deallocate appends
    used_block_ids      set

How it differs from vLLM V1 (what the views show):

* hashes are xxhash64 ints chained through the previous block's hash; a hit also needs
  ``blocks[block_id].token_ids == token_ids`` (the check that rejects stale map entries);
* a freed block keeps its hash and token_ids, so a later hit *re-activates* it, which removes it
  from the middle of the deque: an O(n) scan (``NanoStats.num_deque_scan_steps``);
* after the first miss every later block of the request is allocated fresh, even when its hash is
  cached (the map entry is then overwritten: the older block can no longer be found);
* ``can_allocate`` asks for a free block for *every* block of the sequence, hits included.

Differs from nano-vllm: bad calls raise ValueError and change nothing (nano-vllm asserts or fails
midway); ``block_size`` must be >= 2 (with 1, ``len % block_size == 1`` never holds and
``may_append`` would never allocate); the manager remembers which sequences hold blocks (only
for the viewers, ``nano_state``).

Recording hooks (what each call records): see ``kvlab.nanovllm.recording``.

Examples:
    >>> mgr = NanoBlockManager(num_blocks=4, block_size=2)
    >>> a = NanoSequence("a", [1, 2, 3, 4, 5], block_size=2); mgr.allocate(a); a.block_table
    [0, 1, 2]
    >>> b = NanoSequence("b", [1, 2, 3, 9], block_size=2); mgr.can_allocate(b)
    False
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import xxhash

from kvlab.nanovllm.engine.sequence import NanoSequence
from kvlab.nanovllm.instrument import NanoStats, hash_key

__all__ = [
    "NO_HASH",
    "NanoBlock",
    "NanoBlockManager",
    "NanoSequence",
    "NanoStats",
    "compute_hash",
    "hash_key",
]


NO_HASH = -1
"""``Block.hash`` of a block that is not full (or was just reset)."""


def compute_hash(token_ids: list[int], prefix: int = NO_HASH) -> int:
    """xxhash64 of the previous block's hash (8 bytes little-endian, if any) then the tokens.

    Mirrors: nanovllm/engine/block_manager.py::BlockManager.compute_hash (tokens as int64
    bytes, what ``np.array(token_ids)`` gives on 64-bit Linux).

    Args:
        token_ids: The block's tokens.
        prefix: The previous block's hash, or NO_HASH for the first block.

    Returns:
        An unsigned 64-bit int.
    """
    h = xxhash.xxh64()
    if prefix != NO_HASH:
        h.update(prefix.to_bytes(8, "little"))
    h.update(np.asarray(token_ids, dtype=np.int64).tobytes())
    return h.intdigest()


class NanoBlock:
    """One KV block. Mirrors: nanovllm/engine/block_manager.py::Block.

    Attributes:
        block_id: Index in the pool.
        ref_count: Sequences holding it (0 = in free_block_ids).
        hash: Chained hash of its tokens when full, NO_HASH otherwise.
        token_ids: Its tokens when full (kept after it is freed, for the hit check).
    """

    __slots__ = ("block_id", "hash", "ref_count", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash = NO_HASH
        self.token_ids: list[int] = []

    def update(self, h: int, token_ids: list[int]) -> None:
        """Set the block's hash and tokens (it became full)."""
        self.hash = h
        self.token_ids = token_ids

    def reset(self) -> None:
        """Make it a fresh block held once: ref_count 1, no hash, no tokens."""
        self.ref_count = 1
        self.hash = NO_HASH
        self.token_ids = []

    def __repr__(self) -> str:
        return f"NanoBlock({self.block_id}, ref_count={self.ref_count}, hash={self.hash})"



class NanoBlockManager:
    """nano-vllm's BlockManager with kvlab's recorder hooks (see the module docstring).

    Mirrors: nanovllm/engine/block_manager.py::BlockManager.

    Args:
        num_blocks: Blocks in the pool (blocks), >= 1.
        block_size: Tokens per block (tokens), >= 2.
        recorder: None (off) or a ``kvlab.core.recorder.KVRecorder``.

    Raises:
        ValueError: If a size is not an int in range.
    """

    def __init__(self, num_blocks: int, block_size: int, recorder: Any = None) -> None:
        _check_int("num_blocks", num_blocks, 1, "blocks")
        _check_int("block_size", block_size, 2, "tokens")
        self.block_size = block_size
        self.blocks: list[NanoBlock] = [NanoBlock(i) for i in range(num_blocks)]
        # NOTE: entries are never deleted; one is valid iff its block still has that hash.
        self.hash_to_block_id: dict[int, int] = {}
        # NOTE: free_block_ids holds exactly the blocks with ref_count 0; used_block_ids the rest.
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.used_block_ids: set[int] = set()
        self.recorder = recorder
        self.stats = NanoStats()
        self.seqs: dict[str, NanoSequence] = {}

    compute_hash = staticmethod(compute_hash)

    def set_recorder(self, recorder: Any) -> None:
        """Attach (or with None detach) a recorder."""
        self.recorder = recorder

    # ------------------------------------------------------------------ queries
    @property
    def num_blocks(self) -> int:
        """Blocks in the pool (blocks)."""
        return len(self.blocks)

    def get_num_free_blocks(self) -> int:
        """Blocks in free_block_ids (blocks)."""
        return len(self.free_block_ids)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by sequences, 0.0-1.0."""
        return len(self.used_block_ids) / len(self.blocks)

    def is_cached(self, block_id: int) -> bool:
        """Whether a lookup of the block's hash would find it (the valid part of the map)."""
        h = self.blocks[block_id].hash
        return h != NO_HASH and self.hash_to_block_id.get(h) == block_id

    def cached_hashes(self) -> dict[int, int]:
        """The valid map entries: hash -> block_id (what a lookup can hit)."""
        return {h: b for h, b in self.hash_to_block_id.items() if self.blocks[b].hash == h}

    def stale_entries(self) -> dict[int, int]:
        """Map entries whose block now has another hash: hash -> block_id (nano never drops them)."""
        return {h: b for h, b in self.hash_to_block_id.items() if self.blocks[b].hash != h}

    # ------------------------------------------------------------------ internals
    def _take_block(self, block_id: int, reactivate: bool) -> NanoBlock:
        """Mirrors ``_allocate_block``: reset, leave the deque (O(n) remove), join the used set."""
        block = self.blocks[block_id]
        if block.ref_count != 0:
            raise RuntimeError(f"block {block_id} has ref_count {block.ref_count}; expected 0")
        position = self.free_block_ids.index(block_id)
        del self.free_block_ids[position]
        self.stats.num_deque_scan_steps += position
        block.reset()
        self.used_block_ids.add(block_id)
        rec = self.recorder
        if reactivate:
            self.stats.num_reactivated_blocks += 1
            if rec is not None:
                rec.remove(block_id)
                rec.touch([block_id])
        else:
            self.stats.num_allocated_blocks += 1
            if rec is not None:
                rec.popleft(block_id)
                rec.get_new_blocks([block_id])
        return block

    def _release_block(self, block_id: int) -> None:
        """Mirrors ``_deallocate_block``: leave the used set, append to the deque."""
        self.used_block_ids.remove(block_id)
        self.free_block_ids.append(block_id)
        if self.recorder is not None:
            self.recorder.append(block_id)

    def _valid_pairs(self, block_ids: set[int]) -> set[tuple[int, int]]:
        return {(b, self.blocks[b].hash) for b in block_ids if self.is_cached(b)}

    def _report_cache_change(
        self, before: set[tuple[int, int]], after: set[tuple[int, int]], request_id: str, pos: int
    ) -> None:
        """Emit the net change of the valid map for one block step (evictions, then the store)."""
        gone = sorted(before - after)
        self.stats.num_evicted_blocks += len(gone)
        rec = self.recorder
        if rec is None:
            return
        for b, h in gone:
            rec.evict(b, hash_key(h))
        for b, h in sorted(after - before):
            rec.cache_full_blocks(request_id, 0, pos, pos + 1, [b], [hash_key(h)])

    def _probe(self, h: int, token_ids: list[int]) -> int:
        """One lookup as nano-vllm decides it: the block id on a hit, -1 on a miss."""
        if h == NO_HASH:
            return -1
        block_id = self.hash_to_block_id.get(h, -1)
        hit = block_id != -1 and self.blocks[block_id].token_ids == token_ids
        st = self.stats
        st.num_lookups += 1
        if hit:
            st.num_hits += 1
            st.num_stale_hits += self.blocks[block_id].hash != h
        elif block_id != -1:
            st.num_token_mismatches += 1
        if self.recorder is not None:
            self.recorder.lookup(h.to_bytes(8, "big"), 0, block_id if hit else -1)
        return block_id if hit else -1

    def _check_seq(self, seq: NanoSequence) -> None:
        if not isinstance(seq, NanoSequence):
            raise TypeError(f"expected a NanoSequence, got {type(seq).__name__}")
        if seq.block_size != self.block_size:
            raise ValueError(
                f"sequence {seq.request_id!r} has block_size {seq.block_size}, "
                f"the manager {self.block_size}"
            )

    def _check_allocated(self, seq: NanoSequence, what: str) -> None:
        self._check_seq(seq)
        if self.seqs.get(seq.request_id) is not seq or not seq.block_table:
            raise ValueError(f"{what}: sequence {seq.request_id!r} holds no blocks here")

    # ------------------------------------------------------------------ admission
    def can_allocate(self, seq: NanoSequence) -> bool:
        """Whether there is a free block for every block of ``seq`` (hits are not subtracted).

        Mirrors: nanovllm/engine/block_manager.py::BlockManager.can_allocate
        """
        return len(self.free_block_ids) >= seq.num_blocks

    def allocate(self, seq: NanoSequence) -> None:
        """Give ``seq`` a block for each of its blocks, reusing cached ones up to the first miss.

        Mirrors: nanovllm/engine/block_manager.py::BlockManager.allocate. Per block: hash it if
        full (chained), probe the map (hit = entry found and same tokens); after the first miss
        take ``free_block_ids[0]``; on a hit add a reference (held block) or re-activate it
        (freed block, removed from the middle of the deque); a full block is then (re)entered in
        the map. Adds the hit to ``seq.num_cached_tokens``.

        Raises:
            TypeError: If ``seq`` is not a NanoSequence.
            ValueError: If ``seq`` already has blocks, its block size differs, or
                ``can_allocate`` is False (nothing changed).
        """
        self._check_seq(seq)
        if seq.block_table or seq.request_id in self.seqs:
            raise ValueError(f"allocate: sequence {seq.request_id!r} already holds blocks")
        if not self.can_allocate(seq):
            raise ValueError(
                f"allocate: sequence {seq.request_id!r} needs {seq.num_blocks} free blocks, "
                f"{len(self.free_block_ids)} free (check can_allocate first)"
            )
        rec = self.recorder
        if rec is not None:
            rec.begin_call("allocate", seq.request_id, (seq.num_tokens, seq.num_blocks))
        self.seqs[seq.request_id] = seq
        h, cache_miss = NO_HASH, False
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            h = compute_hash(token_ids, h) if len(token_ids) == self.block_size else NO_HASH
            hit_block_id = -1 if cache_miss else self._probe(h, token_ids)
            cache_miss = cache_miss or hit_block_id == -1
            self._allocate_one(seq, i, h, token_ids, hit_block_id)
        if rec is not None:
            rec.end_call("allocate", (seq.num_cached_tokens,))

    def _allocate_one(
        self, seq: NanoSequence, i: int, h: int, token_ids: list[int], hit_block_id: int
    ) -> None:
        block_id = self.free_block_ids[0] if hit_block_id == -1 else hit_block_id
        involved = {block_id} | (
            {self.hash_to_block_id[h]} if h in self.hash_to_block_id else set()
        )
        before = self._valid_pairs(involved)
        if hit_block_id == -1:
            block = self._take_block(block_id, reactivate=False)
        else:
            seq.num_cached_tokens += self.block_size
            if block_id in self.used_block_ids:
                block = self.blocks[block_id]
                block.ref_count += 1
                if self.recorder is not None:
                    self.recorder.touch([block_id])
            else:
                block = self._take_block(block_id, reactivate=True)
        if h != NO_HASH:
            block.update(h, token_ids)
            self.hash_to_block_id[h] = block_id
        self._report_cache_change(before, self._valid_pairs(involved), seq.request_id, i)
        seq.block_table.append(block_id)
        if self.recorder is not None:
            self.recorder.req_blocks_add(seq.request_id, 0, [block_id])

    def deallocate(self, seq: NanoSequence) -> None:
        """Drop one reference to each of ``seq``'s blocks, last block first.

        Blocks reaching ref_count 0 are appended to free_block_ids in that order (so the
        sequence's tail is reused first) and keep their hash and tokens for later hits.

        Mirrors: nanovllm/engine/block_manager.py::BlockManager.deallocate

        Raises:
            TypeError: If ``seq`` is not a NanoSequence.
            ValueError: If ``seq`` holds no blocks in this manager.
        """
        self._check_allocated(seq, "deallocate")
        rec = self.recorder
        if rec is not None:
            rec.begin_call("deallocate", seq.request_id, ())
        num_freed = 0
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if rec is not None:
                rec.free_blocks([block_id])
            if block.ref_count == 0:
                self._release_block(block_id)
                num_freed += 1
        seq.num_cached_tokens = 0
        seq.block_table.clear()
        del self.seqs[seq.request_id]
        if rec is not None:
            rec.req_free(seq.request_id, 0)
            rec.end_call("deallocate", (num_freed,))

    # ------------------------------------------------------------------ decode
    def can_append(self, seq: NanoSequence) -> bool:
        """Whether the token just appended to ``seq`` has a slot (a new block iff it starts one).

        Mirrors: nanovllm/engine/block_manager.py::BlockManager.can_append
        """
        return len(self.free_block_ids) >= (len(seq) % self.block_size == 1)

    def may_append(self, seq: NanoSequence) -> None:
        """Make room for ``seq``'s last token (call once per appended token, after appending).

        Mirrors: nanovllm/engine/block_manager.py::BlockManager.may_append. Three cases by
        ``len(seq) % block_size``: 1 (the token starts a block: take ``free_block_ids[0]``),
        0 (the token fills the last block: hash it, chained to the block before, and enter it
        in the map), otherwise nothing.

        Raises:
            TypeError: If ``seq`` is not a NanoSequence.
            ValueError: If ``seq`` holds no blocks here, its block table does not match its
                length, or a new block is needed and none is free (nothing changed).
        """
        self._check_allocated(seq, "may_append")
        case = self._append_case(seq)
        rec = self.recorder
        if rec is not None:
            rec.begin_call("may_append", seq.request_id, (seq.num_tokens,))
        if case == 1:
            block_id = self.free_block_ids[0]
            before = self._valid_pairs({block_id})
            self._take_block(block_id, reactivate=False)
            self._report_cache_change(before, set(), seq.request_id, len(seq.block_table))
            seq.block_table.append(block_id)
            if rec is not None:
                rec.req_blocks_add(seq.request_id, 0, [block_id])
        elif case == 2:
            self._hash_last_block(seq)
        if rec is not None:
            rec.end_call("may_append", (case,))

    def _append_case(self, seq: NanoSequence) -> int:
        """Validate ``seq`` for may_append and return its case (0, 1 or 2); changes nothing."""
        table, rest = seq.block_table, len(seq) % self.block_size
        expected = seq.num_blocks - (1 if rest == 1 else 0)
        if len(table) != expected:
            raise ValueError(
                f"may_append: sequence {seq.request_id!r} has {len(seq)} tokens and "
                f"{len(table)} blocks (expected {expected}); call it once per appended token"
            )
        last = self.blocks[table[-1]]
        if (rest == 1) != (last.hash != NO_HASH):
            state = "has no hash" if rest == 1 else "already has a hash"
            raise ValueError(f"may_append: the last block {last.block_id} {state}")
        if rest == 1 and not self.free_block_ids:
            raise ValueError(f"may_append: sequence {seq.request_id!r} needs a block, none free")
        return 1 if rest == 1 else (2 if rest == 0 else 0)

    def _hash_last_block(self, seq: NanoSequence) -> None:
        table = seq.block_table
        last = self.blocks[table[-1]]
        token_ids = seq.block(seq.num_blocks - 1)
        prefix = self.blocks[table[-2]].hash if len(table) > 1 else NO_HASH
        h = compute_hash(token_ids, prefix)
        involved = {last.block_id} | (
            {self.hash_to_block_id[h]} if h in self.hash_to_block_id else set()
        )
        before = self._valid_pairs(involved)
        last.update(h, token_ids)
        self.hash_to_block_id[h] = last.block_id
        self._report_cache_change(
            before, self._valid_pairs(involved), seq.request_id, len(table) - 1
        )

    def __repr__(self) -> str:
        return (
            f"NanoBlockManager(num_blocks={len(self.blocks)}, block_size={self.block_size}, "
            f"free={len(self.free_block_ids)}, cached={len(self.cached_hashes())})"
        )


def _check_int(name: str, value: Any, low: int, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low} ({unit}), got {value!r}")
