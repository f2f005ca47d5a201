"""Guards: the one call on the first line of each public entry point of the KV-cache manager.

vLLM asserts (or silently corrupts the free queue and ref counts) on bad caller input; kvlab's
mirrored bodies keep vLLM's statements and call a guard first. A guard accepts the common call
in constant time, checks everything otherwise, and raises a ValueError / TypeError that names
what was wrong and what is allowed, before anything changes. Where vLLM itself accepts an input,
the guard accepts it too.

Two kinds of callers:

* KVCacheManager's entry points (``get_computed_blocks``, ``allocate_slots``, ``free``, ...)
  are the scheduler's door: every call is checked (cheap type tests first).
* BlockPool's methods are also called by the single-type managers, inside kvlab.core, with
  arguments the manager computed from already-checked input. As in vLLM, the pool trusts those
  callers (``called_from_core``: one frame lookup); a call from anywhere else (a notebook, a
  user, a test, a learner's class) gets the full checks.

A guard that had to materialise an iterator to check it returns what the body should use
(``blocks = guard_touch(self, blocks)``); the others return None.

Not part of vLLM: nothing here changes a decision, only which input reaches the mirrored body.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import Any

from kvlab.core.kv_cache_interface import CrossAttentionSpec
from kvlab.core.kv_cache_utils import called_from_core, is_block
from kvlab.core.request import Request

BlockPool = Any  # NOTE: block_pool imports this module; annotated by name, not imported

__all__ = [
    "MAX_GROUP_ID",
    "check_block_ids",
    "guard_allocate_slots",
    "guard_block_ids",
    "guard_block_pool",
    "guard_cache_blocks",
    "guard_cache_full_blocks",
    "guard_count",
    "guard_evict_blocks",
    "guard_free_blocks",
    "guard_get_cached_block",
    "guard_get_computed_blocks",
    "guard_get_new_blocks",
    "guard_hybrid_coordinator",
    "guard_kv_cache_manager",
    "guard_request",
    "guard_running_request_id",
    "guard_touch",
    "guard_unitary_coordinator",
    "guard_world_sizes",
]

MAX_GROUP_ID = 2**32  # make_block_hash_with_group_id packs the group id into 4 bytes
_ZERO = 0  # CPython shares small ints: ``x is _ZERO`` is a one-compare test for a plain 0


def is_int(value: Any) -> bool:
    """True for ints and int-likes (numpy integers), False for bool, float, str, None."""
    if type(value) is int:
        return True
    return isinstance(value, Integral) and not isinstance(value, bool)


def _blocks_type_error(method: str, arg: str, value: Any) -> TypeError:
    items = list(value) if isinstance(value, (list, tuple)) else None
    bad = "" if items is None else next(
        (f" (item {i} is {type(x).__name__} {x!r:.60})" for i, x in enumerate(items)
         if not is_block(x)), "",
    )  # fmt: skip
    return TypeError(
        f"{method}: {arg} must be an iterable of KVCacheBlock, got {type(value).__name__}{bad}; "
        "allowed: KVCacheBlock items"
    )


def _materialise_blocks(method: str, arg: str, blocks: Any) -> Sequence[Any]:
    """``blocks`` as a sequence of KVCacheBlock (a one-shot iterator becomes a list)."""
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Iterable):
        raise _blocks_type_error(method, arg, blocks)
    seq = blocks if isinstance(blocks, Sequence) else list(blocks)
    for block in seq:
        if not is_block(block):
            raise _blocks_type_error(method, arg, list(seq))
    return seq


# ------------------------------------------------------------------------------- BlockPool
def guard_block_pool(num_gpu_blocks: Any, hash_block_size: Any) -> None:
    """BlockPool(): both sizes must be positive ints."""
    if not isinstance(num_gpu_blocks, int) or isinstance(num_gpu_blocks, bool) or num_gpu_blocks <= 0:
        raise ValueError(f"num_gpu_blocks must be a positive int (blocks), got {num_gpu_blocks!r}")
    if not isinstance(hash_block_size, int) or isinstance(hash_block_size, bool) or hash_block_size <= 0:
        raise ValueError(f"hash_block_size must be a positive int (tokens), got {hash_block_size!r}")


def guard_get_cached_block(block_hash: Any, kv_cache_group_ids: Any) -> list[int]:
    """get_cached_block: bytes and a list of group ids in [0, 2**32); returns the ids as ints.

    Int-likes (numpy integers) are accepted and converted; a one-shot iterator of ids is
    materialised.
    """
    if block_hash.__class__ is bytes and kv_cache_group_ids.__class__ is list:
        if len(kv_cache_group_ids) == 1:  # the common lookup: one group
            group_id = kv_cache_group_ids[0]
            if group_id.__class__ is int and 0 <= group_id < MAX_GROUP_ID:
                return kv_cache_group_ids
        else:
            for group_id in kv_cache_group_ids:
                if group_id.__class__ is not int or not 0 <= group_id < MAX_GROUP_ID:
                    break
            else:
                return kv_cache_group_ids
    if not isinstance(block_hash, bytes):
        raise TypeError(
            "get_cached_block: block_hash must be bytes (a BlockHash, e.g. from "
            f"request.block_hashes), got {type(block_hash).__name__} {block_hash!r:.60}"
        )
    if isinstance(kv_cache_group_ids, (str, bytes)) or not isinstance(kv_cache_group_ids, Iterable):
        raise TypeError(
            "get_cached_block: kv_cache_group_ids must be a list of int group ids "
            f"(0 <= id < 2**32), got {type(kv_cache_group_ids).__name__} {kv_cache_group_ids!r:.60}"
        )
    ids = list(kv_cache_group_ids)
    for group_id in ids:
        if not is_int(group_id):
            raise TypeError(
                "get_cached_block: kv_cache_group_ids must be a list of int group ids; kv_cache_group_ids must "
                f"hold ints, got {type(group_id).__name__} {group_id!r:.60}; allowed: 0 <= id < 2**32"
            )
        if not 0 <= group_id < MAX_GROUP_ID:
            raise ValueError(f"get_cached_block: kv_cache_group_id {group_id}; allowed 0 <= id < 2**32")
    return [operator.index(g) for g in ids]


def guard_cache_full_blocks(
    pool: BlockPool,
    request: Any,
    blocks: Any,
    num_cached_blocks: Any,
    num_full_blocks: Any,
    block_size: Any,
    kv_cache_group_id: Any,
    block_mask: Any,
) -> None:
    """cache_full_blocks: the preconditions vLLM asserts, checked before anything changes.

    Allowed: a request with ``request_id`` and ``block_hashes`` covering ``num_full_blocks``
    blocks; ``blocks`` a list of KVCacheBlock; ints with 0 <= num_cached_blocks and
    0 <= num_full_blocks <= len(blocks); a block_size that is a positive multiple of
    hash_block_size; 0 <= kv_cache_group_id < 2**32; a mask as long as the new full blocks; and
    no new full block already cached.
    """
    if called_from_core():
        return
    if not (hasattr(request, "block_hashes") and hasattr(request, "request_id")):
        raise TypeError(
            "cache_full_blocks: request must be a Request (or an object with request_id and "
            f"block_hashes), got {type(request).__name__} {request!r:.60}"
        )
    if not isinstance(blocks, list):
        raise _blocks_type_error("cache_full_blocks", "blocks", blocks)
    ints = {"num_cached_blocks": num_cached_blocks, "num_full_blocks": num_full_blocks,
            "block_size": block_size, "kv_cache_group_id": kv_cache_group_id}  # fmt: skip
    for name, value in ints.items():
        if not is_int(value):
            raise TypeError(f"cache_full_blocks: {name} must be an int, got {type(value).__name__} {value!r:.60}")
    if num_cached_blocks < 0 or not 0 <= num_full_blocks <= len(blocks):
        raise ValueError(
            f"cache_full_blocks: num_cached_blocks={num_cached_blocks}, num_full_blocks="
            f"{num_full_blocks} for {len(blocks)} blocks; allowed: 0 <= num_cached_blocks and "
            "0 <= num_full_blocks <= len(blocks)"
        )
    if not 0 <= kv_cache_group_id < MAX_GROUP_ID:
        raise ValueError(f"cache_full_blocks: kv_cache_group_id {kv_cache_group_id}; allowed 0 <= kv_cache_group_id < 2**32")
    if num_cached_blocks >= num_full_blocks:
        return
    new_full_blocks = blocks[num_cached_blocks:num_full_blocks]
    for blk in new_full_blocks:
        if not is_block(blk):
            raise TypeError(
                f"cache_full_blocks: blocks must hold KVCacheBlock, got {type(blk).__name__} "
                f"{blk!r:.60} among the new full blocks"
            )
    if len(request.block_hashes) < num_full_blocks:
        raise ValueError(
            f"request {request.request_id} has {len(request.block_hashes)} block hashes, "
            f"fewer than num_full_blocks={num_full_blocks}"
        )
    if block_mask is not None and len(block_mask) != len(new_full_blocks):
        raise ValueError(f"block_mask has {len(block_mask)} entries for {len(new_full_blocks)} new full blocks")
    if block_size <= 0 or block_size % pool.hash_block_size:
        raise ValueError(f"block_size {block_size} must be a positive multiple of hash_block_size {pool.hash_block_size}")
    for i, blk in enumerate(new_full_blocks):
        if blk.block_hash is not None and not blk.is_null and (block_mask is None or block_mask[i]):
            raise ValueError(f"block {blk.block_id} is already cached (block_hash set)")


def guard_get_new_blocks(pool: BlockPool, num_blocks: Any) -> None:
    """get_new_blocks: an int >= 0 (vLLM's own check refuses more than the free blocks)."""
    if num_blocks.__class__ is int and num_blocks >= 0:
        return
    num_free = pool.get_num_free_blocks()
    if not is_int(num_blocks):
        raise TypeError(
            f"num_blocks must be an int (blocks), 0 <= num_blocks <= {num_free}; "
            f"got {type(num_blocks).__name__} {num_blocks!r}"
        )
    if num_blocks < 0:
        raise ValueError(
            f"Cannot get {num_blocks} free blocks from the pool: {num_free} free "
            f"(allowed: 0 <= num_blocks <= {num_free})"
        )


def guard_touch(pool: BlockPool, blocks: Any) -> Sequence[Any]:
    """touch: KVCacheBlocks; each free one (ref_cnt 0, not null) must be in the free queue."""
    if called_from_core():
        return blocks
    seq = _materialise_blocks("touch", "blocks", blocks)
    for block in seq:
        if block.ref_cnt == 0 and not block.is_null and block.prev_free_block is None:
            raise ValueError(
                f"touch: block {block.block_id} has ref_cnt 0 but is not in the free queue; "
                "allowed: blocks in use, or free blocks of this pool's queue"
            )
    return seq


def guard_free_blocks(pool: BlockPool, ordered_blocks: Any) -> Sequence[Any]:
    """free_blocks: no pool block freed below ref_cnt 0, none linked into the queue twice.

    A KVCacheBlock the caller built (not this pool's block of its id) gets vLLM's treatment,
    whatever its ref_cnt.
    """
    if ordered_blocks.__class__ is list and not ordered_blocks or called_from_core():
        return ordered_blocks
    seq = _materialise_blocks("free_blocks", "ordered_blocks", ordered_blocks)
    counts: dict[int, int] = {}
    for block in seq:
        block_id = block.block_id
        if block.is_null or not (0 <= block_id < len(pool.blocks) and pool.blocks[block_id] is block):
            continue
        counts[block_id] = counts.get(block_id, 0) + 1
        if counts[block_id] > block.ref_cnt:
            # The ref_cnt the block would have when this listing frees it again: 0.
            raise ValueError(
                f"free_blocks: block {block_id} is already free (ref_cnt "
                f"{block.ref_cnt - counts[block_id] + 1}); allowed: blocks with ref_cnt >= 1, each "
                "listed at most ref_cnt times (a double free?)"
            )
    for block_id, count in counts.items():
        if count > 1 and count == pool.blocks[block_id].ref_cnt:
            raise ValueError(
                f"free_blocks: block {block_id} is listed {count} times and would reach ref_cnt 0; "
                "allowed: a block that reaches 0 listed once (vLLM would link it into the free "
                "queue twice)"
            )
    return seq


def check_block_ids(block_ids: Any, num_blocks: int) -> list[int]:
    """Int block ids in [0, num_blocks), as a list in iteration order (int-likes converted)."""
    if isinstance(block_ids, (str, bytes)) or not isinstance(block_ids, Iterable):
        raise TypeError(
            "block_ids must be an iterable of int block ids (a set in vLLM), got "
            f"{type(block_ids).__name__} {block_ids!r}"
        )
    ids = list(block_ids)
    for block_id in ids:
        if not is_int(block_id):
            raise TypeError(
                f"block_ids must hold ints, got {type(block_id).__name__} {block_id!r}; "
                f"allowed: 0 <= block_id < {num_blocks}"
            )
        if not 0 <= block_id < num_blocks:
            raise ValueError(f"Invalid block_id {block_id}: out of range, allowed 0 <= block_id < {num_blocks}")
    return [operator.index(i) for i in ids]


def guard_evict_blocks(pool: BlockPool, block_ids: Any) -> Iterable[int]:
    """BlockPool.evict_blocks: int block ids in [0, num_gpu_blocks) (core's callers trusted)."""
    if called_from_core():
        return block_ids
    return check_block_ids(block_ids, len(pool.blocks))


def guard_block_ids(pool: BlockPool, block_ids: Any) -> list[int]:
    """KVCacheManager.evict_blocks: int block ids in [0, num_gpu_blocks), always checked."""
    return check_block_ids(block_ids, len(pool.blocks))


# ------------------------------------------------------------------- single-type managers
def guard_world_sizes(dcp_world_size: Any, pcp_world_size: Any) -> None:
    """SingleTypeKVCacheManager(): context-parallel world sizes are ints >= 1."""
    for name, value in (("dcp_world_size", dcp_world_size), ("pcp_world_size", pcp_world_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")


# -------------------------------------------------------------------------- KVCacheManager
# What each call reads of a request (a Request has them all; test doubles may have fewer).
_REQUEST_ATTRS = {
    "allocate_slots": ("request_id", "num_tokens", "num_computed_tokens", "block_hashes"),
    "cache_blocks": ("request_id", "num_tokens", "block_hashes"),
    "free": ("request_id",),
    "get_computed_blocks": ("request_id", "num_tokens", "block_hashes"),
}


def guard_request(request: Any, call: str) -> None:
    """The argument must be a Request, or have every attribute ``call`` reads of one.

    Raises:
        TypeError: ``request`` is None, a str, a number, or anything else without the
            attributes ``call`` reads (``request_id``, ``num_tokens``, ...).
    """
    if request.__class__ is Request or isinstance(request, Request):
        return
    attrs = _REQUEST_ATTRS[call]
    if not isinstance(request, (str, bytes, int, float, type(None))) and all(
        hasattr(request, name) for name in attrs
    ):
        return  # duck-typed (e.g. vLLM's own Request, or a test double)
    raise TypeError(
        f"{call}: request must be a Request (kvlab.core.request.Request, or an object with "
        f"{', '.join(attrs)}), got {type(request).__name__} {request!r:.80}"
    )


def guard_count(name: str, value: Any) -> None:
    """An int >= 0 (bool refused; numpy integers accepted).

    Raises:
        TypeError: Not an int.
        ValueError: Negative.
    """
    if type(value) is not int and not is_int(value):
        raise TypeError(f"{name} must be an int >= 0, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _positive(name: str, value: Any) -> None:
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def guard_kv_cache_manager(
    kv_cache_config: Any,
    max_model_len: Any,
    hash_block_size: Any,
    max_num_batched_tokens: Any,
    enable_caching: bool,
) -> None:
    """KVCacheManager(): sizes are ints >= 1; no cross-attention group with caching on.

    Raises:
        ValueError: A size is not an int >= 1, or caching is on with a cross-attention group
            (vLLM would fail at the first lookup or allocation).
        TypeError: ``kv_cache_config`` has no ``kv_cache_groups`` / ``num_blocks``.
    """
    if not hasattr(kv_cache_config, "kv_cache_groups") or not hasattr(kv_cache_config, "num_blocks"):
        raise TypeError(f"kv_cache_config must be a KVCacheConfig, got {type(kv_cache_config).__name__}")
    _positive("max_model_len", max_model_len)
    _positive("hash_block_size", hash_block_size)
    if max_num_batched_tokens is not None:
        _positive("max_num_batched_tokens", max_num_batched_tokens)
    groups = kv_cache_config.kv_cache_groups
    if enable_caching and any(isinstance(g.kv_cache_spec, CrossAttentionSpec) for g in groups):
        raise ValueError("cross attention (encoder-decoder) needs enable_caching=False")


def guard_get_computed_blocks(mgr: Any, request: Any) -> None:
    """get_computed_blocks: a Request; with a lookup to run, at least one token."""
    if request.__class__ is not Request:
        guard_request(request, "get_computed_blocks")
    if mgr.enable_caching and not request.skip_reading_prefix_cache and request.num_tokens < 1:
        raise ValueError(f"request {request.request_id!r} has no tokens; get_computed_blocks needs >= 1")


def _holds_blocks(request_id: str, group_id: int) -> ValueError:
    return ValueError(
        f"request {request_id!r} already holds blocks in group {group_id}; prefix-cache hits "
        "and external tokens are attached only to new requests"
    )


def _check_hit_blocks(mgr: Any, request_id: str, blocks: tuple, num_new_computed_tokens: int, attaches: bool) -> None:
    """Hit blocks must fit the groups, the request's state and the config.

    NOTE: the blocks are not checked against ``num_new_computed_tokens`` beyond "no blocks ->
    no hit tokens": vLLM's own hybrid lookup can return group lists of other lengths (a second
    full-attention attention group is never truncated; EAGLE with Mamba returns a hit longer
    than the full-attention blocks), and kvlab must accept what vLLM accepts.
    """
    managers = mgr.coordinator.single_type_managers
    if len(blocks) != mgr.num_kv_cache_groups:
        raise ValueError(f"new_computed_blocks has {len(blocks)} groups; the manager has {mgr.num_kv_cache_groups}")
    has_hits = any(len(group) for group in blocks)
    if has_hits and not mgr.enable_caching:
        raise ValueError("prefix caching is disabled: new_computed_blocks must be empty")
    if num_new_computed_tokens > 0 and not has_hits and managers:
        raise ValueError(
            f"num_new_computed_tokens={num_new_computed_tokens} needs the hit blocks "
            "(pass new_computed_blocks from get_computed_blocks)"
        )
    holding_group = None
    for manager, group in zip(managers, blocks):
        cross = isinstance(manager.kv_cache_spec, CrossAttentionSpec)
        running = request_id in manager.num_cached_block
        if len(group):
            for block in group:
                if not is_block(block):
                    raise TypeError(f"new_computed_blocks must hold KVCacheBlock, got {type(block).__name__}")
            if cross:
                raise ValueError("cross-attention groups never have prefix-cache hits")
            if running:
                raise ValueError(f"request {request_id!r} is running; prefix-cache hits go only to new requests")
        if attaches and holding_group is None and not cross and not running and manager.req_to_blocks.get(request_id):
            holding_group = manager.kv_cache_group_id
    if holding_group is not None:
        raise _holds_blocks(request_id, holding_group)


def _check_hashes_cover(mgr: Any, request: Any, num_tokens: int) -> None:
    """Caching ``num_tokens`` tokens needs the block hashes of the blocks not cached yet."""
    coordinator = mgr.coordinator
    lcm = getattr(coordinator, "lcm_block_size", None)
    if lcm is not None:
        num_tokens = num_tokens // lcm * lcm
    num_hashed_tokens = len(request.block_hashes) * mgr.block_pool.hash_block_size
    for manager in coordinator.single_type_managers:
        num_full_blocks = num_tokens // manager.block_size
        if num_full_blocks <= manager.num_cached_block.get(request.request_id, 0):
            continue
        if num_full_blocks * manager.block_size > num_hashed_tokens:
            raise ValueError(
                f"request {request.request_id!r} has block hashes for {num_hashed_tokens} "
                f"tokens; caching {num_full_blocks * manager.block_size} tokens needs more "
                "(was it built with a block_hasher?)"
            )


def guard_allocate_slots(
    mgr: Any,
    request: Any,
    num_new_tokens: Any,
    num_new_computed_tokens: Any,
    new_computed_blocks: Any,
    num_lookahead_tokens: Any,
    num_external_computed_tokens: Any,
    delay_cache_blocks: bool,
    num_encoder_tokens: Any,
) -> None:
    """allocate_slots: every argument, and what the call would attach and cache.

    Constant time for the common call (a Request asking for its next tokens: int counts, no
    hits, no external or encoder tokens, enough block hashes); full checks otherwise.

    Raises:
        TypeError: ``request`` is not a Request, a count is not an int, or
            ``new_computed_blocks`` is not KVCacheBlocks.
        ValueError: A negative count; hit blocks that do not fit the groups,
            ``num_new_computed_tokens`` or the request's state; missing block hashes.
    """
    if (
        request.__class__ is Request
        and num_new_tokens.__class__ is int
        and num_new_tokens > 0
        # `is` against the shared small int: numpy zeros etc. take the full checks below.
        and num_new_computed_tokens is _ZERO
        and num_external_computed_tokens is _ZERO
        and num_encoder_tokens is _ZERO
        and num_lookahead_tokens.__class__ is int
        and num_lookahead_tokens >= 0
        and (new_computed_blocks is None or new_computed_blocks is mgr.empty_kv_cache_blocks)
        and (
            not mgr.enable_caching
            or delay_cache_blocks
            # Enough hashes for every block the call may cache (it caches up to
            # min(this, request.num_tokens) tokens).
            or (request.num_computed_tokens + num_new_tokens) // mgr.block_pool.hash_block_size
            <= len(request.block_hashes)
        )
    ):
        return
    if request.__class__ is not Request:
        guard_request(request, "allocate_slots")
    for name, value in (
        ("num_new_tokens", num_new_tokens),
        ("num_new_computed_tokens", num_new_computed_tokens),
        ("num_lookahead_tokens", num_lookahead_tokens),
        ("num_external_computed_tokens", num_external_computed_tokens),
        ("num_encoder_tokens", num_encoder_tokens),
    ):
        guard_count(name, value)
    if num_new_tokens == 0 and num_external_computed_tokens == 0:
        raise ValueError("num_new_tokens must be > 0 when there are no external computed tokens")
    empty = mgr.empty_kv_cache_blocks
    if new_computed_blocks is None or new_computed_blocks is empty:
        blocks = empty.blocks
        attaches = num_external_computed_tokens > 0
    elif isinstance(new_computed_blocks, type(empty)):
        blocks = new_computed_blocks.blocks
        attaches = True
    else:
        raise TypeError(f"new_computed_blocks must be KVCacheBlocks or None, got {type(new_computed_blocks).__name__}")
    if blocks is not empty.blocks or num_new_computed_tokens > 0 or attaches:
        _check_hit_blocks(mgr, request.request_id, blocks, num_new_computed_tokens, attaches)
    if mgr.enable_caching and not delay_cache_blocks:
        num_computed = min(
            request.num_computed_tokens + num_new_computed_tokens + num_external_computed_tokens,
            mgr.max_model_len,
        )
        num_tokens = min(num_computed + num_new_tokens, request.num_tokens)
        if num_tokens // mgr.block_pool.hash_block_size > len(request.block_hashes):
            _check_hashes_cover(mgr, request, num_tokens)


def guard_cache_blocks(mgr: Any, request: Any, num_computed_tokens: Any) -> None:
    """cache_blocks: blocks the request holds and has hashes for, up to ``num_computed_tokens``."""
    if request.__class__ is not Request:
        guard_request(request, "cache_blocks")
    guard_count("num_computed_tokens", num_computed_tokens)
    if not mgr.enable_caching:
        return
    coordinator = mgr.coordinator
    lcm = getattr(coordinator, "lcm_block_size", None)
    num_tokens = num_computed_tokens if lcm is None else num_computed_tokens // lcm * lcm
    for manager in coordinator.single_type_managers:
        num_full_blocks = num_tokens // manager.block_size
        if num_full_blocks <= manager.num_cached_block.get(request.request_id, 0):
            continue
        num_held = len(manager.req_to_blocks.get(request.request_id, ()))
        if num_full_blocks > num_held:
            raise ValueError(
                f"cannot cache {num_full_blocks} blocks of request {request.request_id!r} in group "
                f"{manager.kv_cache_group_id}: it holds {num_held}"
            )
    _check_hashes_cover(mgr, request, num_computed_tokens)


def guard_running_request_id(mgr: Any, running_request_id: Any) -> None:
    """get_num_common_prefix_blocks: the request must hold a blocks entry in some group.

    NOTE: vLLM would silently add an empty entry to its defaultdict, which zeroes every later
    answer; kvlab refuses an unknown id instead.
    """
    managers = mgr.coordinator.single_type_managers
    if managers and not any(running_request_id in m.req_to_blocks for m in managers):
        raise KeyError(f"request {running_request_id!r} holds no blocks; pass a running request id")


# ---------------------------------------------------------------------------- coordinators
def guard_unitary_coordinator(
    kv_cache_config: Any, enable_caching: bool, dcp_world_size: int, pcp_world_size: int, hash_block_size: int
) -> None:
    """UnitaryKVCacheCoordinator(): one group; with caching, hashes at the group's block size."""
    groups = kv_cache_config.kv_cache_groups
    if len(groups) != 1:
        raise ValueError(f"UnitaryKVCacheCoordinator needs exactly one KV cache group, got {len(groups)}")
    block_size = groups[0].kv_cache_spec.block_size * max(dcp_world_size, 1) * max(pcp_world_size, 1)
    if enable_caching and hash_block_size != block_size:
        raise ValueError(
            f"UnitaryKVCacheCoordinator needs hash_block_size == block_size, got "
            f"{hash_block_size} != {block_size}"
        )


def guard_hybrid_coordinator(kv_cache_config: Any, dcp_world_size: int, pcp_world_size: int, hash_block_size: int) -> None:
    """HybridKVCacheCoordinator(): block sizes multiples of hash_block_size, no DCP/PCP, >= 2 specs."""
    specs: list[Any] = []
    for g in kv_cache_config.kv_cache_groups:
        if g.kv_cache_spec.block_size % hash_block_size != 0:
            raise ValueError(
                f"block_size {g.kv_cache_spec.block_size} is not a multiple of hash_block_size {hash_block_size}"
            )
        if g.kv_cache_spec not in specs:
            specs.append(g.kv_cache_spec)
    if dcp_world_size != 1 or pcp_world_size != 1:
        raise ValueError("hybrid KV cache groups do not support DCP/PCP (world sizes must be 1)")
    if len(specs) <= 1:
        raise ValueError(
            "HybridKVCacheCoordinator needs at least two distinct KV cache specs; identical "
            "groups form one attention group"
        )
