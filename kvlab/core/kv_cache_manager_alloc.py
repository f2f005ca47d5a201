"""KVCacheManager.allocate_slots: the general path, and which configs may take the fast one.

``KVCacheManager.allocate_slots`` serves the common call (a request asking for its next
tokens without prefix-cache hits, external or encoder tokens) itself, with one cheap type test
per argument; every other call comes here: full validation (``kv_cache_manager_checks``), recorder brackets
and vLLM's stages, group by group through the coordinator.

Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlab.core import kv_cache_manager_checks as checks
from kvlab.core.coordinators.base import KVCacheCoordinatorNoPrefixCache, UnitaryKVCacheCoordinator
from kvlab.core.coordinators.hybrid import HybridKVCacheCoordinator
from kvlab.core.managers import (
    ChunkedLocalAttentionManager,
    FullAttentionManager,
    SinkFullAttentionManager,
    SlidingWindowManager,
)

if TYPE_CHECKING:
    from kvlab.core.kv_cache_blocks import KVCacheBlocks
    from kvlab.core.kv_cache_coordinator import KVCacheCoordinator
    from kvlab.core.kv_cache_manager import KVCacheManager
    from kvlab.core.request import Request
    from kvlab.core.single_type_kv_cache_manager import SingleTypeKVCacheManager

__all__ = ["allocate_slots_general", "fast_path_layout"]

# Managers whose running-request allocation is the base class's (no Mamba state moves, no
# encoder tokens); the windowed ones free out-of-window blocks in remove_skipped_blocks.
_PLAIN_MANAGERS = (FullAttentionManager, SinkFullAttentionManager)
_WINDOWED_MANAGERS = (SlidingWindowManager, ChunkedLocalAttentionManager)
_FAST_COORDINATORS = (
    UnitaryKVCacheCoordinator,
    HybridKVCacheCoordinator,
    KVCacheCoordinatorNoPrefixCache,
)


def fast_path_layout(
    coordinator: KVCacheCoordinator,
) -> tuple[tuple[tuple[SingleTypeKVCacheManager, int], ...] | None, tuple, int]:
    """What ``allocate_slots``'s fast path needs to know about the groups.

    Returns:
        ``(groups, windowed, alignment)``: ``(manager, block_size)`` per group, or None when
        some group or the coordinator is of a kind the fast path does not serve (exact types:
        subclasses may change the rules); the managers that free out-of-window blocks; the
        token alignment ``cache_blocks`` applies (the hybrid coordinator's LCM, else 1).
    """
    managers = coordinator.single_type_managers
    eligible = type(coordinator) in _FAST_COORDINATORS and all(
        type(m) in _PLAIN_MANAGERS or type(m) in _WINDOWED_MANAGERS for m in managers
    )
    groups = tuple((m, m.block_size) for m in managers) if eligible else None
    windowed = tuple(m for m in managers if type(m) in _WINDOWED_MANAGERS)
    alignment = getattr(coordinator, "lcm_block_size", 1)
    return groups, windowed, alignment


def allocate_slots_general(
    mgr: KVCacheManager,
    request: Request,
    num_new_tokens: int,
    num_new_computed_tokens: int,
    new_computed_blocks: KVCacheBlocks | None,
    num_lookahead_tokens: int,
    num_external_computed_tokens: int,
    delay_cache_blocks: bool,
    num_encoder_tokens: int,
    full_sequence_must_fit: bool,
) -> KVCacheBlocks | None:
    """``mgr.allocate_slots`` for every case: validation, recorder brackets, all stages.

    Mirrors: vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots (see
    ``KVCacheManager.allocate_slots`` for the arguments, the stages and the errors).
    """
    new_computed_block_list = checks.check_allocate_slots(
        mgr, request, num_new_tokens, num_new_computed_tokens, num_lookahead_tokens,
        num_external_computed_tokens, num_encoder_tokens, new_computed_blocks,
        delay_cache_blocks,
    )  # fmt: skip
    rec = mgr.recorder
    if rec is not None:
        args = (request.num_computed_tokens, num_new_computed_tokens,
                num_external_computed_tokens, num_new_tokens, num_lookahead_tokens,
                num_encoder_tokens, bool(delay_cache_blocks),
                bool(full_sequence_must_fit))  # fmt: skip
        rec.begin_call("allocate_slots", request.request_id, tuple(int(a) for a in args))
    coordinator = mgr.coordinator
    request_id = request.request_id
    num_local_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
    total_computed_tokens = min(
        num_local_computed_tokens + num_external_computed_tokens, mgr.max_model_len
    )
    if full_sequence_must_fit:
        full_num_tokens = min(request.num_tokens, mgr.max_model_len)
        num_blocks_to_allocate = coordinator.get_num_blocks_to_allocate(
            request_id, full_num_tokens, new_computed_block_list, num_encoder_tokens,
            total_computed_tokens, full_num_tokens, apply_admission_cap=True,
        )  # fmt: skip
        if num_blocks_to_allocate > mgr.block_pool.get_num_free_blocks():
            if rec is not None:
                rec.end_call("allocate_slots", (0, num_blocks_to_allocate))
            return None
    num_tokens_main_model = total_computed_tokens + num_new_tokens
    num_tokens_need_slot = min(num_tokens_main_model + num_lookahead_tokens, mgr.max_model_len)
    # Free out-of-window blocks first: fewer cached blocks get evicted below. (Where the
    # fast-path layout is known, only the windowed groups can have anything to free.)
    if mgr._fast_groups is None:
        coordinator.remove_skipped_blocks(request_id, total_computed_tokens)
    else:
        for manager in mgr._windowed_managers:
            manager.remove_skipped_blocks(request_id, total_computed_tokens)
    num_blocks_to_allocate = coordinator.get_num_blocks_to_allocate(
        request_id, num_tokens_need_slot, new_computed_block_list, num_encoder_tokens,
        num_local_computed_tokens + num_external_computed_tokens, num_tokens_main_model,
    )  # fmt: skip
    if num_blocks_to_allocate > mgr.block_pool.get_num_free_blocks():
        if rec is not None:
            rec.end_call("allocate_slots", (0, num_blocks_to_allocate))
        return None
    if (
        new_computed_block_list is not mgr.empty_kv_cache_blocks.blocks
        or num_external_computed_tokens > 0
    ):
        # Hits are attached before the new blocks, so a later failure cannot lose them.
        coordinator.allocate_new_computed_blocks(
            request_id, new_computed_block_list, num_local_computed_tokens,
            num_external_computed_tokens,
        )  # fmt: skip
    new_blocks = coordinator.allocate_new_blocks(
        request_id, num_tokens_need_slot, num_tokens_main_model, num_encoder_tokens
    )
    if mgr.enable_caching and not delay_cache_blocks:
        # Only finalized tokens are cached: drafts beyond request.num_tokens may be rejected.
        coordinator.cache_blocks(
            request, min(total_computed_tokens + num_new_tokens, request.num_tokens)
        )
    if rec is not None:
        rec.end_call("allocate_slots", (1, num_blocks_to_allocate))
    return mgr.create_kv_cache_blocks(new_blocks)
