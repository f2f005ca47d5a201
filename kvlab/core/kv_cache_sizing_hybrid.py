"""The hybrid KV cache manager turned off: local-attention layers become full attention.

Mirrors: vllm/v1/core/kv_cache_utils.py::unify_hybrid_kv_cache_specs and its spec conversion
(``--disable-hybrid-kv-cache-manager``). Re-exported by ``kvlab.core.kv_cache_sizing`` and
``kvlab.core.kv_cache_utils``.
"""

from __future__ import annotations

import logging

from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    KVCacheSpecMergeError,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvlab.core.kv_cache_sizing import is_kv_cache_spec_uniform

logger = logging.getLogger("kvlab.core.kv_cache_sizing")

__all__ = ["unify_hybrid_kv_cache_specs"]


def _as_full_attention(spec: KVCacheSpec, uniform_block_size: int | None) -> KVCacheSpec:
    """The full-attention spec a local layer becomes with the hybrid allocator off (else spec)."""
    if isinstance(spec, SlidingWindowMLASpec):
        return MLAAttentionSpec(
            block_size=spec.block_size if uniform_block_size is None else uniform_block_size,
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            dtype=spec.dtype,
            page_size_padded=spec.page_size_padded,
            cache_dtype_str=spec.cache_dtype_str,
            alignment=spec.alignment,
            compress_ratio=spec.compress_ratio,
            model_version=spec.model_version,
        )
    if isinstance(spec, SlidingWindowSpec):
        return FullAttentionSpec(
            block_size=spec.block_size,
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            head_size_v=spec.head_size_v,
            dtype=spec.dtype,
            kv_quant_mode=spec.kv_quant_mode,
            sliding_window=spec.sliding_window,
            page_size_padded=spec.page_size_padded,
        )
    if isinstance(spec, ChunkedLocalAttentionSpec):
        # NOTE: as vLLM, kv_quant_mode is not carried over for chunked-local layers.
        return FullAttentionSpec(
            block_size=spec.block_size,
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            dtype=spec.dtype,
            attention_chunk_size=spec.attention_chunk_size,
            page_size_padded=spec.page_size_padded,
        )
    return spec


def _is_one_type(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    return is_kv_cache_spec_uniform(kv_cache_spec) or UniformTypeKVCacheSpecs.is_uniform_type(
        kv_cache_spec
    )


def unify_hybrid_kv_cache_specs(kv_cache_spec: dict[str, KVCacheSpec]) -> None:
    """With the hybrid allocator off, turn local-attention layers into full attention, in place.

    Mirrors: vllm/v1/core/kv_cache_utils.py::unify_hybrid_kv_cache_specs (what
    ``--disable-hybrid-kv-cache-manager`` does). When the layers are not of one type and some
    are FullAttentionSpec, every SlidingWindowSpec becomes a FullAttentionSpec that records
    ``sliding_window``, every ChunkedLocalAttentionSpec one that records
    ``attention_chunk_size`` (same block size, heads, dtype, page_size_padded), and every
    SlidingWindowMLASpec an MLAAttentionSpec (DeepseekV4: with the full layers' block size).
    Such layers then keep every token's KV, as full attention does.

    Example: ``{"l0": FullAttentionSpec(bs 16, ...), "l1": SlidingWindowSpec(bs 16, window
    1024, ...)}`` becomes ``{"l0": <same>, "l1": FullAttentionSpec(bs 16, ...,
    sliding_window=1024)}``: one group, 2 layers.

    Args:
        kv_cache_spec: layer name -> spec; replaced entries are written back into this dict.

    Raises:
        ValueError: If the layers still are not of one type (e.g. no full-attention layer,
            or Mamba layers); the dict is then left as it was (vLLM may have rewritten part).
        KVCacheSpecMergeError: (a ValueError and an AssertionError, as vLLM asserts) If there
            are SlidingWindowMLASpec layers but no full-attention layer.
    """
    if _is_one_type(kv_cache_spec):
        return
    logger.warning(
        "Hybrid KV cache manager is disabled for this hybrid model: no KV cache memory is saved "
        "for local-attention layers (their compute still is)."
    )
    specs = kv_cache_spec.values()
    has_full = any(isinstance(s, FullAttentionSpec) for s in specs)
    has_local = any(isinstance(s, (SlidingWindowSpec, ChunkedLocalAttentionSpec)) for s in specs)
    uniform_block_size = None
    if any(isinstance(s, SlidingWindowMLASpec) for s in specs):
        full = next((s for s in specs if isinstance(s, FullAttentionSpec)), None)
        if full is None:
            raise KVCacheSpecMergeError(
                "SlidingWindowMLASpec layers need a full-attention layer to be unified with "
                "(the hybrid KV cache manager is disabled)"
            )
        uniform_block_size = full.block_size
    unified = dict(kv_cache_spec)
    if has_full and has_local:
        unified = {
            name: _as_full_attention(spec, uniform_block_size) for name, spec in unified.items()
        }
    if not _is_one_type(unified):
        kinds = sorted({type(s).__name__ for s in unified.values()})
        raise ValueError(
            "Hybrid KV cache manager is disabled but failed to convert the KV cache specs to "
            f"one unified type (layer types after conversion: {kinds}); sliding-window and "
            "chunked-local layers are only converted when full-attention layers are present"
        )
    kv_cache_spec.update(unified)
