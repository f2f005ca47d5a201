"""KV cache coordinators (split out of vLLM's kv_cache_coordinator.py).

``kvlab.core.kv_cache_coordinator`` re-exports every name, as vLLM's module has them.
"""

from kvlab.core.coordinators.base import (
    KVCacheCoordinator,
    KVCacheCoordinatorNoPrefixCache,
    UnitaryKVCacheCoordinator,
)
from kvlab.core.coordinators.hybrid import HybridKVCacheCoordinator

__all__ = [
    "HybridKVCacheCoordinator",
    "KVCacheCoordinator",
    "KVCacheCoordinatorNoPrefixCache",
    "UnitaryKVCacheCoordinator",
]
