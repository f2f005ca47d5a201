"""Sizing across workers: global groups, per-worker projection, the smallest num_blocks for all."""
from __future__ import annotations

import pytest

from kvlab.core.config import VllmConfig
from kvlab.core.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
from kvlab.core.kv_cache_utils import (
    generate_scheduler_kv_cache_config,
    get_kv_cache_configs,
    _project_kv_cache_groups_to_worker,
)

PAGE = 2 * 16 * 1 * 8 * 4  # K and V, block 16, 1 head of 8, float32: 1024 bytes


def _full():
    return FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=8, dtype="float32")


def test_pipeline_stages_share_the_smallest_num_blocks():
    cfg = VllmConfig(max_model_len=64)
    workers = [{"a": _full(), "b": _full()}, {"c": _full(), "d": _full()}]
    configs = get_kv_cache_configs(cfg, workers, [100 * 2 * PAGE, 50 * 2 * PAGE])
    assert [c.num_blocks for c in configs] == [50, 50]
    assert [g.layer_names for g in configs[0].kv_cache_groups] == [["a", "b"]]
    assert [g.layer_names for g in configs[1].kv_cache_groups] == [["c", "d"]]
    # the richer worker's tensors shrink to 50 blocks
    assert [(t.size, t.shared_by) for t in configs[0].kv_cache_tensors] == [
        (50 * PAGE, ["a"]), (50 * PAGE, ["b"])]
    sched = generate_scheduler_kv_cache_config(configs)
    assert sched.num_blocks == 50 and sched.kv_cache_groups[0].layer_names == ["a", "b"]
    assert sched is not configs[0]


def test_num_gpu_blocks_override_sets_every_worker():
    cfg = VllmConfig(max_model_len=64, num_gpu_blocks_override=7)
    configs = get_kv_cache_configs(cfg, [{"a": _full()}, {"b": _full()}], [10**6, 10**7])
    assert [c.num_blocks for c in configs] == [7, 7]


def test_projection_keeps_empty_groups_and_drops_eagle_flag_there():
    from kvlab.core.kv_cache_interface import KVCacheGroupSpec

    sw = SlidingWindowSpec(block_size=16, num_kv_heads=1, head_size=8, dtype="float32",
                           sliding_window=32)
    groups = [KVCacheGroupSpec(["a", "c"], _full()), KVCacheGroupSpec(["b"], sw, is_eagle_group=True)]
    projected = _project_kv_cache_groups_to_worker(groups, {"c": _full()})
    assert [(g.layer_names, g.is_eagle_group) for g in projected] == [(["c"], False), ([], False)]


def test_disagreeing_workers_are_rejected_with_both_error_kinds():
    cfg = VllmConfig(max_model_len=64)
    other = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=8, dtype="float32")
    for exc in (ValueError, AssertionError):
        with pytest.raises(exc, match="different across workers"):
            get_kv_cache_configs(cfg, [{"a": _full()}, {"a": other}], [10**6, 10**6])
    configs = get_kv_cache_configs(cfg, [{"a": _full()}, {"b": _full()}], [10 * PAGE, 20 * PAGE])
    configs[1].num_blocks = 3
    with pytest.raises(AssertionError, match="num_blocks"):
        generate_scheduler_kv_cache_config(configs)
    with pytest.raises(ValueError, match="memory budgets"):
        get_kv_cache_configs(cfg, [{"a": _full()}], [1, 2])


# Numbers below were checked against vLLM 0.22.1's functions on the same specs.
def _sliding():
    return SlidingWindowSpec(block_size=16, num_kv_heads=1, head_size=8, dtype="float32",
                             sliding_window=32)


def test_memory_is_counted_on_groups_with_their_padding():
    from kvlab.core.kv_cache_utils import (
        _estimate_max_model_len_from_groups,
        _max_memory_usage_bytes_from_groups,
        get_kv_cache_groups,
        max_memory_usage_bytes,
    )

    # 8 full + 9 sliding layers: two groups padded to 9 layer slots each. One request of 64
    # tokens: full 4 blocks, sliding cdiv(min(31 + 16, 64), 16) + 1 = 4 blocks.
    cfg = VllmConfig(max_model_len=64, max_num_batched_tokens=16)
    specs = {**{f"f{i}": _full() for i in range(8)}, **{f"s{i}": _sliding() for i in range(9)}}
    groups = get_kv_cache_groups(cfg, dict(specs))
    assert [len(g.layer_names) for g in groups] == [8, 9]
    assert _max_memory_usage_bytes_from_groups(cfg, groups) == 9 * PAGE * (4 + 4)  # 73728
    assert max_memory_usage_bytes(cfg, specs.values()) == 17 * 4 * PAGE  # 69632: no padding
    # 5 blocks of 9 pages: 32 tokens (full 2 + sliding 2 + 1); 33 would need 3 + 4.
    assert _estimate_max_model_len_from_groups(cfg, groups, 9 * PAGE * 5) == 32
    assert cfg.max_model_len == 64
    with pytest.raises(ValueError, match=r"len \(64\).* estimated maximum model length is 32\."):
        get_kv_cache_configs(cfg, [specs], [9 * PAGE * 5])


def test_auto_fit_lowers_max_model_len_to_the_poorest_stage():
    stages = [{"a": _full(), "b": _full()}, {"c": _full(), "d": _full()}]
    # stage 2 holds 25 blocks of 2 pages: 25 * 16 = 400 tokens
    cfg = VllmConfig(max_model_len=1024, original_max_model_len=-1)
    configs = get_kv_cache_configs(cfg, stages, [40 * 2 * PAGE, 25 * 2 * PAGE])
    assert cfg.max_model_len == 400 and [c.num_blocks for c in configs] == [25, 25]
    assert [[t.size for t in c.kv_cache_tensors] for c in configs] == [[25 * PAGE] * 2] * 2
    # the override decides the capacity: 10 blocks are 160 tokens
    cfg = VllmConfig(max_model_len=1024, original_max_model_len=-1, num_gpu_blocks_override=10)
    configs = get_kv_cache_configs(cfg, stages, [40 * 2 * PAGE, 25 * 2 * PAGE])
    assert cfg.max_model_len == 160 and [c.num_blocks for c in configs] == [10, 10]
    # everything fits: max_model_len stays
    cfg = VllmConfig(max_model_len=64, original_max_model_len=-1)
    get_kv_cache_configs(cfg, stages, [40 * 2 * PAGE, 25 * 2 * PAGE])
    assert cfg.max_model_len == 64
    cfg = VllmConfig(max_model_len=1024, original_max_model_len=-1)
    with pytest.raises(ValueError, match="Cannot auto-fit max_model_len"):
        get_kv_cache_configs(cfg, stages, [100, 100])
    assert cfg.max_model_len == 1024
