"""Per-attention-type block managers and the spec -> manager lookup.

The classes live in ``kvlab.core.managers`` (one module per attention type); this module keeps
vLLM's module name and exports every name vLLM's module has.

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py
"""

from __future__ import annotations

from typing import Any

from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    TQFullAttentionSpec,
)
from kvlab.core.managers import (
    ChunkedLocalAttentionManager,
    CrossAttentionManager,
    FullAttentionManager,
    MambaManager,
    SingleTypeKVCacheManager,
    SinkFullAttentionManager,
    SlidingWindowManager,
)

__all__ = [
    "ChunkedLocalAttentionManager",
    "CrossAttentionManager",
    "FullAttentionManager",
    "MambaManager",
    "SingleTypeKVCacheManager",
    "SinkFullAttentionManager",
    "SlidingWindowManager",
    "get_manager_for_kv_cache_spec",
    "spec_manager_map",
]

# NOTE: looked up by exact type(spec), as in vLLM: a spec subclass missing here is rejected.
spec_manager_map: dict[type[KVCacheSpec], type[SingleTypeKVCacheManager]] = {
    FullAttentionSpec: FullAttentionManager,
    TQFullAttentionSpec: FullAttentionManager,
    MLAAttentionSpec: FullAttentionManager,
    HiddenStateCacheSpec: FullAttentionManager,
    SlidingWindowSpec: SlidingWindowManager,
    SlidingWindowMLASpec: SlidingWindowManager,
    ChunkedLocalAttentionSpec: ChunkedLocalAttentionManager,
    MambaSpec: MambaManager,
    CrossAttentionSpec: CrossAttentionManager,
    SinkFullAttentionSpec: SinkFullAttentionManager,
}


def get_manager_for_kv_cache_spec(
    kv_cache_spec: KVCacheSpec,
    max_num_batched_tokens: int,
    max_model_len: int,
    **kwargs: Any,
) -> SingleTypeKVCacheManager:
    """Build the manager for one KV cache group.

    Sliding-window and chunked-local managers get ``max_admission_blocks_per_request`` from
    their spec (the same bound the start-up pool sizer uses).

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::get_manager_for_kv_cache_spec

    Args:
        kv_cache_spec: The group's spec.
        max_num_batched_tokens: Scheduler token budget per step (tokens).
        max_model_len: Longest sequence (tokens).
        **kwargs: The manager's constructor arguments (block_pool, enable_caching,
            kv_cache_group_id, dcp_world_size, pcp_world_size).

    Returns:
        The manager.

    Raises:
        TypeError: ``type(kv_cache_spec)`` is not a key of ``spec_manager_map``.
    """
    manager_class = spec_manager_map.get(type(kv_cache_spec))
    if manager_class is None:
        allowed = ", ".join(sorted(t.__name__ for t in spec_manager_map))
        raise TypeError(
            f"no KV cache manager for spec type {type(kv_cache_spec).__name__}; known: {allowed}"
        )
    if isinstance(kv_cache_spec, (SlidingWindowSpec, ChunkedLocalAttentionSpec)):
        kwargs["max_admission_blocks_per_request"] = kv_cache_spec.max_admission_blocks_per_request(
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
        )
    return manager_class(kv_cache_spec, **kwargs)
