"""vLLM's (and nano-vllm's) prefix cache on the sequence clock, on plain ints: one capacity.

On the sequence clock every block is free between two requests, so vLLM's whole cache state is
its free queue (least recently freed first) and the map from block hash to cached blocks. This
module keeps exactly those two, on the int ``keys`` of ``prepare_blocks`` (equal key = equal
block hash), with O(1) work per block (an ``OrderedDict`` for the queue):

====================  ======================================================================
vLLM 0.22.1 step      here
====================  ======================================================================
get_computed_blocks   walk the keys while cached, at most ``(num_tokens - 1) // block_size``
                      blocks; a hash held by several blocks gives the first one inserted
                      (``BlockHashToBlockMap.get_one_block``)
allocate_slots        refused (nothing changes) when the request needs more blocks than the
                      pool has; else the hit blocks leave the queue (``touch``), the missing
                      blocks are popped from its head (evicting what they cached) and the
                      request's full blocks are cached (``cache_full_blocks``: no
                      de-duplication, so an already cached last block gets a second block)
free                  all the request's blocks go back to the tail, last block first
====================  ======================================================================

``nano-vllm`` (``cap_hit=False``): nano-vllm's BlockManager decides the same way on this clock
(``can_allocate`` = enough free blocks; hits re-activated out of the deque, misses take the
deque's head, ``deallocate`` appends last block first) except that it looks up every full block
(no ``num_tokens - 1`` cap, so never a second copy); its hit is then reported capped at
``num_tokens - 1`` tokens, as kvlab.traffic.replay does. It keeps the decisions of the faithful
``kvlab.nanovllm.NanoBlockManager`` (same block ids, tests check it) without its O(pool) deque
search, which stays in the course where it is the lesson.

Examples:
    >>> sim = LRUPrefixCache(num_blocks=4, block_size=2)
    >>> sim.serve([7, 8], 5), sim.serve([7, 9], 5), sim.serve([7, 8], 4)
    (0, 2, 2)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

__all__ = ["LRUPrefixCache"]


class LRUPrefixCache:
    """One pool of ``num_blocks`` blocks run as vLLM (or nano-vllm) runs it; see the module doc.

    Mirrors: vllm/v1/core/block_pool.py (FreeKVCacheBlockQueue order, BlockHashToBlockMap) and
    single_type_kv_cache_manager.py (find_longest_cache_hit, free) on the sequence clock.

    Args:
        num_blocks: Usable blocks (blocks), >= 1 (vLLM's null block is not counted).
        block_size: Tokens per block (tokens), >= 1.
        cap_hit: True = vLLM (lookup at most ``(num_tokens - 1) // block_size`` blocks);
            False = nano-vllm (every full block looked up).
        first_block_id: Id of the first block (vLLM 1, after its null block; nano-vllm 0).
        items: Optional starting state, least recently freed first: a key (cached block) or
            None (a free block caching nothing) per block, at most ``num_blocks``; the rest of
            the pool are empty blocks ahead of them in the queue.
        max_model_len: Prompts longer than this (tokens) are refused before any lookup, as
            vLLM's input check refuses them (None = no limit).

    Raises:
        ValueError: If a size is not an int >= 1, or ``items`` is longer than the pool.
    """

    def __init__(self, num_blocks: int, block_size: int, cap_hit: bool = True,
                 first_block_id: int = 1, items: Sequence[int | None] = (),
                 max_model_len: int | None = None) -> None:  # fmt: skip
        for name, v in (("num_blocks", num_blocks), ("block_size", block_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if len(items) > num_blocks:
            raise ValueError(f"{len(items)} starting items for a pool of {num_blocks} blocks")
        self.num_blocks, self.block_size, self.cap_hit = num_blocks, block_size, cap_hit
        self.max_model_len = max_model_len
        ids = range(first_block_id, first_block_id + num_blocks)
        self.queue: OrderedDict[int, None] = OrderedDict.fromkeys(ids)
        self.key_of: dict[int, int] = {}  # block_id -> key, cached blocks only
        # NOTE: key -> block id, or a list of block ids (oldest insertion first) for a hash
        # held by several blocks, as vLLM's BlockHashToBlockMap.
        self.cached: dict[int, int | list[int]] = {}
        self.num_evicted_blocks = 0
        self.last_block_ids: list[int] = []
        empties = num_blocks - len(items)
        for block_id, key in zip(list(ids)[empties:], items, strict=True):
            self.queue.move_to_end(block_id)
            if key is not None:
                self._insert(key, block_id)

    def _insert(self, key: int, block_id: int) -> None:
        self.key_of[block_id] = key
        held = self.cached.get(key)
        if held is None:
            self.cached[key] = block_id
        elif isinstance(held, list):
            held.append(block_id)
        else:
            self.cached[key] = [held, block_id]

    def serve(self, keys: Sequence[int], num_tokens: int) -> int:
        """Look up, allocate and free one request; returns its hit (tokens), -1 if refused.

        Args:
            keys: The request's full-block keys (``num_tokens // block_size`` of them).
            num_tokens: Its prompt (tokens), >= 1.

        Returns:
            Hit tokens (a multiple of block_size; nano-vllm: capped at num_tokens - 1), or -1
            when the request needs more blocks than the pool has or is longer than
            max_model_len (nothing changed).
        """
        bs = self.block_size
        num_blocks = -(-num_tokens // bs)
        if num_blocks > self.num_blocks or (self.max_model_len or num_tokens) < num_tokens:
            return -1
        limit = min((num_tokens - 1) // bs, len(keys)) if self.cap_hit else len(keys)
        cached, queue = self.cached, self.queue
        blocks: list[int] = []
        for key in keys[:limit]:
            held = cached.get(key)
            if held is None:
                break
            blocks.append(held[0] if isinstance(held, list) else held)
        num_hit = len(blocks)
        for block_id in blocks:
            del queue[block_id]
        key_of, num_full = self.key_of, len(keys)
        popitem, evicted = queue.popitem, 0
        for j in range(num_hit, num_blocks):
            block_id = popitem(False)[0]
            old = key_of.pop(block_id, None)
            if old is not None:  # NOTE: evict, inlined: a what-if pops ~300 k blocks
                held = cached[old]
                if held.__class__ is list:
                    held.remove(block_id)
                    if len(held) == 1:
                        cached[old] = held[0]
                else:
                    del cached[old]
                evicted += 1
            if j < num_full:
                key = keys[j]
                if key in cached:
                    self._insert(key, block_id)
                else:
                    cached[key] = block_id
                    key_of[block_id] = key
            blocks.append(block_id)
        self.num_evicted_blocks += evicted
        for block_id in reversed(blocks):
            queue[block_id] = None
        self.last_block_ids = blocks
        hit = num_hit * bs
        return hit if self.cap_hit else min(hit, num_tokens - 1)

    def serve_all(self, keys: Iterable[Sequence[int]], num_tokens: Iterable[int]) -> list[int]:
        """``serve`` each request in order; per request its hit (tokens), -1 if refused."""
        return [self.serve(k, n) for k, n in zip(keys, num_tokens, strict=True)]
