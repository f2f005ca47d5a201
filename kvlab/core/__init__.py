"""kvlab.core: a faithful, instrumented re-implementation of vLLM 0.22.1's V1 KV-cache manager.

Mirrors ``vllm/v1/core`` module for module (KVCacheManager → KVCacheCoordinator →
SingleTypeKVCacheManager → BlockPool, plus the scheduler in ``kvlab.core.sched``). Pure Python:
the standard library, xxhash and cbor2. Instrumentation enters through one recorder
(``kvlab.core.recorder.KVRecorder``; None = off).

Examples:
    >>> from kvlab.core import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager,
    ...                         Request, SamplingParams, get_request_block_hasher, init_none_hash, sha256)
    >>> init_none_hash(sha256)
    >>> spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    >>> cfg = KVCacheConfig(num_blocks=8, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)])
    >>> mgr = KVCacheManager(cfg, max_model_len=64, hash_block_size=4)
    >>> req = Request("r0", list(range(10)), SamplingParams(max_tokens=4), None,
    ...               block_hasher=get_request_block_hasher(4, sha256))
    >>> blocks, num_hit = mgr.get_computed_blocks(req)
    >>> mgr.allocate_slots(req, 10, num_hit, blocks).get_block_ids()
    ([1, 2, 3],)
"""

from kvlab.core.block_pool import BlockHashToBlockMap, BlockPool
from kvlab.core.config import VllmConfig
from kvlab.core.kv_cache_coordinator import (
    HybridKVCacheCoordinator,
    KVCacheCoordinator,
    KVCacheCoordinatorNoPrefixCache,
    UnitaryKVCacheCoordinator,
    get_kv_cache_coordinator,
)
from kvlab.core.kv_cache_interface import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVCacheTensor,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from kvlab.core.kv_cache_utils import (
    BlockHashListWithBlockSize,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    get_kv_cache_config,
    get_kv_cache_configs,
    get_kv_cache_groups,
    get_num_blocks,
    get_request_block_hasher,
    hash_block_tokens,
    init_none_hash,
    max_memory_usage_bytes,
    sha256,
    sha256_cbor,
    unify_kv_cache_spec_page_size,
)
from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
from kvlab.core.metrics import PrefixCacheStats
from kvlab.core.recorder import KVRecorder
from kvlab.core.request import Request
from kvlab.core.request_params import (
    LoRARequest,
    MultiModalFeatureSpec,
    PlaceholderRange,
    SamplingParams,
)
from kvlab.core.single_type_kv_cache_manager import (
    ChunkedLocalAttentionManager,
    CrossAttentionManager,
    FullAttentionManager,
    MambaManager,
    SingleTypeKVCacheManager,
    SinkFullAttentionManager,
    SlidingWindowManager,
)

__all__ = [
    "AllBlocksCleared", "AttentionSpec", "BlockHashListWithBlockSize", "BlockHashToBlockMap",
    "BlockPool", "BlockRemoved", "BlockStored", "ChunkedLocalAttentionManager",
    "ChunkedLocalAttentionSpec", "CrossAttentionManager", "CrossAttentionSpec",
    "FreeKVCacheBlockQueue", "FullAttentionManager", "FullAttentionSpec",
    "HybridKVCacheCoordinator", "KVCacheBlock", "KVCacheBlocks", "KVCacheConfig",
    "KVCacheCoordinator", "KVCacheCoordinatorNoPrefixCache", "KVCacheGroupSpec",
    "KVCacheManager", "KVCacheSpec", "KVCacheTensor", "KVEventBatch", "KVRecorder",
    "LoRARequest", "MLAAttentionSpec", "MambaManager", "MambaSpec", "MultiModalFeatureSpec",
    "PlaceholderRange", "PrefixCacheStats", "Request", "SamplingParams", "SingleTypeKVCacheManager",
    "SinkFullAttentionManager", "SinkFullAttentionSpec", "SlidingWindowManager",
    "SlidingWindowSpec", "UnitaryKVCacheCoordinator", "VllmConfig", "get_kv_cache_coordinator",
    "get_kv_cache_config", "get_kv_cache_configs", "get_kv_cache_groups", "get_num_blocks", "get_request_block_hasher", "hash_block_tokens", "init_none_hash",
    "max_memory_usage_bytes", "sha256", "sha256_cbor", "unify_kv_cache_spec_page_size",
]
