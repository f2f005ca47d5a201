"""Invariant checks on a KVState or a live KVCacheManager; a violation raises InvariantError.

The rules (vLLM's own assumptions, made explicit)::

    free queue   <=>  ref_cnt == 0 and not the null block      (blocks in transit excepted)
    cached map   <=>  block_hash: every map entry's block has that key, every hashed block
                      is in the map under its key, exactly once
    counts            num_free_blocks == queue length (live), ref_cnt >= 0 (non-null)
    requests          a block a request holds is not free (ref_cnt > 0); optionally
                      ref_cnt == number of request lists holding it (exact_ref_cnt)
    null block        never in the free queue, never hashed, never in the map

Mid-way through one BlockPool operation a block may be out of the queue with ref_cnt 0
(popped by get_new_blocks or removed by touch before its ref_cnt rises, or just freed by
free_blocks before it is appended); pass such blocks as ``in_transit``
(``Trace.in_transit(i)`` computes them for event i).

Examples:
    >>> from kvlab.trace.state import KVState
    >>> s = KVState.fresh(4); check_invariants(s)
    >>> s.ref_cnt[2] = 1
    >>> check_invariants(s)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kvlab.trace.invariants.InvariantError: block 2 is in the free queue but has ref_cnt 1 ...
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any

from kvlab.trace.state import KVState

__all__ = ["InvariantError", "check_invariants"]


class InvariantError(AssertionError):
    """A KV-cache invariant does not hold; the message names the block/key and the rule."""


def check_invariants(
    state_or_manager: Any, in_transit: Collection[int] = (), exact_ref_cnt: bool = False
) -> None:
    """Check every invariant; raise on the first violation.

    Args:
        state_or_manager: A KVState, a KVCacheManager or a BlockPool.
        in_transit: Blocks mid-way through one BlockPool operation (see module docstring).
        exact_ref_cnt: Also require ref_cnt == number of request block lists holding the
            block (true between KVCacheManager calls; not while a caller drives BlockPool
            directly).

    Raises:
        InvariantError: Naming the first violated rule.
    """
    if isinstance(state_or_manager, KVState):
        state = state_or_manager
    else:
        state = KVState.from_manager(state_or_manager)
        _check_live_pool(getattr(state_or_manager, "block_pool", state_or_manager))
    _check_counts(state)
    _check_queue(state, set(in_transit))
    _check_cached_map(state)
    _check_requests(state, exact_ref_cnt)


def _fail(msg: str) -> None:
    raise InvariantError(msg)


def _check_counts(s: KVState) -> None:
    if len(s.ref_cnt) != s.num_blocks or len(s.block_hash) != s.num_blocks:
        _fail(
            f"state has {len(s.ref_cnt)} ref_cnt / {len(s.block_hash)} block_hash entries "
            f"for num_blocks={s.num_blocks}"
        )
    if s.num_free_blocks is not None and s.num_free_blocks != len(s.free_queue):
        _fail(
            f"num_free_blocks is {s.num_free_blocks} but the free queue holds "
            f"{len(s.free_queue)} blocks"
        )
    null = s.null_block_id
    for block_id, ref_cnt in enumerate(s.ref_cnt):
        if ref_cnt < 0 and block_id != null:
            _fail(f"block {block_id} has negative ref_cnt {ref_cnt}")


def _check_queue(s: KVState, in_transit: set[int]) -> None:
    null = s.null_block_id
    for block_id in s.free_queue:
        if not 0 <= block_id < s.num_blocks:
            _fail(f"free queue holds block {block_id}, outside [0, {s.num_blocks})")
        if block_id == null:
            _fail(f"the null block {null} is in the free queue")
        if s.ref_cnt[block_id] != 0:
            _fail(
                f"block {block_id} is in the free queue but has ref_cnt {s.ref_cnt[block_id]} "
                "(a queued block must have ref_cnt 0)"
            )
    queued = s.free_queue
    for block_id, ref_cnt in enumerate(s.ref_cnt):
        if (
            ref_cnt == 0
            and block_id != null
            and block_id not in queued
            and block_id not in in_transit
        ):
            _fail(
                f"block {block_id} has ref_cnt 0 but is not in the free queue (leaked: "
                "neither free nor held)"
            )


def _check_cached_map(s: KVState) -> None:
    null = s.null_block_id
    if null is not None and s.block_hash[null] >= 0:
        _fail(f"the null block {null} has a block_hash")
    seen: set[int] = set()
    for code, block_ids in s.cached.items():
        if not block_ids:
            _fail(f"cached map key {_key(s, code)} holds no block")
        for block_id in block_ids:
            if block_id == null:
                _fail(f"the null block {null} is in the cached map under {_key(s, code)}")
            if block_id in seen:
                _fail(f"block {block_id} appears twice in the cached map")
            seen.add(block_id)
            if s.block_hash[block_id] != code:
                have = s.block_hash[block_id]
                _fail(
                    f"block {block_id} is cached under {_key(s, code)} but its block_hash is "
                    f"{'None' if have < 0 else _key(s, have)}"
                )
    for block_id, code in enumerate(s.block_hash):
        if code >= 0 and block_id not in seen:
            _fail(f"block {block_id} has block_hash {_key(s, code)} but is not in the cached map")


def _check_requests(s: KVState, exact_ref_cnt: bool) -> None:
    null = s.null_block_id
    holders: Counter[int] = Counter()
    for group, blocks in enumerate(s.req_to_blocks):
        for req, block_ids in blocks.items():
            for pos, block_id in enumerate(block_ids):
                if block_id == null:
                    continue
                if not 0 <= block_id < s.num_blocks:
                    _fail(
                        f"request {s.tables.request_id(req)!r} group {group} holds block "
                        f"{block_id}, outside [0, {s.num_blocks})"
                    )
                if s.ref_cnt[block_id] <= 0:
                    _fail(
                        f"request {s.tables.request_id(req)!r} group {group} holds block "
                        f"{block_id} (position {pos}) but its ref_cnt is {s.ref_cnt[block_id]}"
                    )
                holders[block_id] += 1
    if exact_ref_cnt:
        for block_id, ref_cnt in enumerate(s.ref_cnt):
            if block_id != null and ref_cnt != holders[block_id]:
                _fail(
                    f"block {block_id} has ref_cnt {ref_cnt} but {holders[block_id]} request "
                    "block lists hold it"
                )


def _check_live_pool(pool: Any) -> None:
    queue = pool.free_block_queue
    walked = queue.get_all_free_blocks()
    if queue.num_free_blocks != len(walked):
        _fail(
            f"free_block_queue.num_free_blocks is {queue.num_free_blocks} but walking the "
            f"list finds {len(walked)} blocks"
        )
    for block in pool.blocks:
        linked = block.prev_free_block is not None or block.next_free_block is not None
        queued = block.prev_free_block is not None and block.next_free_block is not None
        if linked and not queued:
            _fail(f"block {block.block_id} has only one free-list link (half-unlinked)")
    null = getattr(pool, "null_block", None)
    if null is not None and not null.is_null:
        _fail(f"null_block {null.block_id} has is_null False")


def _key(s: KVState, code: int) -> str:
    try:
        key = s.key_bytes(code)
    except (IndexError, KeyError):
        return f"<key code {code}>"
    return f"{key[:-4][:4].hex()}..(group {int.from_bytes(key[-4:], 'big')})"
