"""Input checks for KVCacheManager: reject bad caller input before anything changes.

vLLM asserts these conditions (or fails half-way through an allocation, after some groups
already changed). kvlab checks them up front and raises a ValueError / TypeError / KeyError
naming the problem. None of these checks rejects input on which vLLM decides normally.

NOTE: these run once per API call, at the boundary, never in inner loops. Counts are checked
with ``type(v) is int`` first (tens of ns); only other types take the ``numbers.Integral``
ABC check (numpy integers are accepted, bool is not).
"""

from __future__ import annotations

from numbers import Integral
from typing import TYPE_CHECKING, Any

from kvlab.core.block_pool_checks import check_evict_block_ids
from kvlab.core.kv_cache_blocks import KVCacheBlocks
from kvlab.core.kv_cache_interface import CrossAttentionSpec
from kvlab.core.request import Request

if TYPE_CHECKING:
    from kvlab.core.kv_cache_manager import KVCacheManager

__all__ = [
    "check_allocate_slots",
    "check_block_ids",
    "check_cache_blocks",
    "check_count",
    "check_hashes_cover",
    "check_manager_config",
    "check_request",
]

# What each call reads of a request (a Request has them all; test doubles may have fewer).
_REQUEST_ATTRS = {
    "allocate_slots": ("request_id", "num_tokens", "num_computed_tokens", "block_hashes"),
    "cache_blocks": ("request_id", "num_tokens", "block_hashes"),
    "free": ("request_id",),
    "get_computed_blocks": ("request_id", "num_tokens", "block_hashes"),
}


def _is_int(value: Any) -> bool:
    # Integral admits numpy integers (a worker may report ids as np.int64); bool is refused.
    if type(value) is int:
        return True
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_request(request: Any, call: str) -> None:
    """Raise unless ``request`` is a Request (or has what ``call`` reads of one).

    Args:
        request: What the caller passed.
        call: The API call's name (a key of ``_REQUEST_ATTRS``), for the message.

    Raises:
        TypeError: ``request`` is None, a str, a number, or anything else without the
            attributes ``call`` reads (``request_id``, ``num_tokens``, ...).
    """
    if isinstance(request, Request):
        return
    attrs = _REQUEST_ATTRS[call]
    if not isinstance(request, (str, bytes, int, float, type(None))) and all(
        hasattr(request, name) for name in attrs
    ):
        return  # duck-typed (e.g. a test double with a Request's attributes)
    raise TypeError(
        f"{call}: request must be a Request (kvlab.core.request.Request, or an object with "
        f"{', '.join(attrs)}), got {type(request).__name__} {request!r:.80}"
    )


