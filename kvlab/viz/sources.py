"""Where in vLLM 0.22.1 each trace event comes from: the file and function a view mirrors.

The player shows it under the caption as a link to the file on GitHub at tag ``v0.22.1``.
Calls (CALL_BEGIN / CALL_END) point at the KVCacheManager method they bracket; nano-vllm's
calls (allocate, deallocate, may_append) have no vLLM source and get none.

Examples:
    >>> vllm_source("TOUCH")
    'vllm/v1/core/block_pool.py::BlockPool.touch'
    >>> vllm_source("CALL_BEGIN", "allocate_slots")
    'vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots'
    >>> vllm_source_url("vllm/v1/core/block_pool.py::BlockPool.touch")
    'https://github.com/vllm-project/vllm/blob/v0.22.1/vllm/v1/core/block_pool.py'
"""

from __future__ import annotations

__all__ = ["VLLM_CALL_SOURCES", "VLLM_SOURCES", "VLLM_TAG", "vllm_source", "vllm_source_url"]

VLLM_TAG = "v0.22.1"
_CORE = "vllm/v1/core/"
_QUEUE = _CORE + "kv_cache_utils.py::FreeKVCacheBlockQueue."
_POOL = _CORE + "block_pool.py::BlockPool."
_SINGLE = _CORE + "single_type_kv_cache_manager.py::SingleTypeKVCacheManager."

VLLM_SOURCES: dict[str, str] = {
    "STEP": _CORE + "sched/scheduler.py::Scheduler.schedule",
    "POPLEFT": _QUEUE + "popleft",
    "POPLEFT_N": _QUEUE + "popleft_n",
    "REMOVE": _QUEUE + "remove",
    "APPEND": _QUEUE + "append",
    "APPEND_N": _QUEUE + "append_n",
    "GET_NEW_BLOCKS": _POOL + "get_new_blocks",
    "TOUCH": _POOL + "touch",
    "FREE_BLOCKS": _POOL + "free_blocks",
    "BLOCK_STORED": _POOL + "cache_full_blocks",
    "BLOCK_REMOVED": _POOL + "_maybe_evict_cached_block",
    "ALL_BLOCKS_CLEARED": _POOL + "reset_prefix_cache",
    "LOOKED_UP": _POOL + "get_cached_block",
    "FIXED_POINT_ITERATED": _CORE + "kv_cache_coordinator.py::HybridKVCacheCoordinator.find_longest_cache_hit",
    "REQ_BLOCKS_ADDED": _SINGLE + "allocate_new_blocks",
    "REQ_BLOCKS_NULLED": _SINGLE + "remove_skipped_blocks",
    "REQ_FREED": _SINGLE + "free",
}
"""EventKind name -> ``file::Class.function`` in vLLM 0.22.1 (not CALL_BEGIN / CALL_END)."""

VLLM_CALL_SOURCES: dict[str, str] = {
    name: _CORE + "kv_cache_manager.py::KVCacheManager." + name
    for name in ("get_computed_blocks", "allocate_slots", "free", "remove_skipped_blocks",
                 "evict_blocks", "reset_prefix_cache", "cache_blocks", "new_step_starts")
}  # fmt: skip
"""Call name -> the KVCacheManager method a CALL_BEGIN / CALL_END pair brackets."""


def vllm_source(kind: str, call_name: str | None = None) -> str | None:
    """The vLLM 0.22.1 source an event mirrors, ``file::Class.function``; None if it has none.

    Args:
        kind: An EventKind name.
        call_name: The call's name, for CALL_BEGIN / CALL_END.

    Raises:
        ValueError: If ``kind`` is not an EventKind name.
    """
    if kind in ("CALL_BEGIN", "CALL_END"):
        return VLLM_CALL_SOURCES.get(call_name or "")
    if kind not in VLLM_SOURCES:
        raise ValueError(f"unknown event kind {kind!r}; kinds are {sorted(VLLM_SOURCES)} "
                         "and CALL_BEGIN / CALL_END")  # fmt: skip
    return VLLM_SOURCES[kind]


def vllm_source_url(source: str) -> str:
    """The GitHub page of ``source``'s file at tag v0.22.1."""
    return f"https://github.com/vllm-project/vllm/blob/{VLLM_TAG}/{source.split('::')[0]}"
