"""The recorder protocol: the one door through which core reports what it does.

kvlab.core never knows how it is watched. Every object that mutates state (the
FreeKVCacheBlockQueue, the BlockPool, each SingleTypeKVCacheManager, the coordinator and the
KVCacheManager) holds a ``recorder`` attribute that is ``None`` (recording off: the cost is one
attribute test per hook site) or an object with the methods below. ``kvlab.trace.Recorder`` is
the implementation; tests may pass any object with these methods.

Where the hooks are: each is one line, ``if self.recorder is not None: self.recorder.<hook>(...)``,
placed right after the vLLM statement whose change it reports. Hooks take block ids (ints),
never blocks; they must never raise and never mutate core state. Where vLLM's loop changes one
block per iteration and another reported change can happen between iterations (``touch``: the
free queue's ``remove``; ``get_new_blocks``: evictions; ``remove_skipped_blocks``' nulling,
then its free), the hook sits inside the loop and reports that one block (a 1-tuple); where
nothing else is reported inside the loop (``free_blocks``' ref_cnt loop, ``cache_full_blocks``'
insertions), one hook after the loop reports them all. A recorder merges consecutive reports of
the same kind (same request and group) into one event; either way the state a trace replays
equals the live state after every event.

=====================  =====================================================  ==================
hook                   state change replay applies                            called from
=====================  =====================================================  ==================
popleft(b)             free queue: remove head (must be b)                    FreeKVCacheBlockQueue.popleft
popleft_n(bs)          free queue: remove the first len(bs) blocks            FreeKVCacheBlockQueue.popleft_n
remove(b)              free queue: unlink b from the middle                   FreeKVCacheBlockQueue.remove
append(b)              free queue: link b at the tail                         FreeKVCacheBlockQueue.append
append_n(bs)           free queue: link bs at the tail, in order              FreeKVCacheBlockQueue.append_n
get_new_blocks(bs)     ref_cnt += 1 for each of bs (per block in the loop)    BlockPool.get_new_blocks
touch(bs)              ref_cnt += 1 for each of bs (per block; null too)      BlockPool.touch
free_blocks(bs)        ref_cnt -= 1 for each of bs, in the given order        BlockPool.free_blocks
cache_full_blocks(..)  block_hash set + cached map insert, per cached block   BlockPool.cache_full_blocks
evict(b, key)          block_hash cleared + cached map pop (one block)        BlockPool._maybe_evict_cached_block
reset()                every block_hash cleared, cached map emptied           BlockPool.reset_prefix_cache (success)
lookup(h, g, b)        none (a read: hit -> block id, miss -> -1)             BlockPool.get_cached_block
fixed_point(..)        none (one attention group's turn in one iteration)     HybridKVCacheCoordinator
req_blocks_add(r,g,bs) req_to_blocks[r][g].extend(bs) (bs may be empty: the   SingleTypeKVCacheManager
                       defaultdict may just have created the entry)
req_blocks_null(r,g,is) req_to_blocks[r][g][i] = null_block for i in is       remove_skipped_blocks, Mamba
req_free(r, g)         req_to_blocks[r][g] dropped (if it existed)            SingleTypeKVCacheManager.free
num_blocks_to_allocate none (allocate_slots' count, for its call bracket)     KVCacheManager.allocate_slots
begin_call / end_call  none (bracket the API call that caused the events)     call brackets (below)
=====================  =====================================================  ==================

``cache_full_blocks(r, g, num_cached_blocks, num_full_blocks, block_ids, block_hashes)``: the
blocks this call cached (null and masked-out blocks are not) and the BlockHashWithGroupId each
got. ``fixed_point(idx, group_ids, hit_length, curr_hit_length, reused, block_ids)`` reports
attention group ``idx``'s turn: the iteration started at ``hit_length`` tokens, the candidate is
now ``curr_hit_length``; ``reused`` is True when a full-attention group's earlier hit was cut
instead of searched again; ``block_ids[j]`` are group ``group_ids[j]``'s hit after the turn (the
recorder numbers the iterations: a turn of attention group 0 starts a new one).

Call brackets. ``install_call_brackets`` (called by ``KVCacheManager.set_recorder``) puts a
wrapper around each public KVCacheManager method on the instance, so that recording off costs
nothing; the wrapper reports ``begin_call(name, request_id, args)`` before and
``end_call(name, result)`` after (``args`` / ``result`` are int tuples in this order), and a
call its guard rejects leaves nothing in the trace (``abort_call``):

=======================  ==============================================================  =========================
name                     args                                                            result
=======================  ==============================================================  =========================
get_computed_blocks      (num_tokens, num_block_hashes)                                  (num_new_computed_tokens,)
allocate_slots           (num_computed_tokens, num_new_computed_tokens,                  (1,) or (0,) if None;
                         num_external_computed_tokens, num_new_tokens,                   the recorder appends the
                         num_lookahead_tokens, num_encoder_tokens, delay_cache_blocks,   last num_blocks_to_allocate
                         full_sequence_must_fit)
free                     ()                                                              ()
remove_skipped_blocks    (total_computed_tokens,)                                        ()
cache_blocks             (num_computed_tokens,)                                          ()
evict_blocks             (block_id, ...)  sorted                                         ()
reset_prefix_cache       ()                                                              (1,) or (0,) if refused
new_step_starts          ()                                                              ()
=======================  ==============================================================  =========================

The null block (and a sink manager's sink blocks) leave the free queue while the pool and
managers are built, before any recorder can be attached: a trace snapshots the state after
construction (``kvlab.trace.Recorder.attach``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["BRACKETED_CALLS", "KVRecorder", "install_call_brackets", "remove_call_brackets"]


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
        idx: int,
        kv_cache_group_ids: Sequence[int],
        hit_length: int,
        curr_hit_length: int,
        reused: bool,
        block_ids: Sequence[Sequence[int]],
    ) -> None: ...

    # --- SingleTypeKVCacheManager ----------------------------------------------------
    def req_blocks_add(self, request_id: str, kv_cache_group_id: int, block_ids: Sequence[int]) -> None: ...
    def req_blocks_null(self, request_id: str, kv_cache_group_id: int, indices: Sequence[int]) -> None: ...
    def req_free(self, request_id: str, kv_cache_group_id: int) -> None: ...

    # --- KVCacheManager --------------------------------------------------------------
    def num_blocks_to_allocate(self, num_blocks: int) -> None: ...
    def begin_call(self, name: str, request_id: str | None, args: Sequence[int]) -> None:
        """Entry of a public call; ``args`` are its integer arguments in a fixed per-call order."""

    def end_call(self, name: str, result: Sequence[int]) -> None:
        """Exit of the call opened last; ``result`` is its integer outcome (per-call order)."""

    def abort_call(self, name: str) -> None:
        """The call opened last raised: drop it if it recorded nothing, else close it."""


def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _get_computed_blocks(method: Callable, rec: Any) -> Callable:
    def get_computed_blocks(request: Any) -> Any:
        try:
            request_id, args = request.request_id, (request.num_tokens, len(request.block_hashes))
        except Exception:  # bad input: the guard names it; nothing is recorded
            return method(request)
        rec.begin_call("get_computed_blocks", request_id, args)
        try:
            result = method(request)
        except BaseException:
            rec.abort_call("get_computed_blocks")
            raise
        rec.end_call("get_computed_blocks", (result[1],))
        return result

    return get_computed_blocks


def _allocate_slots(method: Callable, rec: Any) -> Callable:
    def allocate_slots(
        request: Any,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: Any = None,
        num_lookahead_tokens: int = 0,
        num_external_computed_tokens: int = 0,
        delay_cache_blocks: bool = False,
        num_encoder_tokens: int = 0,
        full_sequence_must_fit: bool = False,
    ) -> Any:
        args = (
            request, num_new_tokens, num_new_computed_tokens, new_computed_blocks,
            num_lookahead_tokens, num_external_computed_tokens, delay_cache_blocks,
            num_encoder_tokens, full_sequence_must_fit,
        )  # fmt: skip
        # NOTE: the counts go to the recorder as given (ints; anything else the guard refuses
        # and abort_call drops the bracket); a recorder stores only integers.
        try:
            request_id, num_computed_tokens = request.request_id, request.num_computed_tokens
        except Exception:
            return method(*args)
        rec.begin_call("allocate_slots", request_id, (
            num_computed_tokens, num_new_computed_tokens, num_external_computed_tokens,
            num_new_tokens, num_lookahead_tokens, num_encoder_tokens,
            1 if delay_cache_blocks else 0, 1 if full_sequence_must_fit else 0,
        ))  # fmt: skip
        try:
            result = method(*args)
        except BaseException:
            rec.abort_call("allocate_slots")
            raise
        rec.end_call("allocate_slots", (0 if result is None else 1,))
        return result

    return allocate_slots


def _simple(name: str, method: Callable, rec: Any, describe: Callable[..., tuple], outcome: Callable[[Any], tuple]) -> Callable:
    def bracket(*args: Any, **kwargs: Any) -> Any:
        try:
            call = describe(*args, **kwargs)
        except Exception:
            return method(*args, **kwargs)
        rec.begin_call(name, *call)
        try:
            result = method(*args, **kwargs)
        except BaseException:
            rec.abort_call(name)
            raise
        rec.end_call(name, outcome(result))
        return result

    bracket.__name__ = name
    return bracket


def _no_result(result: Any) -> tuple:
    return ()


_SIMPLE: dict[str, tuple[Callable[..., tuple], Callable[[Any], tuple]]] = {
    "free": (lambda request: (request.request_id, ()), _no_result),
    "remove_skipped_blocks": (
        lambda request_id, total_computed_tokens: (request_id, _ints((total_computed_tokens,))),
        _no_result,
    ),
    "cache_blocks": (
        lambda request, num_computed_tokens: (request.request_id, _ints((num_computed_tokens,))),
        _no_result,
    ),
    "reset_prefix_cache": (lambda: (None, ()), lambda ok: (1 if ok else 0,)),
    "new_step_starts": (lambda: (None, ()), _no_result),
}



def _evict_blocks(method: Callable, rec: Any) -> Callable:
    def evict_blocks(block_ids: Any) -> Any:
        try:
            ids = list(block_ids)  # one pass: a one-shot iterator is handed on as this list
        except Exception:
            return method(block_ids)
        try:
            call = (None, tuple(sorted(_ints(ids))))
        except Exception:
            return method(ids)
        rec.begin_call("evict_blocks", *call)
        try:
            method(ids)
        except BaseException:
            rec.abort_call("evict_blocks")
            raise
        rec.end_call("evict_blocks", ())

    return evict_blocks


BRACKETED_CALLS = ("get_computed_blocks", "allocate_slots", "evict_blocks", *_SIMPLE)
"""KVCacheManager methods that get a call bracket while a recorder is set."""


def install_call_brackets(manager: Any, recorder: Any) -> None:
    """Wrap each of ``BRACKETED_CALLS`` on the instance ``manager`` to report its call.

    ``evict_blocks`` reads its ids once and hands them on as a list (same order).
    Installing again replaces the previous brackets.
    """
    remove_call_brackets(manager)
    cls = type(manager)
    for name in BRACKETED_CALLS:
        method = getattr(cls, name).__get__(manager, cls)
        if name == "get_computed_blocks":
            wrapper = _get_computed_blocks(method, recorder)
        elif name == "allocate_slots":
            wrapper = _allocate_slots(method, recorder)
        elif name == "evict_blocks":
            wrapper = _evict_blocks(method, recorder)
        else:
            describe, outcome = _SIMPLE[name]
            wrapper = _simple(name, method, recorder, describe, outcome)
        setattr(manager, name, wrapper)


def remove_call_brackets(manager: Any) -> None:
    """Take the call brackets off ``manager`` (its class's methods show through again)."""
    for name in BRACKETED_CALLS:
        manager.__dict__.pop(name, None)
