"""The hybrid allocator turned off: local-attention layers become full attention before grouping.

Scenarios follow vLLM 0.22.1's test_unify_hybrid_kv_cache_specs (rewritten), plus the grouping and
sizing that follow when ``disable_hybrid_kv_cache_manager`` is set.
"""
from __future__ import annotations

import pytest

from kvlab.core.config import VllmConfig
from kvlab.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)
from kvlab.core.kv_cache_utils import (
    get_kv_cache_config,
    get_kv_cache_groups,
    unify_hybrid_kv_cache_specs,
)

PAGE = 2 * 16 * 2 * 8 * 2  # K and V, block 16, 2 heads of 8, bfloat16: 1024 bytes


def full(**kw):
    return FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=8, dtype="bfloat16", **kw)


def sliding(window=64, **kw):
    return SlidingWindowSpec(block_size=16, num_kv_heads=2, head_size=8, dtype="bfloat16",
                             sliding_window=window, **kw)


def chunked(chunk=32, **kw):
    return ChunkedLocalAttentionSpec(block_size=16, num_kv_heads=2, head_size=8,
                                     dtype="bfloat16", attention_chunk_size=chunk, **kw)


def test_sliding_and_chunked_layers_become_full_attention_recording_their_span():
    specs = {"l0": full(), "l1": sliding(1024, page_size_padded=4096), "l2": chunked(512)}
    assert unify_hybrid_kv_cache_specs(specs) is None  # in place, as vLLM
    assert specs == {
        "l0": full(),
        "l1": full(sliding_window=1024, page_size_padded=4096),
        "l2": full(attention_chunk_size=512),
    }
    assert [type(s) for s in specs.values()] == [FullAttentionSpec] * 3


def test_one_type_already_is_left_alone():
    specs = {"a": sliding(64), "b": sliding(64)}
    unify_hybrid_kv_cache_specs(specs)
    assert specs == {"a": sliding(64), "b": sliding(64)}
    mixed_full = {"a": full(), "b": full(sliding_window=8)}  # FullAttention types merge
    unify_hybrid_kv_cache_specs(mixed_full)
    assert mixed_full == {"a": full(), "b": full(sliding_window=8)}


@pytest.mark.parametrize("case", ["no full layer", "mamba left over"])
def test_what_cannot_be_unified_raises_and_changes_nothing(case):
    if case == "no full layer":
        specs = {"a": sliding(64), "b": chunked(32)}
    else:
        mamba = MambaSpec(block_size=16, shapes=((4, 4),), dtypes=("float32",))
        specs = {"a": full(), "b": sliding(64), "c": mamba}
    before = dict(specs)
    with pytest.raises(ValueError, match="failed to convert the KV cache specs to one unified"):
        unify_hybrid_kv_cache_specs(specs)
    assert specs == before  # vLLM would have rewritten "b" already in the Mamba case


def test_sliding_mla_becomes_mla_with_the_full_layers_block_size():
    mla_full = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=16, dtype="bfloat16")
    swa = SlidingWindowMLASpec(block_size=16, num_kv_heads=1, head_size=16, dtype="bfloat16",
                               sliding_window=128)
    specs = {"f": mla_full, "s": swa}
    unify_hybrid_kv_cache_specs(specs)
    assert specs["s"] == MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=16,
                                          dtype="bfloat16")
    with pytest.raises(AssertionError, match="need a full-attention layer"):
        unify_hybrid_kv_cache_specs({"s": swa, "w": sliding(64)})


def test_disabled_hybrid_manager_makes_one_group_that_keeps_every_token():
    specs = {"l0": full(), "l1": sliding(32), "l2": full(), "l3": sliding(32)}
    hybrid = get_kv_cache_groups(VllmConfig(), dict(specs))
    assert [(g.layer_names, type(g.kv_cache_spec).__name__) for g in hybrid] == [
        (["l0", "l2"], "FullAttentionSpec"), (["l1", "l3"], "SlidingWindowSpec")]
    cfg = VllmConfig(max_model_len=128, disable_hybrid_kv_cache_manager=True)
    groups = get_kv_cache_groups(cfg, specs)
    assert [g.layer_names for g in groups] == [["l0", "l1", "l2", "l3"]]
    assert specs["l1"] == full(sliding_window=32)  # the caller's dict is rewritten, as vLLM
    # One group of 2 layers sharing each block id: 40 pages are 20 blocks of 2 pages each.
    config = get_kv_cache_config(cfg, {"l0": full(), "l1": sliding(32)}, 40 * PAGE)
    assert config.num_blocks == 20
    assert [t.shared_by for t in config.kv_cache_tensors] == [["l0"], ["l1"]]
