"""From layer specs and a memory budget to KV cache groups and a block count.

Mirrors: the sizing half of vllm/v1/core/kv_cache_utils.py (get_num_blocks,
get_uniform_page_size, max_memory_usage_bytes, estimate_max_model_len,
check_enough_kv_cache_memory, create_kv_cache_group_specs, is_kv_cache_spec_uniform,
unify_kv_cache_spec_page_size, the uniform-spec / uniform-type / uniform-page-size grouping,
get_kv_cache_config_from_groups, get_max_concurrency_for_kv_cache_config,
resolve_kv_cache_block_sizes). Re-exported by ``kvlab.core.kv_cache_utils``.

Left out, with the reason: the DeepseekV4 multi-group layout and HiddenStateCacheSpec
re-alignment (model specific, raise NotImplementedError). ``get_kv_cache_config`` is the
one-worker path (check, group, size); the multi-worker ``get_kv_cache_configs`` is in
``kvlab.core.kv_cache_sizing_workers``; unify_hybrid_kv_cache_specs (the hybrid allocator turned
off) is in ``kvlab.core.kv_cache_sizing_hybrid``.

The uniform-page-size rule: every layer of every group takes ``page_size`` bytes per block,
and one tensor per layer *position* is shared by the groups::

    num_blocks = available_memory // page_size // max(len(g.layer_names) for g in groups)

Example (the Qwen3-VL worked example of a widely read Chinese study note, whose premise is its
own, not the real model's: 80 layers, 8 KV heads of 128,
bf16, 16-token blocks, 56 GiB for the cache):
    >>> from kvlab.core.kv_cache_interface import FullAttentionSpec
    >>> spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16")
    >>> spec.page_size_bytes, get_num_blocks(VllmConfig(), 80, 56 * 1024**3, spec.page_size_bytes)
    (65536, 11468)
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace

from kvlab.core.config import VllmConfig
from kvlab.core.dtypes import cdiv
from kvlab.core.kv_cache_interface import (
    HiddenStateCacheSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVCacheSpecMergeError,
    KVCacheTensor,
    MambaSpec,
    SlidingWindowMLASpec,
    UniformTypeKVCacheSpecs,
)

logger = logging.getLogger(__name__)

__all__ = [
    "check_enough_kv_cache_memory",
    "create_kv_cache_group_specs",
    "estimate_max_model_len",
    "get_kv_cache_config",
    "get_kv_cache_config_from_groups",
    "get_kv_cache_groups",
    "get_max_concurrency_for_kv_cache_config",
    "get_num_blocks",
    "get_uniform_page_size",
    "is_kv_cache_page_size_uniform",
    "is_kv_cache_spec_uniform",
    "is_kv_cache_type_attention_free",
    "max_memory_usage_bytes",
    "may_override_num_blocks",
    "resolve_kv_cache_block_sizes",
    "unify_hybrid_kv_cache_specs",
    "unify_kv_cache_spec_page_size",
]

_GIB = 1 << 30


def max_memory_usage_bytes(vllm_config: VllmConfig, kv_cache_specs: Iterable[KVCacheSpec]) -> int:
    """Bytes one max_model_len request needs, summed over the given specs (bytes)."""
    return sum(spec.max_memory_usage_bytes(vllm_config) for spec in kv_cache_specs)


def _longest_fitting_len(fits, upper: int) -> int:
    """The largest length in [1, upper] with ``fits(length)`` true, for a monotone ``fits``
    (binary search; 0 when even 1 does not fit). Tokens.

    Mirrors: the search loop shared by vllm/v1/core/kv_cache_utils.py::estimate_max_model_len
    and ::_estimate_max_model_len_from_groups.
    """
    if not fits(1):
        return 0
    left, right, result = 1, upper, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def estimate_max_model_len(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> int:
    """Longest max_model_len whose one request fits ``available_memory`` (binary search, tokens).

    Mirrors: vllm/v1/core/kv_cache_utils.py::estimate_max_model_len (max_model_len is restored).
    """
    original = vllm_config.model_config.max_model_len

    def fits(model_len: int) -> bool:
        vllm_config.model_config.max_model_len = model_len
        return max_memory_usage_bytes(vllm_config, kv_cache_spec.values()) <= available_memory

    try:
        return _longest_fitting_len(fits, original)
    finally:
        vllm_config.model_config.max_model_len = original


def _check_enough_kv_cache_memory(
    available_memory: int,
    get_needed_memory: Callable[[], int],
    max_model_len: int,
    estimate_max_model_len: Callable[[int], int],
) -> None:
    """Raise ValueError unless ``get_needed_memory()`` bytes fit ``available_memory``.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_check_enough_kv_cache_memory (shared by the
    one-spec-dict check and the per-worker check on projected groups).
    """
    if available_memory <= 0:
        raise ValueError(
            "No available memory for the cache blocks (available_memory <= 0): give the KV "
            "cache a positive budget."
        )
    needed = get_needed_memory()
    if needed > available_memory:
        estimated = estimate_max_model_len(available_memory)
        hint = (
            f" Based on the available memory, the estimated maximum model length is {estimated}."
            if estimated > 0
            else ""
        )
        raise ValueError(
            f"To serve at least one request with the model's max seq len ({max_model_len}), "
            f"{needed / _GIB:.2f} GiB of KV cache is needed, more than the available KV cache "
            f"memory ({available_memory / _GIB:.2f} GiB).{hint} Decrease max_model_len or give "
            "the KV cache more memory."
        )


def check_enough_kv_cache_memory(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> None:
    """Check that one request of max_model_len tokens fits the KV cache budget.

    Mirrors: vllm/v1/core/kv_cache_utils.py::check_enough_kv_cache_memory.

    Args:
        vllm_config: Settings (max_model_len, ...).
        kv_cache_spec: layer name -> spec (no layers: nothing to check).
        available_memory: KV cache budget (bytes).

    Raises:
        ValueError: If the budget is <= 0, or smaller than one max_model_len request needs
            (the message names the model's max seq len and the estimated max_model_len that
            would fit).
    """
    if kv_cache_spec:
        _check_enough_kv_cache_memory(
            available_memory,
            lambda: max_memory_usage_bytes(vllm_config, kv_cache_spec.values()),
            vllm_config.model_config.max_model_len,
            lambda mem: estimate_max_model_len(vllm_config, kv_cache_spec, mem),
        )


def create_kv_cache_group_specs(
    kv_cache_spec: dict[str, KVCacheSpec], grouped_layer_names: list[list[str]]
) -> list[KVCacheGroupSpec]:
    """One KVCacheGroupSpec per list of layer names, with the layers' specs merged.

    Raises:
        KeyError: If a layer name is not in ``kv_cache_spec``.
        KVCacheSpecMergeError: If the layers of a group have different specs.
    """
    groups = []
    for layer_names in grouped_layer_names:
        layer_specs = [kv_cache_spec[name] for name in layer_names]
        groups.append(KVCacheGroupSpec(layer_names, layer_specs[0].merge(layer_specs)))
    return groups


def is_kv_cache_spec_uniform(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether all layers' specs merge into one (True for no layers)."""
    if not kv_cache_spec:
        return True
    specs = list(kv_cache_spec.values())
    try:
        specs[0].merge(specs)
    except KVCacheSpecMergeError:  # NOTE: vLLM catches AssertionError, which kvlab raises as this
        return False
    return True


