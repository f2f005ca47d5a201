"""What the KV cache looks like: per-layer specs, groups of layers, and the whole config.

Mirrors: vllm/v1/kv_cache_interface.py (the spec classes, UniformTypeKVCacheSpecs, the spec
kinds, KVCacheTensor, KVCacheGroupSpec and KVCacheConfig). Not mirrored: vLLM's torch dtypes
(kvlab takes dtype names, see ``kvlab.core.dtypes``) and its VllmConfig (kvlab's flat
``VllmConfig`` has the fields read).

Differs from vLLM: ``dtype`` is a name or any object whose str() ends with one (see
``kvlab.core.dtypes``), checked at construction (unknown dtype -> ValueError); sizes are checked
too; where vLLM asserts in ``merge`` kvlab raises KVCacheSpecMergeError (a ValueError and an
AssertionError, so callers written for either catch it).

A hybrid model (full + sliding window) has one group per attention type; every group shares
the one block pool, and the managers pick the allocation rule from the group's spec::

    KVCacheConfig(num_blocks=..., kv_cache_groups=[
        KVCacheGroupSpec(["layers.0", "layers.2"], FullAttentionSpec(...)),     # group 0
        KVCacheGroupSpec(["layers.1", "layers.3"], SlidingWindowSpec(...)),     # group 1
    ], kv_cache_tensors=[...])

Examples:
    >>> spec = FullAttentionSpec(block_size=16, num_kv_heads=3, head_size=64, dtype="float32")
    >>> spec.page_size_bytes  # K and V: 16 tokens * 3 heads * (64 + 64) * 4 bytes
    24576
    >>> sw = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16",
    ...                        sliding_window=4096)
    >>> sw.max_admission_blocks_per_request(max_num_batched_tokens=2048, max_model_len=131072)
    385
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, fields, replace
from enum import Enum
from math import prod
from typing import Any, Self

from kvlab.core.config import VllmConfig
from kvlab.core.dtypes import (
    KVQuantMode,
    cdiv,
    get_dtype_size,
    get_kv_quant_mode,
    is_quantized_kv_cache,
    kv_cache_uses_per_token_head_scales,
    nvfp4_kv_cache_full_dim,
    round_up,
)

__all__ = [
    "AttentionSpec",
    "ChunkedLocalAttentionSpec",
    "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec",
    "FullAttentionSpec",
    "HiddenStateCacheSpec",
    "KVCacheConfig",
    "KVCacheGroupSpec",
    "KVCacheSpec",
    "KVCacheSpecKind",
    "KVCacheSpecMergeError",
    "KVCacheTensor",
    "KVQuantMode",
    "MLAAttentionSpec",
    "MambaSpec",
    "SinkFullAttentionSpec",
    "SlidingWindowMLASpec",
    "SlidingWindowSpec",
    "TQFullAttentionSpec",
    "UniformTypeKVCacheSpecs",
    "VllmConfig",
    "get_dtype_size",
    "get_kv_cache_spec_kind",
    "get_kv_cache_spec_sliding_window",
    "get_kv_quant_mode",
    "is_quantized_kv_cache",
    "kv_cache_uses_per_token_head_scales",
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


@dataclass(frozen=True, kw_only=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """Chunked local attention: a token attends within its ``attention_chunk_size`` chunk.

    Mirrors: vllm/v1/kv_cache_interface.py::ChunkedLocalAttentionSpec.

    Attributes:
        attention_chunk_size: Chunk length (tokens).
    """

    attention_chunk_size: int

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_int("attention_chunk_size", self.attention_chunk_size)

    def max_admission_blocks_per_request(
        self, max_num_batched_tokens: int, max_model_len: int
    ) -> int:
        """Blocks a request can hold (blocks).

        ``cdiv(min(attention_chunk_size + max_num_batched_tokens, max_model_len), block_size)``.
        """
        num_tokens = min(self.attention_chunk_size + max_num_batched_tokens, max_model_len)
        return cdiv(num_tokens, self.block_size)

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """max_admission_blocks_per_request * page_size_bytes (bytes)."""
        max_blocks = self.max_admission_blocks_per_request(
            max_num_batched_tokens=vllm_config.scheduler_config.max_num_batched_tokens,
            max_model_len=vllm_config.model_config.max_model_len,
        )
        return max_blocks * self.page_size_bytes


@dataclass(frozen=True, kw_only=True)
class SlidingWindowSpec(AttentionSpec):
    """Sliding-window attention: a token attends to the last ``sliding_window`` tokens.

    Mirrors: vllm/v1/kv_cache_interface.py::SlidingWindowSpec.

    Attributes:
        sliding_window: Window length, the current token included (tokens).
        head_size_v: Elements per V head (defaults to head_size).
    """

    sliding_window: int
    head_size_v: int = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_int("sliding_window", self.sliding_window)
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)

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

    def max_admission_blocks_per_request(
        self, max_num_batched_tokens: int, max_model_len: int
    ) -> int:
        """``cdiv(min(window - 1 + step tokens, max_model_len), block_size) + 1`` (blocks).

        The +1: a window need not start on a block boundary (block_size 4, window ``CDEF`` in
        ``XXCD | EF`` takes two blocks).
        """
        num_tokens = min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len)
        return cdiv(num_tokens, self.block_size) + 1

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """max_admission_blocks_per_request * page_size_bytes (bytes).

        Raises:
            ValueError: If decode context parallelism is on (vLLM asserts).
        """
        if vllm_config.parallel_config.decode_context_parallel_size != 1:
            raise ValueError("DCP not support sliding window.")
        max_blocks = self.max_admission_blocks_per_request(
            max_num_batched_tokens=vllm_config.scheduler_config.max_num_batched_tokens,
            max_model_len=vllm_config.model_config.max_model_len,
        )
        return max_blocks * self.page_size_bytes


@dataclass(frozen=True, kw_only=True)
class SlidingWindowMLASpec(SlidingWindowSpec):
    """Sliding-window attention in MLA cache format. Mirrors vLLM's SlidingWindowMLASpec."""

    cache_dtype_str: str | None = None
    alignment: int | None = None
    compress_ratio: int = 1
    model_version: str | None = None

    def __post_init__(self) -> None:
        # NOTE: vLLM's __post_init__ here only pads (head_size_v stays as given); kvlab
        # validates first, then does the same.
        AttentionSpec.__post_init__(self)
        _positive_int("sliding_window", self.sliding_window)
        _apply_alignment_padding(self)

    @property
    def storage_block_size(self) -> int:
        return self.block_size // self.compress_ratio

    @property
    def real_page_size_bytes(self) -> int:
        if self.model_version == "deepseek_v4":
            return self.storage_block_size * 584
        if self.model_version is not None:
            raise ValueError(f"Unsupported model version: {self.model_version}")
        return (
            self.storage_block_size
            * self.num_kv_heads
            * self.head_size
            * get_dtype_size(self.dtype)
        )

    @classmethod
    def merge(cls, specs: list[Self]) -> Self:
        _check(
            all(isinstance(spec, SlidingWindowMLASpec) for spec in specs),
            "All attention layers in the same KV cache group must be SlidingWindowMLASpec.",
        )
        sets = [
            {getattr(s, name) for s in specs}
            for name in ("cache_dtype_str", "compress_ratio", "model_version", "sliding_window")
        ]
        _check(
            all(len(values) == 1 for values in sets),
            "All attention layers in the same KV cache group must use the same quantization "
            "method, compress ratio, model version and sliding window size.",
        )
        first = specs[0]
        return cls(
            block_size=first.block_size,
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            dtype=first.dtype,
            page_size_padded=first.page_size_padded,
            sliding_window=sets[3].pop(),
            cache_dtype_str=sets[0].pop(),
            compress_ratio=sets[1].pop(),
            model_version=sets[2].pop(),
        )


