"""Sizing in bytes through kvlab.core's get_kv_cache_configs, and the exact hybrid replay."""

import json

import pytest

from kvlab.traffic import prepare_blocks, read_mooncake_lines
from kvlab.traffic.hybrid import replay_kv_cache_config
from kvlab.traffic.sizing import (
    BUNDLED_MODELS,
    kv_cache_budgets,
    load_model_config,
    parse_bytes,
    size_kv_cache,
)
from kvlab.traffic.stack import lru_curve

GIB = 2**30


def test_parse_bytes_units_and_errors():
    assert parse_bytes("16GiB") == 16 * GIB
    assert parse_bytes("80GB") == 80 * 10**9
    assert parse_bytes("1.5e9") == 1_500_000_000
    with pytest.raises(ValueError, match="'16 gigs' is not a size; allowed: a number with B"):
        parse_bytes("16 gigs")


def test_bundled_models_are_the_five_shapes():
    assert BUNDLED_MODELS == ("deepseek-v2-lite", "gemma-3-12b", "jamba-v0.1", "llama-2-7b",
                              "llama-3.1-8b")


@pytest.mark.parametrize(
    ("model", "blocks", "block_size", "page", "groups"),
    [
        # 32 layers x 2 (K, V) x 8 heads x 128 x 2 B = 131,072 B a token -> 131,072 tokens.
        ("llama-3.1-8b", 8192, 16, 65536, 1),
        # 32 heads instead of 8: four times the bytes a token.
        ("llama-2-7b", 2048, 16, 262144, 1),
        # MLA: one (512 + 64)-element bf16 latent a token and layer, 64-token blocks.
        ("deepseek-v2-lite", 16 * GIB // (27 * 64 * 576 * 2), 64, 64 * 576 * 2, 1),
        # 48 layers in 6 groups of 8 (5 sliding-window, 1 full): a block costs 8 pages.
        ("gemma-3-12b", 16 * GIB // (8 * 16 * 2 * 8 * 256 * 2), 16, 16 * 2 * 8 * 256 * 2, 6),
        # Mamba-1 state (8192 x 3 + 8192 x 16) x 2 B = 311,296 B: 80-token attention blocks
        # (4,096 B a token) hold it; 8 groups of 4 layers.
        ("jamba-v0.1", 16 * GIB // (4 * 80 * 4096), 80, 80 * 4096, 8),
    ],
)
def test_sizes_at_16_gib(model, blocks, block_size, page, groups):
    s = size_kv_cache(load_model_config(model), 16 * GIB, max_model_len=16384)
    assert (s.num_gpu_blocks, s.block_size, s.page_size_bytes, len(s.groups)) == (
        blocks, block_size, page, groups)
    assert s.is_hybrid == (groups > 1)


def test_too_small_a_budget_says_what_fits():
    with pytest.raises(ValueError, match=r"the estimated maximum model length is 8192"):
        size_kv_cache(load_model_config("llama-3.1-8b"), GIB, max_model_len=131072)


def test_budgets_from_gpu_memory_subtract_the_weights():
    cfg = load_model_config("llama-3.1-8b")
    got = kv_cache_budgets(cfg, [16 * GIB], [80 * GIB], 0.9)
    assert got == [16 * GIB, int(80 * GIB * 0.9) - 8030261248 * 2]
    assert kv_cache_budgets(cfg, gpu_memory=[80 * GIB], weights_bytes=20 * GIB) == [
        int(80 * GIB * 0.9) - 20 * GIB]
    with pytest.raises(ValueError, match="leaves nothing after 15.0 GiB of weights"):
        kv_cache_budgets(cfg, gpu_memory=[16 * GIB], utilization=0.9)
    with pytest.raises(ValueError, match="no KV cache budget"):
        kv_cache_budgets(cfg)


def test_hf_config_file_with_text_config(tmp_path):
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"text_config": {
        "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "hidden_size": 256, "max_position_embeddings": 4096,
        "torch_dtype": "float16"}}))
    s = size_kv_cache(load_model_config(path), 2**20, max_model_len=1024)
    # 2 layers x 2 x 2 heads x 64 x 2 B = 1,024 B a token -> 1,024 tokens = 64 blocks.
    assert (s.model, s.num_gpu_blocks) == ("my-model", 64)
    with pytest.raises(ValueError, match="no model config 'nope': give a config.json path or one"):
        load_model_config("nope")