def is_kv_cache_page_size_uniform(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether all layers have one page_size_bytes."""
    return len({spec.page_size_bytes for spec in kv_cache_spec.values()}) == 1


def is_kv_cache_type_attention_free(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether the model has no KV cache layers at all."""
    return not kv_cache_spec


def get_uniform_page_size(kv_cache_specs: Iterable[KVCacheSpec]) -> int:
    """The one page size of the specs (bytes).

    Raises:
        ValueError: If the specs have several page sizes (vLLM asserts).
    """
    page_sizes = {spec.page_size_bytes for spec in kv_cache_specs}
    if len(page_sizes) != 1:
        raise ValueError(f"expected one page size, got {sorted(page_sizes)}")
    return page_sizes.pop()


def may_override_num_blocks(vllm_config: VllmConfig, num_blocks: int) -> int:
    """``cache_config.num_gpu_blocks_override`` if set, else ``num_blocks`` (blocks)."""
    override = vllm_config.cache_config.num_gpu_blocks_override
    return num_blocks if override is None else override


def get_num_blocks(
    vllm_config: VllmConfig, num_layers: int, available_memory: int, page_size: int
) -> int:
    """``max(int(available_memory // page_size // num_layers), 0)``, or the override (blocks).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_num_blocks.

    Args:
        vllm_config: For num_gpu_blocks_override.
        num_layers: Layers sharing each block id, i.e. tensors per group (layers).
        available_memory: KV cache budget (bytes; int or float).
        page_size: Bytes of one block of one layer (bytes).

    Raises:
        ValueError: If num_layers or page_size is not positive.
    """
    if num_layers <= 0 or page_size <= 0:
        raise ValueError(f"num_layers ({num_layers}) and page_size ({page_size}) must be positive")
    num_blocks = max(int(available_memory // page_size // num_layers), 0)
    return may_override_num_blocks(vllm_config, num_blocks)


def unify_kv_cache_spec_page_size(kv_cache_spec: dict[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """Raise smaller layers' block_size until every page is the largest page size.

    Raises:
        NotImplementedError: If a page size does not divide the largest one (as vLLM).
    """
    page_sizes = {spec.page_size_bytes for spec in kv_cache_spec.values()}
    if len(page_sizes) <= 1:
        return kv_cache_spec
    max_page_size = max(page_sizes)
    unified = {}
    for name, spec in kv_cache_spec.items():
        if spec.page_size_bytes != max_page_size:
            if max_page_size % spec.page_size_bytes != 0:
                raise NotImplementedError(
                    "The page size of the layer is not divisible by the maximum page size. "
                    "Cannot unify by adjusting block_size."
                )
            spec = replace(
                spec, block_size=spec.block_size * (max_page_size // spec.page_size_bytes)
            )
        unified[name] = spec
    return unified


def _get_kv_cache_groups_uniform_page_size(
    kv_cache_spec: dict[str, KVCacheSpec],
) -> list[KVCacheGroupSpec]:
    """Hybrid models: one group per spec, split so every group has the same number of layers.

    Mirrors vLLM: the group size is the smallest layer count of any spec (or the largest when
    max < 1.5 * min, to avoid padding); spec type t's layers go to groups ``layers[i::n]``.
    """
    same_type_layers: dict[KVCacheSpec, list[str]] = defaultdict(list)
    for name, spec in kv_cache_spec.items():
        same_type_layers[spec].append(name)
    counts = [len(layers) for layers in same_type_layers.values()]
    group_size = max(counts) if max(counts) < min(counts) * 1.5 else min(counts)
    grouped_layers = []
    for layers in same_type_layers.values():
        num_padding_layers = group_size - len(layers) % group_size
        if num_padding_layers != group_size:
            logger.warning(
                "Add %d padding layers, may waste at most %.2f%% KV cache memory",
                num_padding_layers,
                num_padding_layers / len(layers) * 100,
            )
        num_groups = cdiv(len(layers), group_size)
        grouped_layers.extend(layers[i::num_groups] for i in range(num_groups))
    return create_kv_cache_group_specs(kv_cache_spec, grouped_layers)


def get_kv_cache_groups(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec]
) -> list[KVCacheGroupSpec]:
    """Split the layers into KV cache groups.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_kv_cache_groups (hybrid allocator disabled ->
    unify_hybrid_kv_cache_specs first, rewriting ``kv_cache_spec`` in place; uniform spec -> one
    group; uniform type -> one UniformTypeKVCacheSpecs group; else uniform page size grouping).

    Raises:
        NotImplementedError: For DeepseekV4-style SlidingWindowMLASpec mixes and
            HiddenStateCacheSpec layers (left out of kvlab).
        ValueError: With the hybrid allocator disabled, if the layers cannot be unified.
    """
    if getattr(vllm_config.scheduler_config, "disable_hybrid_kv_cache_manager", False):
        unify_hybrid_kv_cache_specs(kv_cache_spec)
    if is_kv_cache_type_attention_free(kv_cache_spec):
        return []
    if is_kv_cache_spec_uniform(kv_cache_spec):
        return create_kv_cache_group_specs(kv_cache_spec, [list(kv_cache_spec)])
    uniform_spec = UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)
    if uniform_spec is not None:
        return [KVCacheGroupSpec(list(uniform_spec.kv_cache_specs), uniform_spec)]
    if any(
        isinstance(s, (HiddenStateCacheSpec, SlidingWindowMLASpec)) for s in kv_cache_spec.values()
    ):
        raise NotImplementedError("DeepseekV4 and hidden-state cache layouts are not part of kvlab")
    return _get_kv_cache_groups_uniform_page_size(unify_kv_cache_spec_page_size(kv_cache_spec))


def get_kv_cache_config_from_groups(
    vllm_config: VllmConfig, kv_cache_groups: list[KVCacheGroupSpec], available_memory: int
) -> KVCacheConfig:
    """Size the pool and lay out the tensors for the given groups.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_kv_cache_config_from_groups.

    Args:
        vllm_config: Settings (num_gpu_blocks_override).
        kv_cache_groups: From get_kv_cache_groups.
        available_memory: KV cache budget (bytes).

    Returns:
        The KVCacheConfig (num_blocks = 1 for attention-free models: the null block).

    Raises:
        NotImplementedError: For several UniformTypeKVCacheSpecs groups (DeepseekV4).
        ValueError: If the groups do not share one page size.
    """
    if not kv_cache_groups:
        return KVCacheConfig(num_blocks=1, kv_cache_tensors=[], kv_cache_groups=kv_cache_groups)
    first_spec = kv_cache_groups[0].kv_cache_spec
    if len(kv_cache_groups) == 1 and isinstance(first_spec, UniformTypeKVCacheSpecs):
        num_blocks = may_override_num_blocks(
            vllm_config, available_memory // first_spec.page_size_bytes
        )
        tensors = [
            KVCacheTensor(
                size=first_spec.kv_cache_specs[name].page_size_bytes * num_blocks, shared_by=[name]
            )
            for name in kv_cache_groups[0].layer_names
        ]
    elif all(isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs) for g in kv_cache_groups):
        raise NotImplementedError("the DeepseekV4 multi-group layout is not part of kvlab")
    else:
        group_size = max(len(g.layer_names) for g in kv_cache_groups)
        page_size = get_uniform_page_size([g.kv_cache_spec for g in kv_cache_groups])
        num_blocks = get_num_blocks(vllm_config, group_size, available_memory, page_size)
        tensors = [
            KVCacheTensor(
                size=page_size * num_blocks,
                shared_by=[g.layer_names[i] for g in kv_cache_groups if i < len(g.layer_names)],
            )
            for i in range(group_size)
        ]
    return KVCacheConfig(
        num_blocks=num_blocks, kv_cache_tensors=tensors, kv_cache_groups=kv_cache_groups
    )


def get_kv_cache_config(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> KVCacheConfig:
    """One worker's KVCacheConfig: check the budget, group the layers, size the pool.

    Mirrors: the per-worker steps of vllm/v1/core/kv_cache_utils.py::get_kv_cache_configs.

    Raises:
        ValueError: If one max_model_len request does not fit (see check_enough_kv_cache_memory).
    """
    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)
    groups = get_kv_cache_groups(vllm_config, kv_cache_spec)
    return get_kv_cache_config_from_groups(vllm_config, groups, available_memory)


def get_max_concurrency_for_kv_cache_config(
    vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
) -> float:
    """How many max_model_len requests the pool holds at once (a float, e.g. 1.4).

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_max_concurrency_for_kv_cache_config.
    """
    groups = kv_cache_config.kv_cache_groups
    num_layer_per_group = max(len(g.layer_names) for g in groups)
    per_request = num_layer_per_group * max_memory_usage_bytes(
        vllm_config, (g.kv_cache_spec for g in groups)
    )
    memory_per_block = groups[0].kv_cache_spec.page_size_bytes * num_layer_per_group
    return kv_cache_config.num_blocks / cdiv(per_request, memory_per_block)


def resolve_kv_cache_block_sizes(
    kv_cache_config: KVCacheConfig, vllm_config: VllmConfig
) -> tuple[int, int]:
    """``(scheduler_block_size, hash_block_size)`` in tokens.

    Mirrors: vllm/v1/core/kv_cache_utils.py::resolve_kv_cache_block_sizes. One group:
    ``block_size * dcp * pcp`` twice. Several: the LCM of the groups' block sizes, and the
    hash_block_size override or their GCD (or the LCM when hashing is unused or a Mamba group
    has its own block size).

    Raises:
        ValueError: For several groups with context parallelism, or a hash_block_size that
            does not divide every group's block size.
    """
    cache = vllm_config.cache_config
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    pcp = vllm_config.parallel_config.prefill_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    if len(groups) <= 1:
        return cache.block_size * dcp * pcp, cache.block_size * dcp * pcp
    if dcp != 1 or pcp != 1:
        raise ValueError(
            "Hybrid KV cache groups with multiple block sizes do not support context parallelism."
        )
    sizes = [g.kv_cache_spec.block_size for g in groups]
    scheduler_block_size = math.lcm(*sizes)
    if not (cache.enable_prefix_caching or vllm_config.kv_transfer_config is not None):
        return scheduler_block_size, scheduler_block_size
    if any(
        isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.block_size != cache.block_size
        for g in groups
    ):
        return scheduler_block_size, scheduler_block_size
    hash_block_size = (
        cache.hash_block_size if cache.hash_block_size is not None else math.gcd(*sizes)
    )
    if any(size % hash_block_size for size in sizes):
        raise ValueError(
            f"Invalid hash_block_size={hash_block_size}; all KV cache group block sizes must be "
            f"divisible by it. Got group block sizes={sizes}."
        )
    return scheduler_block_size, hash_block_size


# NOTE: imported last: the hybrid-off conversion uses this module's is_kv_cache_spec_uniform.
from kvlab.core.kv_cache_sizing_hybrid import unify_hybrid_kv_cache_specs  # noqa: E402
