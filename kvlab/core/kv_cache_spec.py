"""KV-cache specs of one layer: the base class and the full-attention family.

Mirrors: vllm/v1/kv_cache_interface.py (KVCacheSpec, AttentionSpec, FullAttentionSpec,
TQFullAttentionSpec, MLAAttentionSpec, HiddenStateCacheSpec, SinkFullAttentionSpec). The
windowed, Mamba and cross-attention specs are in ``kv_cache_spec_local``; everything is
re-exported by ``kvlab.core.kv_cache_interface``.

Differs from vLLM: ``dtype`` is a name or any object whose str() ends with one (see
``kvlab.core.dtypes``), checked at construction (unknown dtype -> ValueError); sizes are checked
too; where vLLM asserts in ``merge`` kvlab raises KVCacheSpecMergeError (a ValueError).

Examples:
    >>> spec = FullAttentionSpec(block_size=16, num_kv_heads=3, head_size=64, dtype="float32")
    >>> spec.page_size_bytes  # K and V: 16 tokens * 3 heads * (64 + 64) * 4 bytes
    24576
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Self

from kvlab.core.dtypes import KVQuantMode, cdiv, get_dtype_size, nvfp4_kv_cache_full_dim, round_up

if TYPE_CHECKING:
    from kvlab.core.config import VllmConfig

__all__ = [
    "AttentionSpec",
    "FullAttentionSpec",
    "HiddenStateCacheSpec",
    "KVCacheSpec",
    "KVCacheSpecMergeError",
    "MLAAttentionSpec",
    "SinkFullAttentionSpec",
    "TQFullAttentionSpec",
]


class KVCacheSpecMergeError(ValueError, AssertionError):
    """Specs that must be identical to share a KV cache group are not.

    Both a ValueError (kvlab's convention for bad input) and an AssertionError (what vLLM raises
    there), so callers written for either catch it.
    """


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise KVCacheSpecMergeError(message)


def _positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclass(frozen=True)
class KVCacheSpec:
    """The KV-cache format of one layer.

    Mirrors: vllm/v1/kv_cache_interface.py::KVCacheSpec.

    Attributes:
        block_size: Tokens per block (tokens).
    """

    block_size: int

    def __post_init__(self) -> None:
        _positive_int("block_size", self.block_size)

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of this layer (bytes)."""
        raise NotImplementedError

    @property
    def storage_block_size(self) -> int:
        """Tokens actually stored per block (differs only for compressed MLA)."""
        return self.block_size

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """Most bytes one request can need in this layer (bytes)."""
        raise NotImplementedError

    def copy_with_new_block_size(self, block_size: int) -> Self:
        """A copy with ``block_size`` replaced."""
        return replace(self, block_size=block_size)

    @classmethod
    def merge(cls, specs: list[Self]) -> Self:
        """Merge identical specs of the layers of one group into one.

        Raises:
            KVCacheSpecMergeError: If the specs are not all equal.
        """
        _check(
            all(spec == specs[0] for spec in specs[1:]),
            "All layers in the same KV cache group must be the same.",
        )
        return copy.deepcopy(specs[0])