def check_count(name: str, value: Any) -> None:
    """Raise unless ``value`` is an int >= 0.

    Raises:
        TypeError: Not an int (bool is rejected too).
        ValueError: Negative.
    """
    if type(value) is not int and not _is_int(value):
        raise TypeError(f"{name} must be an int >= 0, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _check_positive(name: str, value: Any) -> None:
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def check_manager_config(
    kv_cache_config: Any,
    max_model_len: Any,
    hash_block_size: Any,
    max_num_batched_tokens: Any,
    enable_caching: bool,
) -> None:
    """Check KVCacheManager's constructor arguments.

    Raises:
        ValueError: A size is not an int >= 1, or caching is on with a cross-attention group
            (vLLM would fail at the first lookup or allocation).
        TypeError: ``kv_cache_config`` has no ``kv_cache_groups`` / ``num_blocks``.
    """
    if not hasattr(kv_cache_config, "kv_cache_groups") or not hasattr(
        kv_cache_config, "num_blocks"
    ):
        raise TypeError(
            f"kv_cache_config must be a KVCacheConfig, got {type(kv_cache_config).__name__}"
        )
    _check_positive("max_model_len", max_model_len)
    _check_positive("hash_block_size", hash_block_size)
    if max_num_batched_tokens is not None:
        _check_positive("max_num_batched_tokens", max_num_batched_tokens)
    groups = kv_cache_config.kv_cache_groups
    if enable_caching and any(isinstance(g.kv_cache_spec, CrossAttentionSpec) for g in groups):
        raise ValueError("cross attention (encoder-decoder) needs enable_caching=False")


def check_block_ids(block_ids: Any, num_gpu_blocks: int) -> list[int]:
    """The ids as a list, in iteration order, after checking each is in ``[0, num_gpu_blocks)``.

    The same rule as BlockPool.evict_blocks (``block_pool_checks.check_evict_block_ids``).

    Raises:
        TypeError: ``block_ids`` is not an iterable of ints (None, an int, a str ...).
        ValueError: An id is out of range.
    """
    return check_evict_block_ids(block_ids, num_gpu_blocks)


def _check_hit_blocks(
    mgr: KVCacheManager,
    request_id: str,
    blocks: tuple,
    num_new_computed_tokens: int,
    attaches: bool = False,
) -> None:
    """Hit blocks must fit the groups, the request's state and the config (one pass).

    With ``attaches`` the attach rule of ``_check_attach`` is checked in the same pass (its
    error comes after every hit-block error, as when checked separately).

    NOTE: the blocks are not checked against ``num_new_computed_tokens`` beyond "no blocks
    -> no hit tokens": vLLM's own hybrid lookup can return group lists of other lengths
    (a second full-attention attention group is never truncated; EAGLE with Mamba returns a
    hit longer than the full-attention blocks), and kvlab must accept what vLLM accepts.
    """
    coordinator = mgr.coordinator
    managers = coordinator.single_type_managers
    if len(blocks) != mgr.num_kv_cache_groups:
        raise ValueError(
            f"new_computed_blocks has {len(blocks)} groups; "
            f"the manager has {mgr.num_kv_cache_groups}"
        )
    has_hits = False
    for group in blocks:
        if len(group):
            has_hits = True
            break
    if has_hits and not mgr.enable_caching:
        raise ValueError("prefix caching is disabled: new_computed_blocks must be empty")
    if num_new_computed_tokens > 0 and not has_hits and managers:
        raise ValueError(
            f"num_new_computed_tokens={num_new_computed_tokens} needs the hit blocks "
            "(pass new_computed_blocks from get_computed_blocks)"
        )
    holding_group = None
    for manager, group, cross in zip(managers, blocks, coordinator.cross_attention_flags):
        running = request_id in manager.num_cached_block
        if len(group):
            if cross:
                raise ValueError("cross-attention groups never have prefix-cache hits")
            if running:
                raise ValueError(
                    f"request {request_id!r} is running; prefix-cache hits go only to new "
                    "requests"
                )
        if (
            attaches
            and holding_group is None
            and not cross
            and not running
            and manager.req_to_blocks.get(request_id)
        ):
            holding_group = manager.kv_cache_group_id
    if holding_group is not None:
        raise _holds_blocks(request_id, holding_group)


def _holds_blocks(request_id: str, group_id: int) -> ValueError:
    return ValueError(
        f"request {request_id!r} already holds blocks in group {group_id}; prefix-cache hits "
        "and external tokens are attached only to new requests"
    )


def _check_attach(mgr: KVCacheManager, request_id: str, attaches: bool) -> None:
    """A request that gets hits/external blocks attached must be running or hold nothing."""
    if not attaches:
        return
    coordinator = mgr.coordinator
    for manager, cross in zip(coordinator.single_type_managers, coordinator.cross_attention_flags):
        if cross or request_id in manager.num_cached_block:
            continue
        if manager.req_to_blocks.get(request_id):
            raise _holds_blocks(request_id, manager.kv_cache_group_id)


def check_hashes_cover(mgr: KVCacheManager, request: Request, num_tokens: int) -> None:
    """Caching ``num_tokens`` tokens needs the block hashes of the blocks not cached yet.

    Raises:
        ValueError: Some group would cache a block the request has no hash for.
    """
    coordinator = mgr.coordinator
    lcm = getattr(coordinator, "lcm_block_size", None)
    if lcm is not None:
        num_tokens = num_tokens // lcm * lcm
    num_hashed_tokens = len(request.block_hashes) * mgr.hash_block_size
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


def check_cache_blocks(mgr: KVCacheManager, request: Request, num_computed_tokens: int) -> None:
    """``cache_blocks`` may only cover blocks the request holds and has hashes for.

    Raises:
        ValueError: Otherwise.
    """
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
    check_hashes_cover(mgr, request, num_computed_tokens)


def check_allocate_slots(
    mgr: KVCacheManager,
    request: Any,
    num_new_tokens: Any,
    num_new_computed_tokens: Any,
    num_lookahead_tokens: Any,
    num_external_computed_tokens: Any,
    num_encoder_tokens: Any,
    new_computed_blocks: KVCacheBlocks | None,
    delay_cache_blocks: bool,
) -> tuple:
    """Check ``allocate_slots``'s arguments; return the hit blocks as a tuple per group.

    Raises:
        TypeError: ``request`` is not a Request, a count is not an int, or
            ``new_computed_blocks`` is not KVCacheBlocks.
        ValueError: See ``KVCacheManager.allocate_slots``.
    """
    if type(request) is not Request:
        check_request(request, "allocate_slots")
    if (
        type(num_new_tokens) is not int
        or type(num_new_computed_tokens) is not int
        or type(num_lookahead_tokens) is not int
        or type(num_external_computed_tokens) is not int
        or type(num_encoder_tokens) is not int
        # For ints, a bitwise or is negative iff one of them is.
        or (
            num_new_tokens
            | num_new_computed_tokens
            | num_lookahead_tokens
            | num_external_computed_tokens
            | num_encoder_tokens
        )
        < 0
    ):
        check_count("num_new_tokens", num_new_tokens)
        check_count("num_new_computed_tokens", num_new_computed_tokens)
        check_count("num_lookahead_tokens", num_lookahead_tokens)
        check_count("num_external_computed_tokens", num_external_computed_tokens)
        check_count("num_encoder_tokens", num_encoder_tokens)
    if num_new_tokens == 0 and num_external_computed_tokens == 0:
        raise ValueError("num_new_tokens must be > 0 when there are no external computed tokens")
    empty = mgr.empty_kv_cache_blocks
    if new_computed_blocks is None or new_computed_blocks is empty:
        blocks = empty.blocks
        # No hits: only "hit tokens without hit blocks" and the attach rule can fail.
        if num_new_computed_tokens > 0 and mgr.num_kv_cache_groups:
            _check_hit_blocks(mgr, request.request_id, blocks, num_new_computed_tokens)
        if num_external_computed_tokens > 0:
            _check_attach(mgr, request.request_id, True)
    elif isinstance(new_computed_blocks, KVCacheBlocks):
        blocks = new_computed_blocks.blocks
        _check_hit_blocks(
            mgr, request.request_id, blocks, num_new_computed_tokens,
            blocks is not empty.blocks or num_external_computed_tokens > 0,
        )  # fmt: skip
    else:
        raise TypeError(
            "new_computed_blocks must be KVCacheBlocks or None, "
            f"got {type(new_computed_blocks).__name__}"
        )
    if mgr.enable_caching and not delay_cache_blocks:
        num_computed = min(
            request.num_computed_tokens + num_new_computed_tokens + num_external_computed_tokens,
            mgr.max_model_len,
        )
        num_tokens = min(num_computed + num_new_tokens, request.num_tokens)
        # Every group's block size is a multiple of hash_block_size: enough hashes for
        # num_tokens cover every group; only otherwise look closer (blocks cached already).
        if num_tokens // mgr.hash_block_size > len(request.block_hashes):
            check_hashes_cover(mgr, request, num_tokens)
    return blocks
