"""What the KV cache looks like: per-layer specs, groups of layers, and the whole config.

Mirrors: vllm/v1/kv_cache_interface.py. The spec classes live in ``kv_cache_spec`` (base and
full-attention family) and ``kv_cache_spec_local`` (windowed, Mamba, cross attention); this
module re-exports them and holds UniformTypeKVCacheSpecs, the spec kinds, KVCacheTensor,
KVCacheGroupSpec and KVCacheConfig. Not mirrored: vLLM's torch dtypes (kvlab takes dtype names,
see ``kvlab.core.dtypes``) and its VllmConfig (kvlab's flat ``VllmConfig`` has the fields read).

A hybrid model (full + sliding window) has one group per attention type; every group shares
the one block pool, and the managers above pick the allocation rule from the group's spec::

    KVCacheConfig(num_blocks=..., kv_cache_groups=[
        KVCacheGroupSpec(["layers.0", "layers.2"], FullAttentionSpec(...)),     # group 0
        KVCacheGroupSpec(["layers.1", "layers.3"], SlidingWindowSpec(...)),     # group 1
    ], kv_cache_tensors=[...])
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Self

from kvlab.core.config import VllmConfig
from kvlab.core.dtypes import (
    KVQuantMode,
    cdiv,
    get_dtype_size,
    get_kv_quant_mode,
    is_quantized_kv_cache,
    kv_cache_uses_per_token_head_scales,
)
from kvlab.core.kv_cache_spec import (
    AttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    KVCacheSpecMergeError,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    TQFullAttentionSpec,
)
from kvlab.core.kv_cache_spec_local import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    MambaSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
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
