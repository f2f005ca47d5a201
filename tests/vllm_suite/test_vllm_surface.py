"""What vLLM's own tests need of kvlab's mirrored modules, checked without vLLM.

Names live where vLLM has them, inputs vLLM accepts are accepted, errors where vLLM asserts are also
AssertionErrors, and the seams vLLM's tests patch are looked up at call time.
"""
from __future__ import annotations

import importlib
from unittest.mock import patch

import pytest

from kvlab.core.kv_cache_interface import FullAttentionSpec, MambaSpec, SlidingWindowSpec
from kvlab.core.kv_cache_metrics import BlockMetricsState, KVCacheMetricsCollector

NAMES = {
    "kvlab.core.kv_cache_interface": ["kv_cache_uses_per_token_head_scales", "MambaSpec",
                                      "KVCacheConfig", "KVCacheGroupSpec", "KVQuantMode"],
    "kvlab.core.kv_cache_utils": ["tensor_data", "get_request_block_hasher", "init_none_hash",
                                  "KVCacheBlock", "FreeKVCacheBlockQueue"],
    "kvlab.worker.block_table": ["BlockTable", "MultiGroupBlockTable"],
}


@pytest.mark.parametrize(("module", "names"), list(NAMES.items()))
def test_vllm_names_import_from_vllm_module_names(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert getattr(mod, name) is not None, name
    if module == "kvlab.worker.block_table":
        from kvlab.worker.multi_group_block_table import MultiGroupBlockTable

        assert mod.MultiGroupBlockTable is MultiGroupBlockTable


def test_mamba_spec_zips_shapes_with_dtypes_like_vllm():
    spec = MambaSpec(block_size=16, shapes=((2, 3), (4,)), dtypes=("float32",))
    assert spec.page_size_bytes == 2 * 3 * 4


def test_attention_spec_accepts_dtype_none_until_sized():
    spec = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=8, dtype=None)
    assert spec.block_size == 16
    with pytest.raises(ValueError):
        _ = spec.page_size_bytes


def test_errors_where_vllm_asserts_are_both_kinds():
    a = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=8, dtype="float32")
    b = SlidingWindowSpec(block_size=16, num_kv_heads=1, head_size=8, dtype="float32",
                          sliding_window=4)
    for exc_type in (ValueError, AssertionError):
        with pytest.raises(exc_type):
            FullAttentionSpec.merge([a, b])
        with pytest.raises(exc_type, match="sample_rate"):
            KVCacheMetricsCollector(sample_rate=-0.1)


def test_metrics_read_time_monotonic_ns_at_call_time():
    with patch("time.monotonic_ns", return_value=1_000_000_000):
        state = BlockMetricsState()
    assert state.birth_time_ns == 1_000_000_000
    with patch("time.monotonic_ns", return_value=3_500_000_000):
        assert state.get_lifetime_seconds() == 2.5