def _lines(*reqs):
    return [json.dumps({"timestamp": 0, "input_length": n, "output_length": 1, "hash_ids": ids})
            for n, ids in reqs]


def test_dense_model_replays_the_same_through_kvlab_core_and_the_curve():
    # 256 blocks of 16: C evicts A's unshared tail (blocks 64..68), D hits A's first 1,024.
    s = size_kv_cache(load_model_config("llama-3.1-8b"), GIB // 2, max_model_len=4096)
    reqs = read_mooncake_lines(_lines((1100, [0, 1, 2]), (1100, [0, 1, 5]),
                                      (3000, [9, 10, 11, 12, 13, 14]), (1100, [0, 1, 2])))
    b = prepare_blocks(reqs, s.block_size)
    core = replay_kv_cache_config(b, s.kv_cache_config)
    curve = lru_curve(b, [(s.num_gpu_blocks - 1) * s.block_size])[0]
    assert core.per_request_hit_tokens == curve.per_request_hit_tokens == [0, 1024, 0, 1024]


def test_sliding_window_hybrid_loses_what_full_attention_keeps():
    # Gemma-3, 12 GiB: 12,288 blocks, 2,047 a group. C shares A's first 15,360 tokens; B (as
    # big as A) comes between. Full attention alone (same blocks a group) still hits 12,752
    # tokens of A; the sliding-window groups lost the window in front of every such hit point
    # (freed during A's chunked prefill, evicted by B), so the hybrid fixed point finds none.
    s = size_kv_cache(load_model_config("gemma-3-12b"), 12 * GIB, max_model_len=32768)
    a, b_ids = list(range(40)), list(range(100, 140))
    c = a[:30] + list(range(200, 210))
    reqs = read_mooncake_lines(_lines((20000, a), (20000, b_ids), (20000, c)))
    b = prepare_blocks(reqs, s.block_size)
    assert replay_kv_cache_config(b, s.kv_cache_config).per_request_hit_tokens == [0, 0, 0]
    full = lru_curve(b, [(s.num_gpu_blocks - 1) // 6 * 16])[0]
    assert full.per_request_hit_tokens == [0, 0, 12752]
    # Without B in between the hybrid hits all 30 shared hash blocks.
    b2 = prepare_blocks(read_mooncake_lines(_lines((20000, a), (20000, c))), s.block_size)
    assert replay_kv_cache_config(b2, s.kv_cache_config).per_request_hit_tokens == [0, 15360]


def test_mamba_hybrid_caches_states_at_chunk_ends_only():
    # Jamba, 80-token blocks: the state is cached where a prefill chunk ends (here the prompt's
    # last full block, 2,000 tokens), never at 1,920 tokens: an identical aligned prompt (its
    # lookup capped at 1,999 tokens) cannot use it; with 160-token chunks it can.
    s = size_kv_cache(load_model_config("jamba-v0.1"), 4 * GIB, max_model_len=32768)
    b = prepare_blocks(read_mooncake_lines(_lines((2000, [0, 1, 2, 3]), (2000, [0, 1, 2, 3]))),
                       80, any_block_size=True)
    assert replay_kv_cache_config(b, s.kv_cache_config).per_request_hit_tokens == [0, 0]
    small = replay_kv_cache_config(b, s.kv_cache_config, max_num_batched_tokens=160)
    assert small.per_request_hit_tokens == [0, 1920]


def test_prompts_longer_than_max_model_len_are_refused_everywhere():
    b = prepare_blocks(read_mooncake_lines(_lines((1100, [0, 1, 2]), (1100, [0, 1, 2]))), 16)
    s = size_kv_cache(load_model_config("llama-3.1-8b"), GIB // 8, max_model_len=1024)
    res = replay_kv_cache_config(b, s.kv_cache_config, max_model_len=1024)
    assert (res.rejected, res.per_request_hit_tokens) == (2, [0, 0])
    point = lru_curve(b, [10**6], max_model_len=1024)[0]
    assert (point.rejected, point.per_request_hit_tokens) == (2, [0, 0])
