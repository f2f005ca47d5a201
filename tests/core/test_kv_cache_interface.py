"""KV-cache specs, dtypes, groups and block-count sizing.

Scenarios follow vLLM 0.22.1's tests/v1/core/test_kv_cache_utils.py (merge, uniformity,
estimate_max_model_len, max concurrency); the byte counts are worked out in the comments.
"""

from __future__ import annotations

import pytest

from kvlab.core.config import VllmConfig
from kvlab.core.dtypes import get_dtype_size
from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpecKind,
    KVCacheSpecMergeError,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
    get_kv_cache_spec_kind,
    get_kv_cache_spec_sliding_window,
)
from kvlab.core.kv_cache_utils import (
    check_enough_kv_cache_memory,
    estimate_max_model_len,
    get_kv_cache_config,
    get_kv_cache_config_from_groups,
    get_kv_cache_groups,
    get_max_concurrency_for_kv_cache_config,
    get_num_blocks,
    is_kv_cache_spec_uniform,
    resolve_kv_cache_block_sizes,
    unify_kv_cache_spec_page_size,
)

GIB = 1 << 30


def full(num_kv_heads=32, block_size=16, head_size=64, dtype="float32", **kw):
    return FullAttentionSpec(
        block_size=block_size, num_kv_heads=num_kv_heads, head_size=head_size, dtype=dtype, **kw
    )


def sw(window, num_kv_heads=32, block_size=16, head_size=64, dtype="float32"):
    return SlidingWindowSpec(
        block_size=block_size,
        num_kv_heads=num_kv_heads,
        head_size=head_size,
        dtype=dtype,
        sliding_window=window,
    )


# --- dtypes ----------------------------------------------------------------------------


class _FakeTorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


@pytest.mark.parametrize(
    ("dtype", "size"),
    [
        ("float32", 4),
        ("bfloat16", 2),
        ("float16", 2),
        ("half", 2),
        ("fp8", 1),
        ("fp8_e5m2", 1),
        ("int8", 1),
        ("uint8", 1),
        ("float64", 8),
        (_FakeTorchDtype("bfloat16"), 2),
        (_FakeTorchDtype("float8_e4m3fn"), 1),
    ],
)
def test_get_dtype_size(dtype, size):
    assert get_dtype_size(dtype) == size


def test_unknown_dtype_is_rejected_at_construction():
    with pytest.raises(ValueError, match="unknown dtype 'float13'"):
        full(dtype="float13")
    with pytest.raises(ValueError, match="num_kv_heads must be a positive int"):
        full(num_kv_heads=0)


# --- page sizes and memory -------------------------------------------------------------


def test_page_sizes():
    # K and V: 2 * block_size * heads * head_size * dtype bytes
    assert full(num_kv_heads=3, head_size=64).page_size_bytes == 2 * 16 * 3 * 64 * 4
    assert (
        full(num_kv_heads=3, head_size=64, head_size_v=32).page_size_bytes == 16 * 3 * (64 + 32) * 4
    )
    assert sw(100, num_kv_heads=2, dtype="bfloat16").page_size_bytes == 2 * 16 * 2 * 64 * 2
    padded = full(num_kv_heads=1, head_size=8, page_size_padded=4096)
    assert (padded.page_size_bytes, padded.real_page_size_bytes) == (4096, 2 * 16 * 8 * 4)
    # per-token-head int8: + one fp32 scale for K and for V per token and head
    int8 = full(
        num_kv_heads=2, head_size=64, dtype="int8", kv_quant_mode=KVQuantMode.INT8_PER_TOKEN_HEAD
    )
    assert int8.page_size_bytes == 2 * 16 * 2 * 64 * 1 + 2 * 16 * 2 * 4
    # MLA: one latent vector per token; alignment pads the page
    mla = MLAAttentionSpec(
        block_size=16, num_kv_heads=1, head_size=576, dtype="bfloat16", alignment=4096
    )
    assert (mla.real_page_size_bytes, mla.page_size_bytes) == (16 * 576 * 2, 20480)
    mamba = MambaSpec(block_size=16, shapes=((2, 3), (4,)), dtypes=("float32", "bfloat16"))
    assert mamba.page_size_bytes == 2 * 3 * 4 + 4 * 2
    # as vLLM: shapes and dtypes are zipped, a shape without a dtype adds nothing
    assert MambaSpec(block_size=16, shapes=((2, 3), (4,)), dtypes=("float32",)).page_size_bytes == 24
    assert MambaSpec(block_size=16, shapes=((2, 3),), dtypes=()).page_size_bytes == 0


