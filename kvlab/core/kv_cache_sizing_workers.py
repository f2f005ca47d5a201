"""KV-cache sizing across workers: one config per worker, one for the scheduler.

Mirrors: vllm/v1/core/kv_cache_utils.py::{get_kv_cache_configs, generate_scheduler_kv_cache_config,
_project_kv_cache_groups_to_worker}. Workers (pipeline stages, tensor-parallel ranks) each report
their layers' specs and their free memory; the layers are grouped once for the whole model, each
worker gets the groups restricted to its own layers, and every worker ends with the smallest
``num_blocks`` of all (tensors shrunk to match) so one scheduler can manage them all.

Differs: ``max_model_len`` auto-fit (vLLM's ``original_max_model_len == -1``) is not part of kvlab
(ValueError); the per-worker memory check is ``check_enough_kv_cache_memory`` on that worker's specs.
"""

from __future__ import annotations

import copy

from kvlab.core.config import VllmConfig
from kvlab.core.kv_cache_interface import (
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVCacheSpecMergeError,
    UniformTypeKVCacheSpecs,
)
from kvlab.core.kv_cache_sizing import (
    check_enough_kv_cache_memory,
    get_kv_cache_config_from_groups,
    get_kv_cache_groups,
    get_uniform_page_size,
)

__all__ = [
    "generate_scheduler_kv_cache_config",
    "get_kv_cache_configs",
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


def _pool_bytes_per_block(groups: list[KVCacheGroupSpec]) -> int:
    """Bytes one block takes in a worker's pool (the divisor that turns memory into blocks)."""
    if len(groups) == 1 and isinstance(groups[0].kv_cache_spec, UniformTypeKVCacheSpecs):
        return groups[0].kv_cache_spec.page_size_bytes
    group_size = max(len(g.layer_names) for g in groups)
    return get_uniform_page_size([g.kv_cache_spec for g in groups]) * group_size


def get_kv_cache_configs(
    vllm_config: VllmConfig,
    kv_cache_specs: list[dict[str, KVCacheSpec]],
    available_memory: list[int],
) -> list[KVCacheConfig]:
    """One KVCacheConfig per worker, all with the same (smallest) num_blocks.

    Mirrors: vllm/v1/core/kv_cache_utils.py::get_kv_cache_configs.

    Args:
        vllm_config: Settings (max_model_len, num_gpu_blocks_override, ...).
        kv_cache_specs: Per worker, layer name -> spec.
        available_memory: Per worker, the KV cache budget (bytes).

    Returns:
        The workers' configs, in the order given.

    Raises:
        KVCacheSpecMergeError: (a ValueError and an AssertionError, as vLLM asserts) If one layer
            has different specs on two workers, or a worker's layer is in no group.
        ValueError: If the lists differ in length, max_model_len is -1 (auto-fit), or a worker's
            budget cannot hold one max_model_len request.
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
        raise ValueError("max_model_len auto-fit (-1) is not part of kvlab: give max_model_len")
    for worker_spec, groups, mem in zip(kv_cache_specs, per_worker, available_memory, strict=True):
        if groups:
            check_enough_kv_cache_memory(vllm_config, worker_spec, mem)

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
