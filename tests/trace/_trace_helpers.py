"""Builders shared by the kvlab.trace tests (not a test module).

A tiny driver plays the scheduler's part against a real KVCacheManager: ``admit`` (lookup +
allocate_slots), ``decode`` (one token), ``preempt`` (free + num_computed_tokens = 0) and
``finish`` (free).
"""

from __future__ import annotations

from typing import Any

from kvlab.core.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request, SamplingParams

BLOCK_SIZE = 4


def full_spec(block_size: int = BLOCK_SIZE) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype="float32")


def sw_spec(sliding_window: int, block_size: int = BLOCK_SIZE) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=block_size,
        num_kv_heads=1,
        head_size=1,
        dtype="float32",
        sliding_window=sliding_window,
    )


def make_manager(
    num_blocks: int, hybrid: bool = False, sliding_window: int = 8, **kw: Any
) -> KVCacheManager:
    """A KVCacheManager: one full-attention group, or full + sliding window (hybrid)."""
    specs = [full_spec()] + ([sw_spec(sliding_window)] if hybrid else [])
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    cfg = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    kw.setdefault("max_model_len", 4096)
    return KVCacheManager(cfg, hash_block_size=BLOCK_SIZE, **kw)


_HASHER = get_request_block_hasher(BLOCK_SIZE, sha256)


def make_request(request_id: str, tokens: list[int]) -> Request:
    """A request hashed at BLOCK_SIZE (call ``init_none_hash(sha256)`` first)."""
    return Request(
        request_id, list(tokens), SamplingParams(max_tokens=1000), None, block_hasher=_HASHER
    )


def init_hashing() -> None:
    init_none_hash(sha256)


def admit(manager: KVCacheManager, req: Request, num_new_tokens: int | None = None) -> bool:
    """Prefix lookup + allocate_slots for a waiting request; True when admitted."""
    blocks, num_hit = manager.get_computed_blocks(req)
    n = req.num_tokens - num_hit if num_new_tokens is None else num_new_tokens
    if n <= 0:
        n = 1
    if manager.allocate_slots(req, n, num_hit, blocks) is None:
        return False
    req.num_computed_tokens = num_hit + n
    return True


def decode(manager: KVCacheManager, req: Request, token: int) -> bool:
    """Append one sampled token and allocate its slot; True when it fit."""
    if req.num_computed_tokens < req.num_tokens:
        n = req.num_tokens - req.num_computed_tokens
    else:
        req.append_output_token_ids(token)
        n = 1
    if manager.allocate_slots(req, n) is None:
        return False
    req.num_computed_tokens += n
    return True


def preempt(manager: KVCacheManager, req: Request) -> None:
    manager.free(req)
    req.num_computed_tokens = 0