def test_max_memory_usage_bytes():
    cfg = VllmConfig(
        max_model_len=1000, max_num_batched_tokens=48, max_num_encoder_input_tokens=300
    )
    page = 2 * 16 * 32 * 64 * 4
    assert full().max_memory_usage_bytes(cfg) == 63 * page  # cdiv(1000, 16)
    # sliding window: cdiv(min(100 - 1 + 48, 1000), 16) + 1 blocks
    assert sw(100).max_memory_usage_bytes(cfg) == (10 + 1) * page
    chunked = ChunkedLocalAttentionSpec(
        block_size=16, num_kv_heads=32, head_size=64, dtype="float32", attention_chunk_size=64
    )
    assert chunked.max_memory_usage_bytes(cfg) == 7 * page  # cdiv(min(64 + 48, 1000), 16)
    cross = CrossAttentionSpec(block_size=16, num_kv_heads=32, head_size=64, dtype="float32")
    assert cross.max_memory_usage_bytes(cfg) == 19 * page  # cdiv(300, 16)
    enc = EncoderOnlyAttentionSpec(block_size=16, num_kv_heads=32, head_size=64, dtype="float32")
    assert enc.max_memory_usage_bytes(cfg) == 0
    mamba = MambaSpec(block_size=16, shapes=((10,),), dtypes=("float32",), num_speculative_blocks=1)
    assert mamba.max_memory_usage_bytes(cfg) == 40 * 2
    assert (
        mamba.max_memory_usage_bytes(VllmConfig(max_model_len=1000, mamba_cache_mode="align"))
        == 40 * 3
    )
    assert mamba.max_memory_usage_bytes(
        VllmConfig(max_model_len=1000, mamba_cache_mode="all")
    ) == 40 * (63 + 1)
    with pytest.raises(ValueError, match="DCP"):
        sw(100).max_memory_usage_bytes(VllmConfig(decode_context_parallel_size=2))
    # DCP x PCP split the sequence for full attention: cdiv(cdiv(1000, 4), 16) blocks
    dcp = VllmConfig(
        max_model_len=1000, decode_context_parallel_size=2, prefill_context_parallel_size=2
    )
    assert full().max_memory_usage_bytes(dcp) == 16 * page


# --- merge, uniformity, kinds ----------------------------------------------------------


def test_merge_kv_cache_spec():
    merged = full().merge([full(), full()])
    assert (
        merged.block_size,
        merged.num_kv_heads,
        merged.head_size,
        merged.dtype,
        merged.sliding_window,
    ) == (16, 32, 64, "float32", None)
    with pytest.raises(KVCacheSpecMergeError):
        full().merge([full(32), full(16)])
    with pytest.raises(KVCacheSpecMergeError):
        full().merge([full(), sw(1)])
    with pytest.raises(KVCacheSpecMergeError):
        sw(1).merge([full(), sw(1)])
    with pytest.raises(ValueError, match="same window size"):
        full().merge([full(), full(sliding_window=1), full(sliding_window=2)])
    assert full().merge([full(sliding_window=1), full(sliding_window=1)]).sliding_window == 1
    assert full().merge([full(sliding_window=1), full()]).sliding_window == 1
    sink = SinkFullAttentionSpec(
        block_size=16, num_kv_heads=2, head_size=8, dtype="float16", sink_len=4
    )
    assert SinkFullAttentionSpec.merge([sink, sink]) == sink


def test_is_kv_cache_spec_uniform():
    assert is_kv_cache_spec_uniform({"a": full(), "b": full()})
    assert is_kv_cache_spec_uniform({"a": full(), "b": full(sliding_window=1)})
    assert not is_kv_cache_spec_uniform({"a": full(), "b": sw(1)})
    assert is_kv_cache_spec_uniform({"a": sw(1), "b": sw(1)})
    assert not is_kv_cache_spec_uniform({"a": sw(1), "b": sw(2)})
    assert is_kv_cache_spec_uniform({})


