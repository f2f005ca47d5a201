"""A dense, cache-free Llama forward for one sequence, and random weights for tiny test models.

``dense_forward`` is the trusted reference the paged forward is checked against: the whole
sequence in one go, attention as an explicit masked softmax over every earlier position, no KV
cache at all. Apart from the RoPE frequency table it shares no code with ``kvlab.model.llama`` /
``layers`` (RoPE is written as complex rotation here, the rotate-half form there), so agreement
is evidence, not an echo.

Examples:
    >>> config = tiny_config(sliding_window=(8, None))
    >>> weights = random_weights(config, seed=0)
    >>> dense_forward(config, weights, torch.tensor([1, 2, 3])).shape
    torch.Size([3, 128])
"""

from __future__ import annotations

from typing import Any

import torch

from kvlab.model.config import ModelConfig
from kvlab.model.layers import rope_inv_freq
from kvlab.model.weights import expected_weight_shapes


def tiny_config(**overrides: Any) -> ModelConfig:
    """A small Llama config (2 layers, width 64, 4 query / 2 KV heads, vocab 128) for tests, demos.

    Args:
        **overrides: any ModelConfig field (``num_layers``, ``sliding_window``, ...).
    """
    fields: dict[str, Any] = {
        "architecture": "llama", "num_layers": 2, "hidden_size": 64, "num_q_heads": 4,
        "num_kv_heads": 2, "head_dim": 16, "intermediate_size": 128, "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5, "vocab_size": 128, "max_position_embeddings": 512,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_ids": (2,)}
    fields.update(overrides)
    return ModelConfig(**fields)


def random_weights(config: ModelConfig, *, seed: int = 0, std: float = 0.1,
                   dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Random weights of every shape ``config`` implies (norm weights near 1), reproducible by seed.

    ``std`` is large enough (0.1) that attention is far from uniform, so masking mistakes show.
    """
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in expected_weight_shapes(config).items():
        if name.endswith("norm.weight"):
            weights[name] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            weights[name] = std * torch.randn(shape, generator=gen)
    return {name: w.to(dtype) for name, w in weights.items()}


def _norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))  # (T, C)


def _rotate(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    # rotate-half pairs (i, i + hs/2) as complex numbers  x_i + j * x_{i + hs/2}
    half = x.shape[-1] // 2
    z = torch.complex(x[..., :half], x[..., half:])   # (T, nh, hs/2)
    z = z * torch.polar(torch.ones_like(angles), angles)[:, None, :]  # (T, nh, hs/2)
    return torch.cat((z.real, z.imag), dim=-1)         # (T, nh, hs)


def _dense_attention(config: ModelConfig, layer: int, x: torch.Tensor, angles: torch.Tensor,
                     w: dict[str, torch.Tensor]) -> torch.Tensor:
    p, hs, n = f"model.layers.{layer}.self_attn.", config.head_dim, x.shape[0]

    def proj(name: str) -> torch.Tensor:
        return x @ w[p + name + ".weight"].T + w.get(p + name + ".bias", 0.0)  # (T, out)

    q = _rotate(proj("q_proj").view(n, config.num_q_heads, hs), angles)   # (T, nq, hs)
    k = _rotate(proj("k_proj").view(n, config.num_kv_heads, hs), angles)  # (T, nkv, hs)
    v = proj("v_proj").view(n, config.num_kv_heads, hs)                   # (T, nkv, hs)
    k = k.repeat_interleave(config.num_queries_per_kv, dim=1)            # (T, nq, hs)
    v = v.repeat_interleave(config.num_queries_per_kv, dim=1)            # (T, nq, hs)
    scores = torch.einsum("qhd,khd->hqk", q, k) / hs ** 0.5               # (nq, T, T)
    pos = torch.arange(n)
    allowed = pos[None, :] <= pos[:, None]                                # (T, T) causal
    window = config.layer_sliding_window(layer)
    if window is not None:
        allowed &= pos[None, :] > pos[:, None] - window
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1)      # (nq, T, T)
    out = torch.einsum("hqk,khd->qhd", probs, v).reshape(n, -1)          # (T, nq * hs)
    return out @ w[p + "o_proj.weight"].T                                 # (T, C)


@torch.inference_mode()
def dense_forward(config: ModelConfig, weights: dict[str, torch.Tensor],
                  input_ids: torch.Tensor) -> torch.Tensor:
    """Logits of every position of one whole sequence, computed densely in float32 without a cache.

    Args:
        config: the model's config (sliding windows honoured per layer).
        weights: Hugging Face-named weights.
        input_ids: [T] token ids of one sequence, positions ``0 .. T-1``.

    Returns:
        [T, vocab_size] float32 logits.
    """
    w = {name: t.float() for name, t in weights.items()}
    emb = w["model.embed_tokens.weight"]
    angles = torch.arange(input_ids.shape[0]).float()[:, None] * \
        rope_inv_freq(config, w.get("rope_freqs"))[None, :]           # (T, hs/2)
    h = emb[input_ids]                                                 # (T, C)
    for layer in range(config.num_layers):
        p = f"model.layers.{layer}."
        x = _norm(h, w[p + "input_layernorm.weight"], config.rms_norm_eps)
        h = h + _dense_attention(config, layer, x, angles, w)          # (T, C)
        x = _norm(h, w[p + "post_attention_layernorm.weight"], config.rms_norm_eps)
        gate = x @ w[p + "mlp.gate_proj.weight"].T                     # (T, I)
        up = x @ w[p + "mlp.up_proj.weight"].T                         # (T, I)
        h = h + (gate * torch.sigmoid(gate) * up) @ w[p + "mlp.down_proj.weight"].T  # (T, C)
    h = _norm(h, w["model.norm.weight"], config.rms_norm_eps)          # (T, C)
    return h @ w.get("lm_head.weight", emb).T                           # (T, V)
