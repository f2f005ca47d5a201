"""ModelConfig validation and rope-scaling parsing."""

from __future__ import annotations

import pytest

from kvlab.model.config import RopeScaling, rope_scaling_from_dict
from kvlab.model.reference import tiny_config


def test_derived_values():
    config = tiny_config(num_layers=3, sliding_window=[None, 8, None])
    assert config.sliding_window == (None, 8, None)  # lists are frozen into tuples
    assert [config.layer_sliding_window(i) for i in range(3)] == [None, 8, None]
    assert config.num_queries_per_kv == 2
    assert config.kv_cache_bytes_per_token(dtype_bytes=4) == 2 * 3 * 2 * 16 * 4
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        config.layer_sliding_window(3)


@pytest.mark.parametrize("overrides,match", [
    ({"architecture": "gemma3"}, "architecture 'gemma3' not supported"),
    ({"num_layers": 0}, "num_layers must be a positive int"),
    ({"num_q_heads": 3}, "multiple of num_kv_heads"),
    ({"head_dim": 15}, "even"),
    ({"sliding_window": (4,)}, "one entry per layer"),
    ({"sliding_window": (4, -1)}, "positive ints"),
])
def test_invalid_configs_are_rejected(overrides, match):
    with pytest.raises(ValueError, match=match):
        tiny_config(**overrides)


def test_rope_scaling_from_dict():
    assert rope_scaling_from_dict(None) is None
    assert rope_scaling_from_dict({"rope_type": "default", "rope_theta": 1e4}) is None
    assert rope_scaling_from_dict({"type": "linear", "factor": 2}) == RopeScaling("linear", 2.0)
    assert rope_scaling_from_dict({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                                   "high_freq_factor": 4, "original_max_position_embeddings": 8192}
                                  ) == RopeScaling("llama3", 8.0, 1.0, 4.0, 8192)
    with pytest.raises(ValueError, match="'dynamic' not supported"):
        rope_scaling_from_dict({"rope_type": "dynamic", "factor": 2.0})