@dataclass(frozen=True)
class MambaSpec(KVCacheSpec):
    """A Mamba/linear-attention state: a fixed-size state per request (not per token).

    Mirrors: vllm/v1/kv_cache_interface.py::MambaSpec. ``mamba_type`` is vLLM's backend enum
    name as a string (kvlab never loads a backend).

    Attributes:
        shapes: Shape of each state tensor.
        dtypes: Element type of each state tensor (same length as shapes).
        page_size_padded: If set, the page is padded to this many bytes.
        mamba_type: "MAMBA1", "MAMBA2", "SHORT_CONV", "LINEAR", "GDN_ATTN" or "CUSTOM".
        mamba_cache_mode: "none", "align" or "all".
        num_speculative_blocks: Extra blocks kept for speculative decoding (blocks).
    """

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[Any, ...]
    page_size_padded: int | None = None
    mamba_type: str = "MAMBA2"
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        # NOTE: as vLLM, shapes and dtypes are paired by zip: a shape without a dtype adds nothing
        # to page_size_bytes (vLLM's tests build MambaSpec(shapes=(s1, s2), dtypes=(d,))).
        for dtype in self.dtypes:
            get_dtype_size(dtype)

    @property
    def page_size_bytes(self) -> int:
        """Sum of the state tensors' bytes, or page_size_padded if set (bytes)."""
        page_size = sum(
            prod(shape) * get_dtype_size(dtype)
            for shape, dtype in zip(self.shapes, self.dtypes)  # noqa: B905 - vLLM's pairing
        )
        if self.page_size_padded is not None:
            if self.page_size_padded < page_size:
                raise ValueError(
                    f"page_size_padded {self.page_size_padded} < state size {page_size}"
                )
            return self.page_size_padded
        return page_size

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """One state (+1 in "align" mode, one per block in "all" mode) plus speculative blocks."""
        mode = vllm_config.cache_config.mamba_cache_mode
        if mode == "all":
            num_blocks = cdiv(vllm_config.model_config.max_model_len, self.block_size)
            return (num_blocks + self.num_speculative_blocks) * self.page_size_bytes
        if mode == "align":
            return self.page_size_bytes * (2 + self.num_speculative_blocks)
        return self.page_size_bytes * (1 + self.num_speculative_blocks)


