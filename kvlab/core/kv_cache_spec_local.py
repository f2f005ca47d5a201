"""KV-cache specs whose memory does not grow with the whole sequence.

Mirrors: vllm/v1/kv_cache_interface.py (ChunkedLocalAttentionSpec, SlidingWindowSpec,
SlidingWindowMLASpec, MambaSpec, EncoderOnlyAttentionSpec, CrossAttentionSpec). Re-exported by
``kvlab.core.kv_cache_interface``; see ``kv_cache_spec`` for the dtype/validation differences.

Examples:
    >>> from kvlab.core.config import VllmConfig
    >>> sw = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16",
    ...                        sliding_window=4096)
    >>> sw.max_admission_blocks_per_request(max_num_batched_tokens=2048, max_model_len=131072)
    385
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING, Any, Self

from kvlab.core.dtypes import cdiv, get_dtype_size, nvfp4_kv_cache_full_dim
from kvlab.core.kv_cache_spec import (
    AttentionSpec,
    KVCacheSpec,
    _apply_alignment_padding,
    _check,
    _positive_int,
)

if TYPE_CHECKING:
    from kvlab.core.config import VllmConfig

__all__ = [
    "ChunkedLocalAttentionSpec",
    "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec",
    "MambaSpec",
    "SlidingWindowMLASpec",
    "SlidingWindowSpec",
]


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
