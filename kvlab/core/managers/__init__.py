"""One SingleTypeKVCacheManager per attention type (split out of vLLM's single 1,200-line module).

``kvlab.core.single_type_kv_cache_manager`` re-exports every name, as vLLM's module has them.
"""

from kvlab.core.managers.base import SingleTypeKVCacheManager
from kvlab.core.managers.chunked_local import ChunkedLocalAttentionManager
from kvlab.core.managers.full_attention import (
    CrossAttentionManager,
    FullAttentionManager,
    SinkFullAttentionManager,
)
from kvlab.core.managers.mamba import MambaManager
from kvlab.core.managers.sliding_window import SlidingWindowManager

__all__ = [
    "ChunkedLocalAttentionManager",
    "CrossAttentionManager",
    "FullAttentionManager",
    "MambaManager",
    "SingleTypeKVCacheManager",
    "SinkFullAttentionManager",
    "SlidingWindowManager",
]
