"""KV-cache sizing across workers: one config per worker, one for the scheduler.

Mirrors: vllm/v1/core/kv_cache_utils.py::{get_kv_cache_configs, generate_scheduler_kv_cache_config,
_project_kv_cache_groups_to_worker}. Workers (pipeline stages, tensor-parallel ranks) each report
their layers' specs and their free memory; the layers are grouped once for the whole model, each
worker gets the groups restricted to its own layers, and every worker ends with the smallest
``num_blocks`` of all (tensors shrunk to match) so one scheduler can manage them all.

The memory a worker needs for one max_model_len request is counted on its projected groups, so
the padding of hybrid layouts counts (8 full + 9 sliding-window layers take 9 + 9 layer slots).
With ``original_max_model_len == -1`` (vLLM's ``--max-model-len -1``; kvlab's VllmConfig has the
same field) max_model_len is first lowered to the longest that fits on every worker.
"""

from __future__ import annotations

import copy
import logging

from kvlab.core.config import VllmConfig
from kvlab.core.dtypes import cdiv
from kvlab.core.kv_cache_interface import (
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVCacheSpecMergeError,
    UniformTypeKVCacheSpecs,
)
from kvlab.core.kv_cache_sizing import (
    _check_enough_kv_cache_memory,
    _longest_fitting_len,
    get_kv_cache_config_from_groups,
    get_kv_cache_groups,
    get_uniform_page_size,
)

logger = logging.getLogger(__name__)

__all__ = [
    "estimate_max_model_len_from_groups",
    "generate_scheduler_kv_cache_config",
    "get_kv_cache_configs",
    "max_memory_usage_bytes_from_groups",
    "project_kv_cache_groups_to_worker",
]


def project_kv_cache_groups_to_worker(
    global_kv_cache_groups: list[KVCacheGroupSpec], worker_spec: dict[str, KVCacheSpec]
) -> list[KVCacheGroupSpec]:
    """The global groups restricted to one worker's layers (same order; a group may be empty).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_project_kv_cache_groups_to_worker.

    Args:
        global_kv_cache_groups: The whole model's groups.
        worker_spec: layer name -> spec of the layers this worker holds.

    Returns:
        One KVCacheGroupSpec per global group; a UniformTypeKVCacheSpecs keeps only this worker's
        layers, and a group with no layer here is not an EAGLE group.
    """
    projected: list[KVCacheGroupSpec] = []
    for group in global_kv_cache_groups:
        names = [name for name in group.layer_names if name in worker_spec]
        spec = group.kv_cache_spec
        if names and isinstance(spec, UniformTypeKVCacheSpecs):
            spec = UniformTypeKVCacheSpecs(
                block_size=spec.block_size,
                kv_cache_specs={name: spec.kv_cache_specs[name] for name in names},
            )
        projected.append(
            KVCacheGroupSpec(names, spec, is_eagle_group=group.is_eagle_group and bool(names))
        )
    return projected


def _all_uniform_type(groups: list[KVCacheGroupSpec]) -> bool:
    return all(isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs) for g in groups)


def _num_layer_tuples(groups: list[KVCacheGroupSpec]) -> int:
    return max(g.kv_cache_spec.get_num_layer_tuples() for g in groups)


def _pool_bytes_per_block(groups: list[KVCacheGroupSpec]) -> int:
    """Bytes one block takes in a worker's pool (the divisor that turns memory into blocks).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_pool_bytes_per_block.
    """
    if len(groups) == 1 and isinstance(groups[0].kv_cache_spec, UniformTypeKVCacheSpecs):
        return groups[0].kv_cache_spec.page_size_bytes
    if _all_uniform_type(groups):  # DeepseekV4 layout
        return sum(groups[0].kv_cache_spec.get_page_sizes()) * _num_layer_tuples(groups)
    group_size = max(len(g.layer_names) for g in groups)
    return get_uniform_page_size([g.kv_cache_spec for g in groups]) * group_size