@dataclass(frozen=True)
class EncoderOnlyAttentionSpec(AttentionSpec):
    """Encoder-only attention: no KV cache is kept. Mirrors vLLM's EncoderOnlyAttentionSpec."""

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        return 0


@dataclass(frozen=True)
class CrossAttentionSpec(AttentionSpec):
    """Cross-attention of an encoder-decoder model: caches the encoder states.

    Mirrors: vllm/v1/kv_cache_interface.py::CrossAttentionSpec.
    """

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """``cdiv(max_num_encoder_input_tokens, block_size) * page_size_bytes`` (bytes)."""
        max_encoder_len = vllm_config.scheduler_config.max_num_encoder_input_tokens
        return cdiv(max_encoder_len, self.block_size) * self.page_size_bytes


class KVCacheSpecKind(str, Enum):  # noqa: UP042 - as vLLM (str() differs for StrEnum)
    """The kind of a spec as KV events report it. Mirrors vLLM's KVCacheSpecKind."""

    FULL_ATTENTION = "full_attention"
    MLA_ATTENTION = "mla_attention"
    SLIDING_WINDOW = "sliding_window"
    SLIDING_WINDOW_MLA = "sliding_window_mla"
    MAMBA = "mamba"
    CHUNKED_LOCAL_ATTENTION = "chunked_local_attention"
    SINK_FULL_ATTENTION = "sink_full_attention"
    ENCODER_ONLY_ATTENTION = "encoder_only_attention"
    CROSS_ATTENTION = "cross_attention"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class UniformTypeKVCacheSpecs(KVCacheSpec):
    """Layers of one attention type with different hidden sizes, managed as one group.

    Mirrors: vllm/v1/kv_cache_interface.py::UniformTypeKVCacheSpecs.

    Attributes:
        kv_cache_specs: layer name -> its spec (all of one type, one block size).
    """

    kv_cache_specs: dict[str, KVCacheSpec]

    @property
    def page_size_bytes(self) -> int:
        """Sum of the layers' page sizes (bytes)."""
        return sum(spec.page_size_bytes for spec in self.kv_cache_specs.values())

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """The most pages any layer needs, times page_size_bytes (bytes)."""
        return self.max_memory_usage_pages(vllm_config) * self.page_size_bytes

    @classmethod
    def is_uniform_type(cls, kv_cache_specs: dict[str, KVCacheSpec]) -> bool:
        """Whether all specs have one block size and one type (same window/chunk/spec blocks).

        Raises:
            NotImplementedError: For a spec type vLLM has no rule for (as vLLM).
        """
        specs = list(kv_cache_specs.values())
        if len({spec.block_size for spec in specs}) > 1:
            return False
        one = specs[0]
        if isinstance(one, SlidingWindowMLASpec):
            return all(
                isinstance(s, SlidingWindowMLASpec) and s.sliding_window == one.sliding_window
                for s in specs
            )
        if isinstance(one, FullAttentionSpec):
            return all(isinstance(s, FullAttentionSpec) for s in specs)
        if isinstance(one, CrossAttentionSpec):
            return all(isinstance(s, CrossAttentionSpec) for s in specs)
        if isinstance(one, SlidingWindowSpec):
            return all(
                isinstance(s, SlidingWindowSpec) and s.sliding_window == one.sliding_window
                for s in specs
            )
        if isinstance(one, ChunkedLocalAttentionSpec):
            return all(
                isinstance(s, ChunkedLocalAttentionSpec)
                and s.attention_chunk_size == one.attention_chunk_size
                for s in specs
            )
        if isinstance(one, MambaSpec):
            return all(
                isinstance(s, MambaSpec) and s.num_speculative_blocks == one.num_speculative_blocks
                for s in specs
            )
        raise NotImplementedError(f"Unsupported KV cache spec type: {type(one)}")

    @classmethod
    def from_specs(cls, kv_cache_specs: dict[str, KVCacheSpec]) -> Self | None:
        """A UniformTypeKVCacheSpecs of the specs if they are of uniform type, else None."""
        if cls.is_uniform_type(kv_cache_specs):
            block_size = next(iter(kv_cache_specs.values())).block_size
            return cls(block_size=block_size, kv_cache_specs=kv_cache_specs)
        return None

    def get_page_sizes(self) -> list[int]:
        """The distinct page sizes of the layers (bytes)."""
        return list({spec.page_size_bytes for spec in self.kv_cache_specs.values()})

    def get_num_layer_tuples(self) -> int:
        """How many layers share the most common page size."""
        return Counter(spec.page_size_bytes for spec in self.kv_cache_specs.values()).most_common(
            1
        )[0][1]

    def max_memory_usage_pages(self, vllm_config: VllmConfig) -> int:
        """The most pages any one layer needs for one request (pages)."""
        return max(
            cdiv(spec.max_memory_usage_bytes(vllm_config), spec.page_size_bytes)
            for spec in self.kv_cache_specs.values()
        )