@dataclass(frozen=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    """An attention layer's K and V cache.

    Mirrors: vllm/v1/kv_cache_interface.py::AttentionSpec.

    Attributes:
        num_kv_heads: KV heads stored by this worker.
        head_size: Elements per head (K; also V unless head_size_v differs).
        dtype: Element type (name or torch/numpy dtype).
        kv_quant_mode: Quantisation; per-token-head modes add fp32 scales to the page.
        page_size_padded: If set, the page is padded to this many bytes.
    """

    num_kv_heads: int
    head_size: int
    dtype: Any
    kv_quant_mode: KVQuantMode = KVQuantMode.NONE
    page_size_padded: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_int("num_kv_heads", self.num_kv_heads)
        _positive_int("head_size", self.head_size)
        if self.dtype is not None:  # vLLM accepts dtype=None until a size is asked for
            get_dtype_size(self.dtype)  # raises ValueError for an unknown dtype

    @property
    def page_size_bytes(self) -> int:
        """real_page_size_bytes, plus per-token-head scales, or page_size_padded if set."""
        real_page_size = self.real_page_size_bytes
        if self.kv_quant_mode.is_per_token_head:
            real_page_size += 2 * self.block_size * self.num_kv_heads * get_dtype_size("float32")
        if self.page_size_padded is not None:
            if self.page_size_padded < real_page_size:
                raise ValueError(
                    f"page_size_padded {self.page_size_padded} < real page size {real_page_size}"
                )
            return self.page_size_padded
        return real_page_size

    @property
    def real_page_size_bytes(self) -> int:
        """``2 * block_size * num_kv_heads * head_size * dtype_size`` (bytes)."""
        head_dim = (
            nvfp4_kv_cache_full_dim(self.head_size)
            if self.kv_quant_mode.is_nvfp4
            else self.head_size
        )
        return 2 * self.block_size * self.num_kv_heads * head_dim * get_dtype_size(self.dtype)


def _merge_window_sizes(window_sizes: set[int]) -> int | None:
    if len(window_sizes) == 0:
        return None
    if len(window_sizes) == 1:
        return window_sizes.pop()
    raise ValueError(
        "All attention layers in the same KV cache group must have the same window size."
    )


def _merge_full_attention(cls: type, specs: list, **extra: Any) -> Any:
    """FullAttentionSpec.merge and SinkFullAttentionSpec.merge share this body."""
    _check(
        all(isinstance(spec, FullAttentionSpec) for spec in specs),
        "All attention layers in the same KV cache group must be FullAttentionSpec.",
    )
    sliding_window = {s.sliding_window for s in specs if s.sliding_window is not None}
    attention_chunk_size = {
        s.attention_chunk_size for s in specs if s.attention_chunk_size is not None
    }
    _check(
        not any(isinstance(spec, MLAAttentionSpec) for spec in specs),
        "MLAAttentionSpec should be merged in MLAAttentionSpec.merge",
    )
    first = specs[0]
    merged = cls(
        block_size=first.block_size,
        num_kv_heads=first.num_kv_heads,
        head_size=first.head_size,
        head_size_v=first.head_size_v,
        dtype=first.dtype,
        kv_quant_mode=first.kv_quant_mode,
        page_size_padded=first.page_size_padded,
        **extra,
        sliding_window=_merge_window_sizes(sliding_window),
        attention_chunk_size=_merge_window_sizes(attention_chunk_size),
    )
    for spec in specs:
        for f in fields(AttentionSpec):
            _check(
                getattr(spec, f.name) == getattr(merged, f.name),
                "All attention layers in the same KV cache group must have the same "
                "attention spec.",
            )
    _check(
        (merged.sliding_window is not None) + (merged.attention_chunk_size is not None) <= 1,
        "Model with both sliding window layers and chunked local attention layers is not "
        "supported.",
    )
    return merged


@dataclass(frozen=True, kw_only=True)
class FullAttentionSpec(AttentionSpec):
    """Full (causal) attention: a request keeps a block for every token.

    Mirrors: vllm/v1/kv_cache_interface.py::FullAttentionSpec. ``sliding_window`` /
    ``attention_chunk_size`` are only recorded here when the hybrid allocator is off and such
    layers are managed as full attention.

    Attributes:
        head_size_v: Elements per V head (defaults to head_size).
        sliding_window: Window of a sliding-window layer managed as full attention (tokens).
        attention_chunk_size: Chunk of a chunked-local layer managed as full attention (tokens).
    """

    head_size_v: int = None  # type: ignore[assignment]
    sliding_window: int | None = None
    attention_chunk_size: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """``cdiv(max_model_len / (dcp * pcp), block_size) * page_size_bytes`` (bytes)."""
        max_model_len = vllm_config.model_config.max_model_len
        world = (
            vllm_config.parallel_config.decode_context_parallel_size
            * vllm_config.parallel_config.prefill_context_parallel_size
        )
        if world > 1:
            max_model_len = cdiv(max_model_len, world)
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes

    @classmethod
    def merge_window_sizes(cls, window_sizes: set[int]) -> int | None:
        """The one window size of a group, None if none.

        Raises:
            ValueError: If there are several (as vLLM).
        """
        return _merge_window_sizes(window_sizes)

    @classmethod
    def merge(cls, specs: list[Self]) -> Self:
        """Merge full-attention specs, keeping their (single) window or chunk size.

        Raises:
            KVCacheSpecMergeError: If the specs differ in attention shape or type.
            ValueError: If they carry different window sizes.
        """
        return _merge_full_attention(cls, specs)

    @property
    def real_page_size_bytes(self) -> int:
        """``block_size * num_kv_heads * (head_size + head_size_v) * dtype_size`` (bytes)."""
        if self.kv_quant_mode.is_nvfp4:
            last_dim = nvfp4_kv_cache_full_dim(self.head_size) + nvfp4_kv_cache_full_dim(
                self.head_size_v
            )
        else:
            last_dim = self.head_size + self.head_size_v
        return self.block_size * self.num_kv_heads * last_dim * get_dtype_size(self.dtype)


@dataclass(frozen=True, kw_only=True)
class TQFullAttentionSpec(FullAttentionSpec):
    """Full attention with TurboQuant slots: ``block_size * num_kv_heads * tq_slot_size`` bytes.

    Mirrors: vllm/v1/kv_cache_interface.py::TQFullAttentionSpec.
    """

    tq_slot_size: int = 0

    @property
    def real_page_size_bytes(self) -> int:
        if self.tq_slot_size > 0:
            return self.block_size * self.num_kv_heads * self.tq_slot_size
        return super().real_page_size_bytes

    @classmethod
    def merge(cls, specs: list[Self]) -> Self:
        merged = super().merge(specs)
        _check(
            all(s.tq_slot_size == specs[0].tq_slot_size for s in specs),
            "All TQ layers in the same KV cache group must use the same tq_slot_size.",
        )
        return replace(merged, tq_slot_size=specs[0].tq_slot_size)


def _apply_alignment_padding(spec: Any) -> None:
    if spec.alignment is None:
        return
    actual = spec.real_page_size_bytes
    padded = round_up(actual, spec.alignment)
    if padded != actual:
        object.__setattr__(spec, "page_size_padded", padded)


@dataclass(frozen=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    """Multi-head latent attention: one latent vector per token (no separate V).

    Mirrors: vllm/v1/kv_cache_interface.py::MLAAttentionSpec (including the fp8_ds_mla
    656-byte and DeepseekV4 584-byte layouts, compress_ratio and alignment padding).
    """

    cache_dtype_str: str | None = None
    alignment: int | None = None
    compress_ratio: int = 1
    model_version: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _apply_alignment_padding(self)

    @property
    def storage_block_size(self) -> int:
        return self.block_size // self.compress_ratio

    @property
    def real_page_size_bytes(self) -> int:
        if self.cache_dtype_str == "fp8_ds_mla":
            if self.model_version == "deepseek_v4":
                return self.storage_block_size * 584
            return self.block_size * 656
        return (
            self.storage_block_size
            * self.num_kv_heads
            * self.head_size
            * get_dtype_size(self.dtype)
        )

    @classmethod
    def merge(cls, specs: list[Self]) -> Self:
        _check(
            all(isinstance(spec, MLAAttentionSpec) for spec in specs),
            "All attention layers in the same KV cache group must be MLAAttentionSpec.",
        )
        cache_dtypes = {s.cache_dtype_str for s in specs}
        ratios = {s.compress_ratio for s in specs}
        versions = {s.model_version for s in specs}
        _check(
            len(cache_dtypes) == 1 and len(ratios) == 1 and len(versions) == 1,
            "All attention layers in the same KV cache group must use the same quantization "
            "method, compress ratio, and model version.",
        )
        first = specs[0]
        return cls(
            block_size=first.block_size,
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            dtype=first.dtype,
            kv_quant_mode=first.kv_quant_mode,
            page_size_padded=first.page_size_padded,
            cache_dtype_str=cache_dtypes.pop(),
            compress_ratio=ratios.pop(),
            model_version=versions.pop(),
        )


@dataclass(frozen=True, kw_only=True)
class HiddenStateCacheSpec(MLAAttentionSpec):
    """Marker spec for hidden-state cache layers. Mirrors vLLM's HiddenStateCacheSpec."""


@dataclass(frozen=True)
class SinkFullAttentionSpec(FullAttentionSpec):
    """Full attention with ``sink_len`` attention-sink tokens.

    Mirrors: vllm/v1/kv_cache_interface.py::SinkFullAttentionSpec.
    """

    sink_len: int | None = None

    @classmethod
    def merge(cls, specs: list[Self]) -> Self:
        return _merge_full_attention(cls, specs, sink_len=specs[0].sink_len)
