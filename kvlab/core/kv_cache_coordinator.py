"""KV cache coordinators and the factory that picks one.

The classes live in ``kvlab.core.coordinators``; this module keeps vLLM's module name.

Mirrors: vllm/v1/core/kv_cache_coordinator.py
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlab.core.coordinators import (
    HybridKVCacheCoordinator,
    KVCacheCoordinator,
    KVCacheCoordinatorNoPrefixCache,
    UnitaryKVCacheCoordinator,
)

if TYPE_CHECKING:
    from kvlab.core.kv_cache_interface import KVCacheConfig
    from kvlab.core.kv_cache_metrics import KVCacheMetricsCollector

__all__ = [
    "HybridKVCacheCoordinator",
    "KVCacheCoordinator",
    "KVCacheCoordinatorNoPrefixCache",
    "UnitaryKVCacheCoordinator",
    "get_kv_cache_coordinator",
]


def get_kv_cache_coordinator(
    kv_cache_config: KVCacheConfig,
    max_model_len: int,
    max_num_batched_tokens: int,
    use_eagle: bool,
    enable_caching: bool,
    enable_kv_cache_events: bool,
    dcp_world_size: int,
    pcp_world_size: int,
    hash_block_size: int,
    metrics_collector: KVCacheMetricsCollector | None = None,
) -> KVCacheCoordinator:
    """Caching off -> no-prefix-cache; one group -> unitary; otherwise hybrid.

    Mirrors: vllm/v1/core/kv_cache_coordinator.py::get_kv_cache_coordinator

    Args: as ``KVCacheCoordinator``.

    Returns:
        The coordinator (it owns the new BlockPool and managers).

    Raises:
        ValueError: The chosen coordinator rejects the configuration.
    """
    kwargs = {
        "dcp_world_size": dcp_world_size,
        "pcp_world_size": pcp_world_size,
        "hash_block_size": hash_block_size,
        "metrics_collector": metrics_collector,
    }
    if not enable_caching:
        return KVCacheCoordinatorNoPrefixCache(
            kv_cache_config,
            max_model_len,
            max_num_batched_tokens,
            use_eagle,
            enable_kv_cache_events,
            **kwargs,
        )
    coordinator_cls = (
        UnitaryKVCacheCoordinator
        if len(kv_cache_config.kv_cache_groups) == 1
        else HybridKVCacheCoordinator
    )
    return coordinator_cls(
        kv_cache_config,
        max_model_len,
        max_num_batched_tokens,
        use_eagle,
        enable_caching,
        enable_kv_cache_events,
        **kwargs,
    )
