"""KV-cache utilities under vLLM's module name: blocks, the free queue, hashing, sizing.

Mirrors: vllm/v1/core/kv_cache_utils.py, split by concept (vLLM's file is 2,100 lines):

===========================  ==============================================================
``kvlab.core.hashing``       sha256, sha256_cbor, xxhash, xxhash_cbor, get_hash_fn_by_name
``kvlab.core.block_hash``    BlockHash, BlockHashWithGroupId, NONE_HASH, init_none_hash,
                             extra keys, hash_block_tokens, get_request_block_hasher,
                             BlockHashListWithBlockSize
``kvlab.core.kv_cache_block``  KVCacheBlock, FreeKVCacheBlockQueue
``kvlab.core.kv_cache_sizing``  get_num_blocks, get_kv_cache_groups, get_kv_cache_config, ...
``kvlab.core.kv_cache_sizing_workers``  get_kv_cache_configs, generate_scheduler_kv_cache_config
===========================  ==============================================================

Everything is importable from here by vLLM's names. ``kv_cache_utils.NONE_HASH`` always reads
the current value set by ``init_none_hash`` (``from kvlab.core.kv_cache_utils import NONE_HASH``
copies the value at import time, as in vLLM).
"""

from __future__ import annotations

from typing import Any

from kvlab.core import block_hash as _block_hash
from kvlab.core.block_hash import (
    BlockHash,
    BlockHashList,
    BlockHashListWithBlockSize,
    BlockHashWithGroupId,
    ExternalBlockHash,
    generate_block_hash_extra_keys,
    get_block_hash,
    get_group_id,
    get_request_block_hasher,
    hash_block_tokens,
    init_none_hash,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
    need_extra_keys,
    tensor_data,
)
from kvlab.core.hashing import get_hash_fn_by_name, sha256, sha256_cbor, xxhash, xxhash_cbor
from kvlab.core.kv_cache_block import FreeKVCacheBlockQueue, KVCacheBlock
from kvlab.core.kv_cache_sizing_workers import (
    estimate_max_model_len_from_groups,
    generate_scheduler_kv_cache_config,
    max_memory_usage_bytes_from_groups,
    get_kv_cache_configs,
    project_kv_cache_groups_to_worker,
)
from kvlab.core.kv_cache_sizing import (
    check_enough_kv_cache_memory,
    create_kv_cache_group_specs,
    estimate_max_model_len,
    get_kv_cache_config,
    get_kv_cache_config_from_groups,
    get_kv_cache_groups,
    get_max_concurrency_for_kv_cache_config,
    get_num_blocks,
    get_uniform_page_size,
    is_kv_cache_page_size_uniform,
    is_kv_cache_spec_uniform,
    is_kv_cache_type_attention_free,
    max_memory_usage_bytes,
    may_override_num_blocks,
    resolve_kv_cache_block_sizes,
    unify_hybrid_kv_cache_specs,
    unify_kv_cache_spec_page_size,
)

__all__ = [
    "BlockHash",
    "BlockHashList",
    "BlockHashListWithBlockSize",
    "BlockHashWithGroupId",
    "ExternalBlockHash",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "check_enough_kv_cache_memory",
    "create_kv_cache_group_specs",
    "estimate_max_model_len",
    "estimate_max_model_len_from_groups",
    "generate_block_hash_extra_keys",
    "generate_scheduler_kv_cache_config",
    "get_kv_cache_configs",
    "project_kv_cache_groups_to_worker",
    "get_block_hash",
    "get_group_id",
    "get_hash_fn_by_name",
    "get_kv_cache_config",
    "get_kv_cache_config_from_groups",
    "get_kv_cache_groups",
    "get_max_concurrency_for_kv_cache_config",
    "get_num_blocks",
    "get_request_block_hasher",
    "get_uniform_page_size",
    "hash_block_tokens",
    "init_none_hash",
    "is_kv_cache_page_size_uniform",
    "is_kv_cache_spec_uniform",
    "is_kv_cache_type_attention_free",
    "make_block_hash_with_group_id",
    "max_memory_usage_bytes",
    "max_memory_usage_bytes_from_groups",
    "may_override_num_blocks",
    "maybe_convert_block_hash",
    "need_extra_keys",
    "resolve_kv_cache_block_sizes",
    "sha256",
    "sha256_cbor",
    "tensor_data",
    "unify_hybrid_kv_cache_specs",
    "unify_kv_cache_spec_page_size",
    "xxhash",
    "xxhash_cbor",
]


# vLLM's private names for the worker projection and the group-based sizing (its tests import them).
_project_kv_cache_groups_to_worker = project_kv_cache_groups_to_worker
_max_memory_usage_bytes_from_groups = max_memory_usage_bytes_from_groups
_estimate_max_model_len_from_groups = estimate_max_model_len_from_groups


def __getattr__(name: str) -> Any:
    # NOTE: NONE_HASH lives in kvlab.core.block_hash (where hash_block_tokens reads it);
    # forwarding keeps ``kv_cache_utils.NONE_HASH`` current after init_none_hash().
    if name == "NONE_HASH":
        return _block_hash._get_none_hash()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