def max_memory_usage_bytes_from_groups(
    vllm_config: VllmConfig, kv_cache_groups: list[KVCacheGroupSpec]
) -> int:
    """Bytes one max_model_len request takes in a pool laid out for these groups (bytes).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_max_memory_usage_bytes_from_groups. With
    several groups every group's blocks take ``group_size`` layer pages, padding included:
    ``group_size * page_size * sum(cdiv(group max bytes, page_size))``.
    """
    if not kv_cache_groups:
        return 0
    first = kv_cache_groups[0].kv_cache_spec
    if len(kv_cache_groups) == 1 and isinstance(first, UniformTypeKVCacheSpecs):
        return sum(
            spec.max_memory_usage_bytes(vllm_config) for spec in first.kv_cache_specs.values()
        )
    if _all_uniform_type(kv_cache_groups):  # DeepseekV4 layout
        tuple_bytes = sum(first.get_page_sizes()) * _num_layer_tuples(kv_cache_groups)
        return sum(
            g.kv_cache_spec.max_memory_usage_pages(vllm_config) * tuple_bytes
            for g in kv_cache_groups
        )
    group_size = max(len(g.layer_names) for g in kv_cache_groups)
    page_size = get_uniform_page_size([g.kv_cache_spec for g in kv_cache_groups])
    blocks = sum(
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(vllm_config), page_size)
        for g in kv_cache_groups
    )
    return group_size * page_size * blocks


def estimate_max_model_len_from_groups(
    vllm_config: VllmConfig, kv_cache_groups: list[KVCacheGroupSpec], available_memory: int
) -> int:
    """Longest max_model_len whose one request fits these groups' pool (binary search, tokens).

    Mirrors: vllm/v1/core/kv_cache_utils.py::_estimate_max_model_len_from_groups
    (0 if one token does not fit; max_model_len is restored).
    """
    model_config = vllm_config.model_config
    original = model_config.max_model_len

    def fits(model_len: int) -> bool:
        model_config.max_model_len = model_len
        needed = max_memory_usage_bytes_from_groups(vllm_config, kv_cache_groups)
        return needed <= available_memory

    try:
        return _longest_fitting_len(fits, original)
    finally:
        model_config.max_model_len = original


def _auto_fit_max_model_len(
    vllm_config: VllmConfig,
    groups_per_worker: list[list[KVCacheGroupSpec]],
    available_memory: list[int],
) -> None:
    """Lower max_model_len (in place) to the longest every worker can hold one request of.

    Mirrors: vllm/v1/core/kv_cache_utils.py::_auto_fit_max_model_len.
    """
    model_config = vllm_config.model_config
    original = model_config.max_model_len
    if all(not groups for groups in groups_per_worker):
        return  # attention-free: nothing to fit
    fit = original
    for groups, mem in zip(groups_per_worker, available_memory, strict=True):
        if groups:
            fit = min(fit, estimate_max_model_len_from_groups(vllm_config, groups, mem))
    if fit <= 0:
        raise ValueError(
            "Cannot auto-fit max_model_len: not enough memory to serve even a single token; "
            "give the KV cache more memory."
        )
    if fit < original:
        logger.info("Auto-fit max_model_len: reduced from %d to %d", original, fit)
        model_config.max_model_len = fit


