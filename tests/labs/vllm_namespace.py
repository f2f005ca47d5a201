"""vLLM 0.22.1's classes under the names kvlab.labs.sides.ManagerSide builds from (oracle env only)."""
from __future__ import annotations

from types import SimpleNamespace


def vllm_namespace() -> SimpleNamespace:
    import torch
    import vllm
    from vllm.lora.request import LoRARequest
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256, sha256_cbor
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        SlidingWindowSpec,
    )
    from vllm.v1.request import Request

    if vllm.__version__ != "0.22.1":
        raise SystemExit(f"vLLM {vllm.__version__} found; the lab fixtures must come from 0.22.1")
    return SimpleNamespace(
        KVCacheManager=KVCacheManager, KVCacheConfig=KVCacheConfig,
        KVCacheGroupSpec=KVCacheGroupSpec, FullAttentionSpec=FullAttentionSpec,
        SlidingWindowSpec=SlidingWindowSpec, ChunkedLocalAttentionSpec=ChunkedLocalAttentionSpec,
        Request=Request, SamplingParams=SamplingParams, LoRARequest=LoRARequest,
        MultiModalFeatureSpec=MultiModalFeatureSpec, PlaceholderRange=PlaceholderRange,
        get_request_block_hasher=get_request_block_hasher, init_none_hash=init_none_hash,
        hash_fns={"sha256": sha256, "sha256_cbor": sha256_cbor}, DTYPE=torch.float32,
        version=vllm.__version__,
    )
