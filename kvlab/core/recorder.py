"""The recorder protocol: the one door through which core reports what it does.

kvlab.core never knows how it is watched. Every object that mutates state (the
FreeKVCacheBlockQueue, the BlockPool, each SingleTypeKVCacheManager, the coordinator and
the KVCacheManager) holds a ``recorder`` attribute that is ``None`` (recording off: the
cost is one attribute test per operation) or an object with the methods below.
``kvlab.trace.Recorder`` is the implementation; tests may pass any object with these
methods. Hooks are called *after* the state change they describe has happened, except
``begin_call`` (called on entry). Hooks must never raise and never mutate core state.

The event vocabulary (each hook becomes one event; replay needs exactly these):

=====================  =====================================================  ==================
hook                   state change replay applies                            called from
=====================  =====================================================  ==================
popleft(b)             free queue: remove head (must be b)                    FreeKVCacheBlockQueue.popleft
popleft_n(bs)          free queue: remove the first len(bs) blocks            FreeKVCacheBlockQueue.popleft_n
remove(b)              free queue: unlink b from the middle                   FreeKVCacheBlockQueue.remove
append(b)              free queue: link b at the tail                         FreeKVCacheBlockQueue.append
append_n(bs)           free queue: link bs at the tail, in order              FreeKVCacheBlockQueue.append_n
get_new_blocks(bs)     ref_cnt += 1 for each of bs                            BlockPool.get_new_blocks
touch(bs)              ref_cnt += 1 for each of bs (null block included)      BlockPool.touch
free_blocks(bs)        ref_cnt -= 1 for each of bs, in the given order        BlockPool.free_blocks
cache_full_blocks(..)  block_hash set + cached map insert, per cached block   BlockPool.cache_full_blocks
evict(b, key)          block_hash cleared + cached map pop (one block)        BlockPool._maybe_evict_cached_block
reset()                every block_hash cleared, cached map emptied           BlockPool.reset_prefix_cache (success)
lookup(h, g, b)        none (a read: hit -> block id, miss -> -1)             BlockPool.get_cached_block
fixed_point(..)        none (one attention group inside one iteration;        HybridKVCacheCoordinator
                       carries each group's hit block ids after the turn)
req_blocks_add(..)     req_to_blocks[req][group].extend(bs)                   SingleTypeKVCacheManager
req_blocks_null(..)    req_to_blocks[req][group][i] = null_block, for each i  remove_skipped_blocks
req_free(r, g)         req_to_blocks[req][group] dropped                      SingleTypeKVCacheManager.free
begin_call / end_call  none (bracket the API call that caused the events)     KVCacheManager methods
=====================  =====================================================  ==================

Calls bracketed by begin_call/end_call (``args`` / ``result`` are int tuples in this order):

=======================  ==============================================================  =========================
name                     args                                                            result
=======================  ==============================================================  =========================
get_computed_blocks      (num_tokens, num_block_hashes)                                  (num_new_computed_tokens,)
allocate_slots           (num_computed_tokens, num_new_computed_tokens,                  (1, num_blocks_to_allocate)
                         num_external_computed_tokens, num_new_tokens,                   or (0, num_blocks_to_allocate)
                         num_lookahead_tokens, num_encoder_tokens, delay_cache_blocks,   when it returns None
                         full_sequence_must_fit)
free                     ()                                                              ()
remove_skipped_blocks    (total_computed_tokens,)                                        ()
cache_blocks             (num_computed_tokens,)                                          ()
evict_blocks             (block_id, ...)  sorted                                         ()
reset_prefix_cache       ()                                                              (1,) or (0,) if refused
new_step_starts          ()                                                              ()
=======================  ==============================================================  =========================

Rules every hook follows (relied on by replay and the viewers):

- A hook fires only when something changed: an empty ``popleft_n``/``append_n``/
  ``get_new_blocks``/``touch``/``free_blocks`` reports nothing, and ``cache_full_blocks``
  reports only the blocks it actually cached (null and masked blocks are left out).
- ``reset`` is one event with no per-block ``evict``: vLLM's reset clears the map directly and
  emits only ``AllBlocksCleared``.
- An empty ``req_blocks_add`` marks where vLLM's ``req_to_blocks`` defaultdict creates an entry
  without adding blocks.
- The null block (and a sink manager's sink blocks) leave the free queue while the pool and
  managers are built, before any recorder can be attached: a trace snapshots the state after
  construction (``kvlab.trace.Recorder.attach``).
- Input checks run before ``begin_call``: a call rejected for bad input records nothing.

``b`` is a block_id (int); ``bs`` a sequence of block ids; ``key`` a BlockHashWithGroupId
(bytes); ``h`` a BlockHash (bytes); ``g`` a kv_cache_group_id; ``r`` a request_id (str).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["KVRecorder"]


@runtime_checkable
class KVRecorder(Protocol):
    """What core calls. Every method returns None. See the module docstring for the table."""

    # --- FreeKVCacheBlockQueue -------------------------------------------------------
    def popleft(self, block_id: int) -> None: ...
    def popleft_n(self, block_ids: Sequence[int]) -> None: ...
    def remove(self, block_id: int) -> None: ...
    def append(self, block_id: int) -> None: ...
    def append_n(self, block_ids: Sequence[int]) -> None: ...

    # --- BlockPool: ref counts -------------------------------------------------------
    def get_new_blocks(self, block_ids: Sequence[int]) -> None: ...
    def touch(self, block_ids: Sequence[int]) -> None: ...
    def free_blocks(self, block_ids: Sequence[int]) -> None: ...

    # --- BlockPool: prefix cache -----------------------------------------------------
    def cache_full_blocks(
        self,
        request_id: str,
        kv_cache_group_id: int,
        num_cached_blocks: int,
        num_full_blocks: int,
        block_ids: Sequence[int],
        block_hashes: Sequence[bytes],
    ) -> None:
        """``block_ids[i]`` got BlockHashWithGroupId ``block_hashes[i]`` (null/masked blocks omitted)."""

    def evict(self, block_id: int, block_hash: bytes) -> None:
        """``block_hash`` is the BlockHashWithGroupId the block lost."""

    def reset(self) -> None: ...

    def lookup(self, block_hash: bytes, kv_cache_group_id: int, block_id: int) -> None:
        """One get_cached_block probe for one group: ``block_id`` is -1 on a miss."""

    # --- coordinator -----------------------------------------------------------------
    def fixed_point(
        self,
        iteration: int,
        kv_cache_group_ids: Sequence[int],
        hit_length_in: int,
        hit_length_out: int,
        reused: bool,
        block_ids: Sequence[Sequence[int]],
    ) -> None:
        """One attention group's turn in one HybridKVCacheCoordinator fixed-point iteration.

        Lengths are in tokens; ``reused`` is True when a full-attention group's earlier hit was
        truncated instead of searched again. ``block_ids[j]`` lists the block ids that group
        ``kv_cache_group_ids[j]``'s hit holds after this turn (blocks; the null block appears
        as its block_id; on the reuse path, the earlier hit already cut to ``hit_length_out``).
        """

    # --- SingleTypeKVCacheManager ----------------------------------------------------
    def req_blocks_add(self, request_id: str, kv_cache_group_id: int, block_ids: Sequence[int]) -> None: ...
    def req_blocks_null(self, request_id: str, kv_cache_group_id: int, indices: Sequence[int]) -> None: ...
    def req_free(self, request_id: str, kv_cache_group_id: int) -> None: ...

    # --- KVCacheManager API calls ----------------------------------------------------
    def begin_call(self, name: str, request_id: str | None, args: Sequence[int]) -> None:
        """Entry of a public call; ``args`` are its integer arguments in a fixed per-call order."""

    def end_call(self, name: str, result: Sequence[int]) -> None:
        """Exit of the call opened last; ``result`` is its integer outcome (per-call order)."""