def get_kv_cache_configs(
    vllm_config: VllmConfig,
    kv_cache_specs: list[dict[str, KVCacheSpec]],
    available_memory: list[int],
) -> list[KVCacheConfig]:
    """One KVCacheConfig per worker, all with the same (smallest) num_blocks.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_kv_cache_configs: merge the workers' specs,
    group the whole model (get_kv_cache_groups: unifies specs in place when the hybrid manager
    is disabled), project the groups on each worker, apply num_gpu_blocks_override to the
    budgets, auto-fit max_model_len if ``original_max_model_len == -1``, check each worker can
    hold one max_model_len request, size each worker, then give every worker the smallest
    num_blocks and shrink its tensors to match.

    Args:
        vllm_config: Settings (max_model_len, num_gpu_blocks_override, ...); max_model_len is
            lowered in place by auto-fit.
        kv_cache_specs: Per worker, layer name -> spec.
        available_memory: Per worker, the KV cache budget (bytes).

    Returns:
        The workers' configs, in the order given.

    Raises:
        KVCacheSpecMergeError: (a ValueError and an AssertionError, as vLLM asserts) If one layer
            has different specs on two workers, or a worker's layer is in no group.
        ValueError: If the lists differ in length, or a worker's budget cannot hold one
            max_model_len request (or, with auto-fit, one token).
    """
    if len(kv_cache_specs) != len(available_memory):
        raise ValueError(
            f"get_kv_cache_configs: {len(kv_cache_specs)} workers' specs but "
            f"{len(available_memory)} memory budgets; give one of each per worker"
        )
    merged: dict[str, KVCacheSpec] = {}
    for worker_spec in kv_cache_specs:
        for name, spec in worker_spec.items():
            if name not in merged:
                merged[name] = spec
            elif merged[name] != spec:
                raise KVCacheSpecMergeError(
                    f"The KV cache specs for the same layer are different across workers "
                    f"({name!r}: {merged[name]} vs {spec}). This is not supported yet."
                )
    global_groups = get_kv_cache_groups(vllm_config, merged)
    per_worker = [project_kv_cache_groups_to_worker(global_groups, s) for s in kv_cache_specs]

    override = vllm_config.cache_config.num_gpu_blocks_override
    if override is not None:
        available_memory = [
            mem if not groups else override * _pool_bytes_per_block(groups)
            for groups, mem in zip(per_worker, available_memory, strict=True)
        ]
    if getattr(vllm_config.model_config, "original_max_model_len", None) == -1:
        _auto_fit_max_model_len(vllm_config, per_worker, available_memory)
    for groups, mem in zip(per_worker, available_memory, strict=True):
        if groups:
            _check_enough_kv_cache_memory(
                mem,
                lambda groups=groups: max_memory_usage_bytes_from_groups(vllm_config, groups),
                vllm_config.model_config.max_model_len,
                lambda m, groups=groups: estimate_max_model_len_from_groups(
                    vllm_config, groups, m
                ),
            )

    configs = []
    for groups, worker_spec, mem in zip(per_worker, kv_cache_specs, available_memory, strict=True):
        if sum(len(g.layer_names) for g in groups) != len(worker_spec):
            raise KVCacheSpecMergeError("Some layers are not assigned to any group.")
        configs.append(get_kv_cache_config_from_groups(vllm_config, groups, mem))

    min_num_blocks = min(cfg.num_blocks for cfg in configs)
    for cfg in configs:
        old = cfg.num_blocks
        cfg.num_blocks = min_num_blocks
        for tensor in cfg.kv_cache_tensors:
            tensor.size = tensor.size // old * min_num_blocks
    return configs


def generate_scheduler_kv_cache_config(kv_cache_configs: list[KVCacheConfig]) -> KVCacheConfig:
    """The scheduler's config: a copy of the first worker's, one spec per UniformType group.

    Mirrors: vllm/v1/core/kv_cache_utils.py::generate_scheduler_kv_cache_config.

    Raises:
        KVCacheSpecMergeError: (a ValueError and an AssertionError) If the workers' num_blocks differ.
    """
    if any(cfg.num_blocks != kv_cache_configs[0].num_blocks for cfg in kv_cache_configs):
        raise KVCacheSpecMergeError(
            f"workers disagree on num_blocks: {[cfg.num_blocks for cfg in kv_cache_configs]}"
        )
    cfg = copy.deepcopy(kv_cache_configs[0])
    for group in cfg.kv_cache_groups:
        if isinstance(group.kv_cache_spec, UniformTypeKVCacheSpecs):
            group.kv_cache_spec = next(iter(group.kv_cache_spec.kv_cache_specs.values()))
    return cfg