def test_spec_kinds_and_windows():
    mla = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype="bfloat16")
    assert get_kv_cache_spec_kind(mla) is KVCacheSpecKind.MLA_ATTENTION
    assert get_kv_cache_spec_kind(full()) is KVCacheSpecKind.FULL_ATTENTION
    assert get_kv_cache_spec_kind(sw(8)) is KVCacheSpecKind.SLIDING_WINDOW
    assert (
        get_kv_cache_spec_sliding_window(sw(8)) == 8
        and get_kv_cache_spec_sliding_window(full()) is None
    )
    uniform = UniformTypeKVCacheSpecs(block_size=16, kv_cache_specs={"a": full(2), "b": full(4)})
    assert get_kv_cache_spec_kind(uniform) is KVCacheSpecKind.FULL_ATTENTION
    mixed = UniformTypeKVCacheSpecs(block_size=16, kv_cache_specs={"a": full(), "b": sw(8)})
    assert get_kv_cache_spec_kind(mixed) is KVCacheSpecKind.UNKNOWN
    assert (
        UniformTypeKVCacheSpecs.from_specs({"a": full(2), "b": full(4)}).page_size_bytes
        == full(2).page_size_bytes + full(4).page_size_bytes
    )
    assert UniformTypeKVCacheSpecs.from_specs({"a": sw(8), "b": sw(16)}) is None


def test_group_spec_and_config_defaults():
    group = KVCacheGroupSpec(["l0"], full())
    assert group.is_eagle_group is False
    cfg = KVCacheConfig(num_blocks=10, kv_cache_tensors=[], kv_cache_groups=[group])
    assert not cfg.has_mamba_layers and not cfg.needs_kv_cache_zeroing


# --- sizing ----------------------------------------------------------------------------


def test_qwen3_vl_worked_example():
    """Study notes section 9.1 (Qwen3-VL 235B): 80 full-attention layers, 8 KV heads of 128,
    bf16, block_size 16, 70% of 80 GiB for the cache, max_model_len 131072.

    The notes' per-layer page (65536 B), per-request block count (8192) and "about 1.3 to 1.4
    requests" follow; their "~10937 blocks" divides 56 GiB by 5.12 *decimal* MB, but one
    block of all 80 layers is 80 * 65536 = 5 MiB, so vLLM's formula gives 11468.
    """
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16")
    assert spec.page_size_bytes == 2 * 16 * 8 * 128 * 2 == 65536
    available_memory = 80 * 0.7 * 1024 * 1024 * 1024  # the notes' expression (a float)
    cfg = VllmConfig(max_model_len=131072)
    num_blocks = get_num_blocks(cfg, 80, available_memory, spec.page_size_bytes)
    assert num_blocks == 56 * 1024 // 5 == 11468
    kv_cache_config = get_kv_cache_config(cfg, {f"layers.{i}": spec for i in range(80)}, 56 * GIB)
    assert kv_cache_config.num_blocks == 11468
    assert len(kv_cache_config.kv_cache_tensors) == 80
    assert kv_cache_config.kv_cache_tensors[0].size == 11468 * 65536
    assert cfg.max_model_len // spec.block_size == 8192  # max_blocks_per_request
    assert get_max_concurrency_for_kv_cache_config(cfg, kv_cache_config) == 11468 / 8192


def test_num_blocks_override_and_bad_input():
    assert get_num_blocks(VllmConfig(num_gpu_blocks_override=7), 4, 10**9, 4096) == 7
    assert get_num_blocks(VllmConfig(), 4, 100, 4096) == 0
    with pytest.raises(ValueError, match="num_layers"):
        get_num_blocks(VllmConfig(), 0, 100, 4096)


def test_estimate_max_model_len_and_memory_check():
    # 32 layers * 32 heads * 128 * (K+V) * 2 bytes = 512 KiB per token: 8 GiB hold 16384 tokens
    specs = {f"l{i}": full(32, head_size=128, dtype="float16") for i in range(32)}
    assert estimate_max_model_len(VllmConfig(max_model_len=16385), specs, 8 * GIB) == 16384
    cfg = VllmConfig(max_model_len=16383)
    assert estimate_max_model_len(cfg, specs, 8 * GIB) == 16383 and cfg.max_model_len == 16383
    with pytest.raises(
        ValueError, match=r"max seq len \(20000\).* the estimated maximum model length is 16384\."
    ):
        check_enough_kv_cache_memory(VllmConfig(max_model_len=20000), specs, 8 * GIB)
    with pytest.raises(ValueError, match="No available memory"):
        check_enough_kv_cache_memory(cfg, specs, 0)


