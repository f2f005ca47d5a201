"""RMSNorm, RoPE (incl. llama3 scaling) and the SwiGLU MLP vs transformers' Llama modules."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kvlab.model.config import RopeScaling
from kvlab.model.layers import (
    WIDE_SLICE,
    apply_rope,
    linear,
    rms_norm,
    rope_cos_sin,
    rope_inv_freq,
    swiglu_mlp,
)
from kvlab.model.reference import tiny_config

llama = pytest.importorskip("transformers.models.llama.modeling_llama")
transformers = pytest.importorskip("transformers")


def test_rms_norm_matches_transformers():
    x, w = torch.randn(5, 64), torch.randn(64)
    ref = llama.LlamaRMSNorm(64, eps=1e-5)
    ref.weight.data = w.clone()
    assert torch.allclose(rms_norm(x, w, 1e-5), ref(x), atol=1e-6, rtol=0)
    assert rms_norm(x.bfloat16(), w.bfloat16(), 1e-5).dtype == torch.bfloat16


@pytest.mark.parametrize("rope_parameters", [
    {"rope_type": "default", "rope_theta": 10000.0},
    {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
     "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
])
def test_rope_matches_transformers(rope_parameters):
    hf_config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4,
                                         rope_parameters=rope_parameters)
    rotary = llama.LlamaRotaryEmbedding(hf_config)
    scaling = None
    if rope_parameters["rope_type"] == "llama3":
        scaling = RopeScaling("llama3", 8.0, 1.0, 4.0, 64)
    config = tiny_config(rope_theta=rope_parameters["rope_theta"], rope_scaling=scaling)
    inv_freq = rope_inv_freq(config)
    assert torch.allclose(inv_freq, rotary.inv_freq, rtol=1e-6, atol=0)

    positions = torch.tensor([0, 1, 7, 300, 5000])
    q, k = torch.randn(5, 4, 16), torch.randn(5, 2, 16)
    cos_ref, sin_ref = rotary(q, positions[None])                       # (1, T, hs) x2
    q_ref, k_ref = llama.apply_rotary_pos_emb(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                              cos_ref, sin_ref)          # (1, nh, T, hs)
    cos, sin = rope_cos_sin(positions, inv_freq, torch.float32)
    assert torch.allclose(apply_rope(q, cos, sin), q_ref[0].transpose(0, 1), atol=1e-5)
    assert torch.allclose(apply_rope(k, cos, sin), k_ref[0].transpose(0, 1), atol=1e-5)


def test_linear_rope_scaling_divides_frequencies():
    plain = rope_inv_freq(tiny_config())
    scaled = rope_inv_freq(tiny_config(rope_scaling=RopeScaling("linear", 4.0)))
    assert torch.allclose(scaled * 4.0, plain)
    factors = torch.linspace(1.0, 3.0, 8)
    assert torch.allclose(rope_inv_freq(tiny_config(), factors) * factors, plain)


def test_swiglu_mlp_matches_transformers():
    hf_config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128)
    mlp = llama.LlamaMLP(hf_config)
    x = torch.randn(3, 64)
    with torch.no_grad():
        ref = mlp(x)
    out = swiglu_mlp(x, torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]),
                     mlp.down_proj.weight)
    assert torch.allclose(out, ref, atol=1e-6)


@pytest.mark.parametrize("num_rows", [1, 2, 4, 32, 33])
@pytest.mark.parametrize("out_features", [960, 3 * WIDE_SLICE + 5])
def test_linear_in_slices_equals_f_linear(num_rows, out_features):
    gen = torch.Generator().manual_seed(num_rows)
    x, w = torch.randn(num_rows, 64, generator=gen), torch.randn(out_features, 64, generator=gen)
    b = torch.randn(out_features, generator=gen)
    for bias in (None, b):
        out = linear(x, w, bias)
        assert out.shape == (num_rows, out_features)
        torch.testing.assert_close(out, F.linear(x, w, bias), atol=1e-5, rtol=1e-6)
