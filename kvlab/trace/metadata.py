"""Trace metadata: what a viewer needs to know about the manager a trace was recorded from.

Stored in ``Trace.config`` and in the file header: pool size, the KV cache groups (spec kind,
block_size, sliding_window, attention_chunk_size, manager class), caching / EAGLE flags,
hash_block_size, the null block and the coordinator class.
"""

from __future__ import annotations

from typing import Any

__all__ = ["block_size_of_config", "manager_config"]


def manager_config(kv_cache_manager: Any) -> dict[str, Any]:
    """Trace metadata read from a live KVCacheManager.

    Args:
        kv_cache_manager: A kvlab.core KVCacheManager (only ``block_pool`` is required), or a
            bare BlockPool (then there are no groups).

    Returns:
        A JSON-serialisable dict (missing attributes become None / defaults).
    """
    pool = getattr(kv_cache_manager, "block_pool", kv_cache_manager)
    coordinator = getattr(kv_cache_manager, "coordinator", None)
    managers = getattr(coordinator, "single_type_managers", ())
    groups = []
    for gid, mgr in enumerate(managers):
        spec = mgr.kv_cache_spec
        groups.append(
            {
                "kv_cache_group_id": gid,
                "spec": type(spec).__name__,
                "manager": type(mgr).__name__,
                "block_size": int(spec.block_size),
                "sliding_window": getattr(spec, "sliding_window", None),
                "attention_chunk_size": getattr(spec, "attention_chunk_size", None),
            }
        )
    return {
        "num_gpu_blocks": len(pool.blocks),
        "num_groups": len(groups),
        "groups": groups,
        "enable_caching": bool(getattr(kv_cache_manager, "enable_caching", True)),
        "use_eagle": bool(getattr(kv_cache_manager, "use_eagle", False)),
        "max_model_len": getattr(kv_cache_manager, "max_model_len", None),
        "hash_block_size": getattr(pool, "hash_block_size", None),
        "null_block_id": pool.null_block.block_id if getattr(pool, "null_block", None) else None,
        "coordinator": type(coordinator).__name__ if coordinator is not None else None,
        "eagle_group_ids": sorted(getattr(coordinator, "eagle_group_ids", ()) or ()),
    }


def block_size_of_config(config: dict[str, Any]) -> int:
    """Group 0's block_size from trace metadata (tokens; hash_block_size, then 16 if absent).

    Args:
        config: ``Trace.config`` (``manager_config``'s dict) or the playground trace's config.
    """
    groups = config.get("groups") or [{}]
    return int(groups[0].get("block_size") or config.get("hash_block_size") or 16)