def test_max_concurrency_full_sliding_hybrid():
    cfg = VllmConfig(max_model_len=16384, max_num_batched_tokens=1024)
    f, s = full(32, head_size=128, dtype="float16"), sw(1024, 32, head_size=128, dtype="float16")
    layers = [f"layer_{i}" for i in range(32)]
    one = KVCacheConfig(1536, [], [KVCacheGroupSpec(layers, f)])
    assert get_max_concurrency_for_kv_cache_config(cfg, one) == 1.5  # 1024 blocks per request
    win = KVCacheConfig(
        129 * 3, [], [KVCacheGroupSpec(layers, s)]
    )  # cdiv(1023 + 1024, 16) + 1 = 129
    assert get_max_concurrency_for_kv_cache_config(cfg, win) == 3
    hybrid = KVCacheConfig(
        (1024 + 129) * 3, [], [KVCacheGroupSpec(layers, f), KVCacheGroupSpec(layers, s)]
    )
    assert get_max_concurrency_for_kv_cache_config(cfg, hybrid) == 3


def test_hybrid_grouping_and_shared_tensors():
    # 2 full + 6 sliding-window layers: group size = min(2, 6) = 2 (6 >= 1.5 * 2), so 4 groups
    specs = {}
    for i in range(8):
        specs[f"l{i}"] = full(2) if i in (0, 4) else sw(64, 2)
    groups = get_kv_cache_groups(VllmConfig(), specs)
    # sw layers in order l1 l2 l3 l5 l6 l7, split into 3 groups of 2 as layers[i::3]
    assert [g.layer_names for g in groups] == [
        ["l0", "l4"],
        ["l1", "l5"],
        ["l2", "l6"],
        ["l3", "l7"],
    ]
    cfg = get_kv_cache_config_from_groups(VllmConfig(), groups, 10 * 2 * full(2).page_size_bytes)
    assert cfg.num_blocks == 10
    assert [t.shared_by for t in cfg.kv_cache_tensors] == [
        ["l0", "l1", "l2", "l3"],
        ["l4", "l5", "l6", "l7"],
    ]
    assert all(t.size == 10 * full(2).page_size_bytes for t in cfg.kv_cache_tensors)


def test_uniform_type_group_and_page_unification():
    groups = get_kv_cache_groups(VllmConfig(), {"a": full(2), "b": full(4)})
    assert len(groups) == 1 and isinstance(groups[0].kv_cache_spec, UniformTypeKVCacheSpecs)
    cfg = get_kv_cache_config_from_groups(VllmConfig(), groups, 100 * (full(2).page_size_bytes * 3))
    assert cfg.num_blocks == 100
    assert [t.size for t in cfg.kv_cache_tensors] == [
        100 * full(2).page_size_bytes,
        100 * full(4).page_size_bytes,
    ]
    unified = unify_kv_cache_spec_page_size({"a": full(2), "b": sw(64, 4)})
    assert unified["a"].block_size == 32 and unified["b"].block_size == 16
    assert get_kv_cache_config_from_groups(VllmConfig(), [], 123).num_blocks == 1  # attention free


def test_resolve_kv_cache_block_sizes():
    one = KVCacheConfig(1, [], [KVCacheGroupSpec(["a"], full(block_size=16))])
    assert resolve_kv_cache_block_sizes(one, VllmConfig(block_size=16)) == (16, 16)
    two = KVCacheConfig(
        1,
        [],
        [
            KVCacheGroupSpec(["a"], full(block_size=8)),
            KVCacheGroupSpec(["b"], sw(32, block_size=12)),
        ],
    )
    assert resolve_kv_cache_block_sizes(two, VllmConfig()) == (24, 4)
    assert resolve_kv_cache_block_sizes(two, VllmConfig(enable_prefix_caching=False)) == (24, 24)
    with pytest.raises(ValueError, match="hash_block_size=8"):
        resolve_kv_cache_block_sizes(two, VllmConfig(hash_block_size=8))
