"""Input checks for BlockPool: reject bad caller input before anything changes.

vLLM asserts (or silently corrupts the free queue / ref counts) on these inputs; kvlab raises a
ValueError / TypeError naming what is allowed. The checks are O(1) per block and run at the
public boundary (BlockPool.get_new_blocks / touch / free_blocks / cache_full_blocks); the only
one inside a hot loop (free_blocks: ``ref_cnt <= 0``) is one compare, and its error path
(``undo_free``) restores what the loop already changed. The single-type managers, whose
arguments are valid by construction, call BlockPool's unchecked ``_get_new_blocks_unchecked``
/ ``_touch_unchecked`` / ``_free_blocks_unchecked`` instead, so validation runs once, where the
input enters (KVCacheManager's checks).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from kvlab.core.kv_cache_block import KVCacheBlock
    from kvlab.core.request import Request

__all__ = [
    "blocks_type_error",
    "check_cache_full_blocks",
    "check_cache_full_blocks_args",
    "check_cached_block_args",
    "check_evict_block_ids",
    "check_num_blocks_type",
    "MAX_GROUP_ID",
    "double_free_error",
    "is_int",
    "is_pool_block",
    "list_blocks",
    "undo_free",
]


def is_int(value: Any) -> bool:
    """True for ints and int-likes (numpy integers), False for bool, float, str, None."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def check_num_blocks_type(num_blocks: Any, num_free: int) -> None:
    """Raise TypeError unless ``num_blocks`` is an int (get_new_blocks)."""
    if not is_int(num_blocks):
        raise TypeError(
            f"num_blocks must be an int (blocks), 0 <= num_blocks <= {num_free}; "
            f"got {type(num_blocks).__name__} {num_blocks!r}"
        )


MAX_GROUP_ID = 2**32  # make_block_hash_with_group_id packs the group id into 4 bytes


def check_cache_full_blocks_args(
    request: Any,
    blocks: Any,
    num_cached_blocks: Any,
    num_full_blocks: Any,
    block_size: Any,
    kv_cache_group_id: Any,
) -> tuple[int, int, int, int]:
    """Types and ranges of BlockPool.cache_full_blocks' arguments (TypeError / ValueError).

    Allowed: a request with ``request_id`` and ``block_hashes``; ``blocks`` a list of
    KVCacheBlock; ints with 0 <= num_cached_blocks, num_full_blocks <= len(blocks);
    0 <= kv_cache_group_id < 2**32 (block_size is checked by check_cache_full_blocks).

    Returns:
        (num_cached_blocks, num_full_blocks, block_size, kv_cache_group_id) as plain ints.
    """
    if (
        type(num_cached_blocks) is type(num_full_blocks) is type(block_size) is int
        and type(kv_cache_group_id) is int
        and type(blocks) is list
        and 0 <= num_cached_blocks
        and 0 <= num_full_blocks <= len(blocks)
        and 0 <= kv_cache_group_id < MAX_GROUP_ID
        and hasattr(request, "block_hashes")
        and hasattr(request, "request_id")
    ):  # NOTE: the hot path: every allocate_slots passes here once per group
        return num_cached_blocks, num_full_blocks, block_size, kv_cache_group_id
    if not (hasattr(request, "block_hashes") and hasattr(request, "request_id")):
        raise TypeError(
            "cache_full_blocks: request must be a Request (or an object with request_id and "
            f"block_hashes), got {type(request).__name__} {request!r:.60}"
        )
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
        raise blocks_type_error("cache_full_blocks", "blocks", blocks)
    ints = {"num_cached_blocks": num_cached_blocks, "num_full_blocks": num_full_blocks,
            "block_size": block_size, "kv_cache_group_id": kv_cache_group_id}  # fmt: skip
    for name, value in ints.items():
        if type(value) is not int and not is_int(value):
            raise TypeError(
                f"cache_full_blocks: {name} must be an int, got {type(value).__name__} "
                f"{value!r:.60}"
            )
    num_cached, num_full, size, group = (operator.index(v) for v in ints.values())
    if num_cached < 0 or not 0 <= num_full <= len(blocks):
        raise ValueError(
            f"cache_full_blocks: num_cached_blocks={num_cached}, num_full_blocks={num_full} "
            f"for {len(blocks)} blocks; allowed: 0 <= num_cached_blocks and 0 <= "
            "num_full_blocks <= len(blocks)"
        )
    if not 0 <= group < MAX_GROUP_ID:
        raise ValueError(
            f"cache_full_blocks: kv_cache_group_id {group}; allowed 0 <= kv_cache_group_id "
            "< 2**32"
        )
    return num_cached, num_full, size, group


