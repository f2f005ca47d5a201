"""The small lab every exercise module builds on: one full-attention KVCacheManager of tiny
blocks (1 KV head of size 1, float32), sha256 block hashes with a seeded NONE_HASH, and requests
whose block hashes are computed as vLLM's engine core computes them.

Exercise modules (``nb03`` ... ``quiz``) set up their notebook's exact scenario on it, so that an
answer key is computed by kvlab.core, never typed.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)


def seed_hashing() -> None:
    """Make NONE_HASH reproducible (PYTHONHASHSEED=0 unless the user set one) and hash with sha256.

    Mirrors: vllm/v1/core/kv_cache_utils.py::init_none_hash (NONE_HASH is random unless seeded).
    """
    os.environ.setdefault("PYTHONHASHSEED", "0")
    init_none_hash(sha256)


def full_attention_manager(num_blocks: int, block_size: int = 4, max_model_len: int = 128,
                           layer: str = "layer0") -> KVCacheManager:
    """A prefix-caching KVCacheManager of ``num_blocks`` blocks of ``block_size`` tokens, one group.

    Raises ValueError (from kvlab.core) for a non-positive size.
    """
    seed_hashing()
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype="float32")
    config = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec([layer], spec)])
    return KVCacheManager(config, max_model_len=max_model_len, hash_block_size=block_size)


def request_factory(block_size: int = 4, max_tokens: int = 8) -> Callable[..., Request]:
    """``make(request_id, prompt, **extra)`` building Requests hashed in blocks of ``block_size``."""
    hasher = get_request_block_hasher(block_size, sha256)

    def make(request_id: str, prompt: list[int], **extra) -> Request:
        return Request(request_id, prompt, SamplingParams(max_tokens=max_tokens), None,
                       block_hasher=hasher, **extra)  # fmt: skip

    return make


def admit(manager: KVCacheManager, req: Request) -> int:
    """Look ``req`` up, allocate its whole prompt and mark it computed, as one scheduler step would.

    Returns the hit length in tokens (a multiple of the block size). The allocation is assumed to
    fit (the exercises size their pools for it); a refusal raises RuntimeError.
    """
    hit_blocks, num_hit = manager.get_computed_blocks(req)
    if manager.allocate_slots(req, req.num_tokens - num_hit, num_hit, hit_blocks) is None:
        raise RuntimeError(f"the exercise's pool cannot hold request {req.request_id!r}")
    req.num_computed_tokens = req.num_tokens
    return num_hit
