"""Boundary cases that tell vLLM's off-by-one choices apart, with vLLM 0.22.1's exact answers.

Windows that are block multiples hide the difference between ``cdiv(sliding_window - 1, bs)`` and
``cdiv(sliding_window, bs)``; a window of 5 with blocks of 2 or 4 does not. ``boundary_outcomes``
takes the classes by name from a namespace, so the same scenarios run against vLLM: the expected
values below are what vLLM 0.22.1 returned for them (``python tests/core/test_boundaries.py`` in the
oracle environment prints them).
"""
from __future__ import annotations

import os
from types import SimpleNamespace

T, F = True, False


def _hashes(n):
    return [f"h{i}".encode() for i in range(n)]


def _pool(ns, num_blocks, block_size):
    return ns.BlockPool(num_gpu_blocks=num_blocks, enable_caching=True, hash_block_size=block_size)


def _cache(ns, pool, pattern, group_id=0):
    hashes = _hashes(len(pattern))
    for i, cached in enumerate(pattern):
        if cached:
            key = ns.make_block_hash_with_group_id(hashes[i], group_id)
            pool.cached_block_hash_to_block.insert(key, pool.blocks[i + 10])
    return hashes


def _sw(ns, bs, window):
    return ns.SlidingWindowSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype=ns.DTYPE,
                                sliding_window=window)


def _hit_ids(ns, cls, spec, pattern, max_length, use_eagle=False, alignment=None):
    pool = _pool(ns, 40, spec.block_size)
    hashes = _cache(ns, pool, pattern)
    hit = cls.find_longest_cache_hit(
        block_hashes=hashes, max_length=max_length, kv_cache_group_ids=[0], block_pool=pool,
        kv_cache_spec=spec, use_eagle=use_eagle, alignment_tokens=alignment or spec.block_size)[0]
    return [b.block_id for b in hit]


def _manager(ns, spec, eagle=False, caching=True):
    groups = [ns.KVCacheGroupSpec(["layer0"], spec)]
    config = ns.KVCacheConfig(num_blocks=32, kv_cache_tensors=[], kv_cache_groups=groups)
    return ns.KVCacheManager(config, max_model_len=256, hash_block_size=spec.block_size,
                             enable_caching=caching, use_eagle=eagle)


def _request(ns, rid, tokens, bs):
    hasher = ns.get_request_block_hasher(bs, ns.sha256)
    return ns.Request(rid, list(tokens), ns.SamplingParams(max_tokens=8), None, block_hasher=hasher)


def boundary_outcomes(ns) -> dict:
    """Run every boundary scenario against the classes in ``ns``; returns name -> outcome."""
    out = {}
    sw = ns.SlidingWindowManager
    # window 5, block 2: a hit must end in cdiv(4, 2) = 2 cached blocks (cdiv(5, 2) would be 3).
    s52 = _sw(ns, 2, 5)
    out["sw5_bs2_hit[F,T,T,F]"] = _hit_ids(ns, sw, s52, [F, T, T, F], 8)
    out["sw5_bs2_hit[T,T,F,T,T,T]"] = _hit_ids(ns, sw, s52, [T, T, F, T, T, T], 12)
    out["sw5_bs2_hit[T,F,T,T]"] = _hit_ids(ns, sw, s52, [T, F, T, T], 8)
    # EAGLE needs one block more: 3 here.
    out["sw5_bs2_eagle[F,T,T,F]"] = _hit_ids(ns, sw, s52, [F, T, T, F], 8, use_eagle=True)
    out["sw5_bs2_eagle[F,T,T,T]"] = _hit_ids(ns, sw, s52, [F, T, T, T], 8, use_eagle=True)
    # window 5, block 4, alignment 16: each 4-block segment caches its last cdiv(4, 4) = 1 block.
    pool = _pool(ns, 40, 4)
    mgr = sw(_sw(ns, 4, 5), block_pool=pool, enable_caching=True, kv_cache_group_id=1)
    out["sw5_bs4_cache_mask_align16"] = mgr._cache_block_mask(0, 8, 16)
    out["sw5_bs4_cache_mask_align16_from2"] = mgr._cache_block_mask(2, 7, 16)
    # skipped tokens at the window edge
    mgr5 = sw(s52, block_pool=_pool(ns, 40, 2), enable_caching=True, kv_cache_group_id=0)
    out["sw5_skipped(3,4,5,6)"] = [mgr5.get_num_skipped_tokens(n) for n in (3, 4, 5, 6)]
    # chunked local, chunk 4, block 2: skipped tokens and hits at and around a chunk edge
    ch = ns.ChunkedLocalAttentionSpec(block_size=2, num_kv_heads=1, head_size=1, dtype=ns.DTYPE,
                                      attention_chunk_size=4)
    cm = ns.ChunkedLocalAttentionManager(ch, block_pool=_pool(ns, 40, 2), enable_caching=True,
                                         kv_cache_group_id=0)
    out["chunk4_skipped(3,4,5,7,8)"] = [cm.get_num_skipped_tokens(n) for n in (3, 4, 5, 7, 8)]
    for max_len in (7, 8, 9):
        out[f"chunk4_bs2_hit[T,T,T,T,F]_max{max_len}"] = _hit_ids(
            ns, ns.ChunkedLocalAttentionManager, ch, [T, T, T, T, F], max_len)
    # lookahead at a block edge: 7 prompt tokens + lookahead 1 fill 2 blocks of 4; lookahead 2 needs 3.
    full4 = ns.FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype=ns.DTYPE)
    for la in (0, 1, 2):
        m = _manager(ns, full4)
        req = _request(ns, f"la{la}", range(7), 4)
        blocks = m.allocate_slots(req, 7, num_lookahead_tokens=la)
        out[f"lookahead{la}_prompt7_bs4"] = [list(g) for g in blocks.get_block_ids()]
    # EAGLE with a one-block hit: the last matched block is dropped, so nothing is hit.
    for eagle in (False, True):
        for n_cached in (4, 8, 9):
            m = _manager(ns, full4, eagle=eagle)
            first = _request(ns, "a", range(n_cached), 4)
            m.allocate_slots(first, n_cached)
            m.free(first)
            again = _request(ns, "b", [*range(n_cached), 99, 98, 97], 4)
            blocks, n = m.get_computed_blocks(again)
            out[f"eagle={eagle}_cached{n_cached}"] = [n, [list(g) for g in blocks.get_block_ids()]]
    return out