def check_cache_full_blocks(
    request: Request,
    new_full_blocks: list[KVCacheBlock],
    num_full_blocks: int,
    block_size: int,
    hash_block_size: int,
    block_mask: list[bool] | None,
) -> None:
    """The preconditions of BlockPool.cache_full_blocks (ValueError naming the first broken)."""
    for i, blk in enumerate(new_full_blocks):
        if not hasattr(blk, "_block_hash"):
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
        raise ValueError(
            f"block_mask has {len(block_mask)} entries for {len(new_full_blocks)} new full blocks"
        )
    if block_size <= 0 or block_size % hash_block_size:
        raise ValueError(
            f"block_size {block_size} must be a positive multiple of hash_block_size "
            f"{hash_block_size}"
        )
    # NOTE: hot (every block that becomes full passes here once): the slot, not the property.
    if block_mask is None:
        for blk in new_full_blocks:
            if blk._block_hash is not None and not blk.is_null:
                raise ValueError(f"block {blk.block_id} is already cached (block_hash set)")
        return
    for i, blk in enumerate(new_full_blocks):
        if blk._block_hash is not None and not blk.is_null and block_mask[i]:
            raise ValueError(f"block {blk.block_id} is already cached (block_hash set)")


def blocks_type_error(method: str, arg: str, value: Any) -> TypeError:
    """The error of a ``blocks`` argument that is not an iterable of KVCacheBlock."""
    items = list(value) if isinstance(value, (list, tuple)) else None
    bad = "" if items is None else next(
        (f" (item {i} is {type(x).__name__} {x!r:.60})" for i, x in enumerate(items)
         if not hasattr(x, "ref_cnt")), "",
    )  # fmt: skip
    return TypeError(
        f"{method}: {arg} must be an iterable of KVCacheBlock, got "
        f"{type(value).__name__}{bad}"
    )


def list_blocks(ordered_blocks: Any) -> list[KVCacheBlock]:
    """``list(ordered_blocks)`` with a TypeError naming what is allowed (free_blocks)."""
    try:
        return list(ordered_blocks)
    except TypeError:
        raise blocks_type_error("free_blocks", "ordered_blocks", ordered_blocks) from None


def is_pool_block(blocks: list[KVCacheBlock], block: KVCacheBlock) -> bool:
    """Whether ``block`` is the pool's own block of its id (not a caller-built KVCacheBlock)."""
    block_id = block.block_id
    return 0 <= block_id < len(blocks) and blocks[block_id] is block


def double_free_error(block: KVCacheBlock) -> ValueError:
    """The error of freeing a block whose ref_cnt is already 0."""
    return ValueError(
        f"free_blocks: block {block.block_id} is already free (ref_cnt {block.ref_cnt}); "
        "allowed: blocks with ref_cnt >= 1, each listed at most ref_cnt times (a double free?)"
    )


def undo_free(blocks_list: list[KVCacheBlock], it: Iterator[Any], exc: Exception) -> NoReturn:
    """Restore the ref_cnt of the blocks freed before the bad one, then raise.

    Args:
        blocks_list: The blocks free_blocks was given.
        it: The iterator over ``blocks_list`` the loop stopped in (its remaining length
            locates the bad block k: blocks_list[:k] were decremented).
        exc: What stopped the loop: the ValueError of a double free (re-raised) or the
            AttributeError of an item that is not a block (raised as TypeError).
    """
    k = len(blocks_list) - operator.length_hint(it) - 1
    for block in blocks_list[:k]:
        block.ref_cnt += 1
    if isinstance(exc, ValueError):
        raise exc
    raise TypeError(
        f"free_blocks: item {k} is {type(blocks_list[k]).__name__} {blocks_list[k]!r}; "
        "allowed: KVCacheBlock"
    ) from None


def check_evict_block_ids(block_ids: Any, num_blocks: int) -> list[int]:
    """The ids as a list, each an int in [0, num_blocks) (TypeError / ValueError otherwise)."""
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
            raise ValueError(
                f"Invalid block_id {block_id}: out of range, allowed 0 <= block_id < {num_blocks}"
            )
    return ids


def check_cached_block_args(block_hash: Any, kv_cache_group_ids: Any) -> list[int]:
    """get_cached_block's group ids as plain ints, after checking both arguments.

    Called only when building the lookup keys failed (the fast path pays nothing): accepts
    int-likes (numpy integers), refuses anything else with a TypeError / ValueError naming
    what is allowed.
    """
    if not isinstance(block_hash, bytes):
        raise TypeError(
            "get_cached_block: block_hash must be bytes (a BlockHash, e.g. from "
            f"request.block_hashes), got {type(block_hash).__name__} {block_hash!r:.60}"
        )
    if (isinstance(kv_cache_group_ids, (str, bytes)) or not isinstance(kv_cache_group_ids, Iterable)
            or iter(kv_cache_group_ids) is kv_cache_group_ids):  # fmt: skip
        # NOTE: a one-shot iterator was partly consumed by the failed fast path: refuse it.
        raise TypeError(
            "get_cached_block: kv_cache_group_ids must be a list of int group ids "
            f"(0 <= id < 2**32), got {type(kv_cache_group_ids).__name__} "
            f"{kv_cache_group_ids!r:.60}"
        )
    ids = list(kv_cache_group_ids)
    for group_id in ids:
        if not is_int(group_id):
            raise TypeError(
                f"get_cached_block: kv_cache_group_ids must hold ints, got "
                f"{type(group_id).__name__} {group_id!r:.60}; allowed: 0 <= id < 2**32"
            )
        if not 0 <= group_id < MAX_GROUP_ID:
            raise ValueError(
                f"get_cached_block: kv_cache_group_id {group_id}; allowed 0 <= id < 2**32"
            )
    return [operator.index(g) for g in ids]