_KIND_ORDER: tuple[tuple[type, KVCacheSpecKind], ...] = (
    (SlidingWindowMLASpec, KVCacheSpecKind.SLIDING_WINDOW_MLA),
    (MLAAttentionSpec, KVCacheSpecKind.MLA_ATTENTION),
    (SinkFullAttentionSpec, KVCacheSpecKind.SINK_FULL_ATTENTION),
    (FullAttentionSpec, KVCacheSpecKind.FULL_ATTENTION),
    (ChunkedLocalAttentionSpec, KVCacheSpecKind.CHUNKED_LOCAL_ATTENTION),
    (SlidingWindowSpec, KVCacheSpecKind.SLIDING_WINDOW),
    (MambaSpec, KVCacheSpecKind.MAMBA),
    (EncoderOnlyAttentionSpec, KVCacheSpecKind.ENCODER_ONLY_ATTENTION),
    (CrossAttentionSpec, KVCacheSpecKind.CROSS_ATTENTION),
)


def get_kv_cache_spec_kind(kv_cache_spec: KVCacheSpec) -> KVCacheSpecKind:
    """The KVCacheSpecKind of a spec (UNKNOWN for mixed or unlisted types).

    Mirrors: vllm/v1/kv_cache_interface.py::get_kv_cache_spec_kind.
    """
    if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
        inner = {get_kv_cache_spec_kind(s) for s in kv_cache_spec.kv_cache_specs.values()}
        return next(iter(inner)) if len(inner) == 1 else KVCacheSpecKind.UNKNOWN
    for spec_type, kind in _KIND_ORDER:
        if isinstance(kv_cache_spec, spec_type):
            return kind
    return KVCacheSpecKind.UNKNOWN


def get_kv_cache_spec_sliding_window(kv_cache_spec: KVCacheSpec) -> int | None:
    """The sliding window of a sliding-window spec (tokens), else None.

    Mirrors: vllm/v1/kv_cache_interface.py::get_kv_cache_spec_sliding_window.
    """
    if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
        inner = {get_kv_cache_spec_sliding_window(s) for s in kv_cache_spec.kv_cache_specs.values()}
        return next(iter(inner)) if len(inner) == 1 else None
    if isinstance(kv_cache_spec, SlidingWindowSpec):
        return kv_cache_spec.sliding_window
    return None


@dataclass
class KVCacheTensor:
    """One KV-cache tensor the worker allocates. Mirrors vLLM's KVCacheTensor.

    Attributes:
        size: Size of the tensor (bytes).
        shared_by: Names of the layers that use this tensor.
    """

    size: int
    shared_by: list[str]


@dataclass
class KVCacheGroupSpec:
    """Layers that share one block table (one kv_cache_group_id). Mirrors vLLM's KVCacheGroupSpec.

    Attributes:
        layer_names: The model layers of the group.
        kv_cache_spec: Their (merged) spec.
        is_eagle_group: Whether the group holds EAGLE/MTP draft attention layers.
    """

    layer_names: list[str]
    kv_cache_spec: KVCacheSpec
    is_eagle_group: bool = False


@dataclass
class KVCacheConfig:
    """The KV-cache layout of a model. Mirrors vLLM's KVCacheConfig.

    Attributes:
        num_blocks: Blocks in the shared pool, the null block included (blocks).
        kv_cache_tensors: How the worker allocates the tensors.
        kv_cache_groups: One group per block table (one per attention type in hybrid models).
    """

    num_blocks: int
    kv_cache_tensors: list[KVCacheTensor]
    kv_cache_groups: list[KVCacheGroupSpec]

    @property
    def has_mamba_layers(self) -> bool:
        """Whether any group is a Mamba group."""
        return any(isinstance(g.kv_cache_spec, MambaSpec) for g in self.kv_cache_groups)

    @property
    def needs_kv_cache_zeroing(self) -> bool:
        """Whether new blocks must be zeroed (Mamba states)."""
        return self.has_mamba_layers