# What vLLM 0.22.1 returned for boundary_outcomes (recorded in the oracle environment).
EXPECTED = {
    "sw5_bs2_hit[F,T,T,F]": [0, 11, 12],
    "sw5_bs2_hit[T,T,F,T,T,T]": [0, 0, 0, 0, 14, 15],
    "sw5_bs2_hit[T,F,T,T]": [0, 0, 12, 13],
    "sw5_bs2_eagle[F,T,T,F]": [],
    "sw5_bs2_eagle[F,T,T,T]": [0, 11, 12],
    "sw5_bs4_cache_mask_align16": [F, F, F, T, F, F, F, T],
    "sw5_bs4_cache_mask_align16_from2": [F, T, F, F, F],
    "sw5_skipped(3,4,5,6)": [0, 0, 1, 2],
    "chunk4_skipped(3,4,5,7,8)": [0, 4, 4, 4, 8],
    "chunk4_bs2_hit[T,T,T,T,F]_max7": [0, 0, 12],
    "chunk4_bs2_hit[T,T,T,T,F]_max8": [0, 0, 0, 0],
    "chunk4_bs2_hit[T,T,T,T,F]_max9": [0, 0, 0, 0],
    "lookahead0_prompt7_bs4": [[1, 2]],
    "lookahead1_prompt7_bs4": [[1, 2]],
    "lookahead2_prompt7_bs4": [[1, 2, 3]],
    "eagle=False_cached4": [4, [[1]]],
    "eagle=False_cached8": [8, [[1, 2]]],
    "eagle=False_cached9": [8, [[1, 2]]],
    "eagle=True_cached4": [0, [[]]],
    "eagle=True_cached8": [4, [[1]]],
    "eagle=True_cached9": [4, [[1]]],
}


def test_boundaries_match_vllm_exactly():
    got = _outcomes(kvlab_namespace())
    assert list(got) == list(EXPECTED)
    for name, want in EXPECTED.items():
        assert got[name] == want, name


def kvlab_namespace() -> SimpleNamespace:
    from kvlab.core import kv_cache_utils
    from kvlab.core.block_pool import BlockPool
    from kvlab.core.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )
    from kvlab.core.kv_cache_manager import KVCacheManager
    from kvlab.core.request import Request, SamplingParams
    from kvlab.core.single_type_kv_cache_manager import (
        ChunkedLocalAttentionManager,
        SlidingWindowManager,
    )

    return SimpleNamespace(
        BlockPool=BlockPool, make_block_hash_with_group_id=kv_cache_utils.make_block_hash_with_group_id,
        SlidingWindowSpec=SlidingWindowSpec, ChunkedLocalAttentionSpec=ChunkedLocalAttentionSpec,
        FullAttentionSpec=FullAttentionSpec, KVCacheConfig=KVCacheConfig, KVCacheGroupSpec=KVCacheGroupSpec,
        KVCacheManager=KVCacheManager, Request=Request, SamplingParams=SamplingParams,
        SlidingWindowManager=SlidingWindowManager, ChunkedLocalAttentionManager=ChunkedLocalAttentionManager,
        get_request_block_hasher=kv_cache_utils.get_request_block_hasher, sha256=kv_cache_utils.sha256,
        init_none_hash=kv_cache_utils.init_none_hash, DTYPE="float32")


def vllm_namespace() -> SimpleNamespace:  # pragma: no cover - oracle environment only
    import torch
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.single_type_kv_cache_manager import (
        ChunkedLocalAttentionManager,
        SlidingWindowManager,
    )
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )
    from vllm.v1.request import Request

    return SimpleNamespace(
        BlockPool=BlockPool, make_block_hash_with_group_id=kv_cache_utils.make_block_hash_with_group_id,
        SlidingWindowSpec=SlidingWindowSpec, ChunkedLocalAttentionSpec=ChunkedLocalAttentionSpec,
        FullAttentionSpec=FullAttentionSpec, KVCacheConfig=KVCacheConfig, KVCacheGroupSpec=KVCacheGroupSpec,
        KVCacheManager=KVCacheManager, Request=Request, SamplingParams=SamplingParams,
        SlidingWindowManager=SlidingWindowManager, ChunkedLocalAttentionManager=ChunkedLocalAttentionManager,
        get_request_block_hasher=kv_cache_utils.get_request_block_hasher, sha256=sha256,
        init_none_hash=kv_cache_utils.init_none_hash, DTYPE=torch.float32)


def _outcomes(ns) -> dict:
    old = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        ns.init_none_hash(ns.sha256)
        return boundary_outcomes(ns)
    finally:
        if old is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = old


if __name__ == "__main__":  # pragma: no cover - prints vLLM's outcomes (oracle environment)
    import pprint

    pprint.pprint(_outcomes(vllm_namespace()), sort_dicts=False, width=110)
