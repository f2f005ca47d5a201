"""The stateless pieces of a Llama decoder layer: RMSNorm, rotary embedding, SwiGLU MLP.

Each matches Hugging Face's Llama implementation operation for operation in float32 (the numerically
careful path): RMSNorm and RoPE are computed in float32 whatever the weights' dtype, then cast back.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kvlab.model.config import ModelConfig


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Root-mean-square layer norm over the last dim, computed in float32.

    Args:
        x: [T, hidden_size].
        weight: [hidden_size].
        eps: added to the mean square.

    Returns:
        [T, hidden_size] in x's dtype.
    """
    x32 = x.float()                                                 # (T, C)
    inv_rms = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)  # (T, 1)
    return weight * (x32 * inv_rms).to(x.dtype)                     # (T, C)


def rope_inv_freq(config: ModelConfig, freq_factors: torch.Tensor | None = None) -> torch.Tensor:
    """Inverse frequencies of the rotary embedding, float32, with the config's scaling applied.

    Args:
        config: gives head_dim, rope_theta and rope_scaling.
        freq_factors: optional [head_dim / 2] divisors (a GGUF's ``rope_freqs`` tensor, Llama 3.1).

    Returns:
        [head_dim / 2] float32 (radians per position).
    """
    hs = config.head_dim
    exponents = torch.arange(0, hs, 2, dtype=torch.int64).float() / hs  # (hs/2,)
    inv_freq = 1.0 / (config.rope_theta ** exponents)                   # (hs/2,)
    scaling = config.rope_scaling
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors.float().cpu()
    elif scaling is not None and scaling.rope_type == "linear":
        inv_freq = inv_freq / scaling.factor
    elif scaling is not None and scaling.rope_type == "llama3":
        inv_freq = _llama3_inv_freq(inv_freq, scaling)
    return inv_freq


def _llama3_inv_freq(inv_freq: torch.Tensor, scaling) -> torch.Tensor:
    # Long wavelengths (beyond original_ctx / low_freq_factor) are slowed by `factor`, short ones
    # (below original_ctx / high_freq_factor) kept, and the band between interpolated linearly.
    wavelen = 2 * math.pi / inv_freq                                        # (hs/2,)
    ratio = scaling.original_max_position_embeddings / wavelen              # (hs/2,)
    band = scaling.high_freq_factor - scaling.low_freq_factor
    smooth = (ratio - scaling.low_freq_factor) / band                      # (hs/2,)
    smooth = smooth.clamp(0.0, 1.0)                                         # 0 = scaled, 1 = kept
    return (1 - smooth) * inv_freq / scaling.factor + smooth * inv_freq    # (hs/2,)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor,
                 dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of every position's rotation angles (rotate-half layout).

    Args:
        positions: [T] int token positions.
        inv_freq: [head_dim / 2] float32.
        dtype: dtype of the returned tables (the activations' dtype).

    Returns:
        ``(cos, sin)``, each [T, 1, head_dim], broadcastable over heads.
    """
    angles = positions.float()[:, None] * inv_freq.to(positions.device)[None, :]  # (T, hs/2)
    angles = torch.cat((angles, angles), dim=-1)                                  # (T, hs)
    return angles.cos().to(dtype)[:, None, :], angles.sin().to(dtype)[:, None, :]  # (T, 1, hs) x2


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each head's pairs ``(i, i + head_dim / 2)`` by the position's angles.

    Args:
        x: [T, num_heads, head_dim].
        cos, sin: [T, 1, head_dim] from ``rope_cos_sin``.

    Returns:
        [T, num_heads, head_dim].
    """
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # (T, nh, hs)
    return x * cos + rotated * sin                                # (T, nh, hs)


# NOTE: measured with 1 thread on a 2-core AMD EPYC (torch's MKL fp32 GEMM): with a few rows and a
# wide weight, one GEMM call is slower than several over slices of WIDE_SLICE output features
# (likely: it packs the whole weight first, an extra pass over it). SmolLM2's vocab projection
# (49152 x 576), under shared load: 4 rows 91 -> 63 ms, 16 rows 148 -> 102 ms; gate+up fused
# (3072 x 576) at 4 rows: 1.5 -> 1.2 ms.
# One row (GEMV, no packing) and long prefills (the packing amortised) keep one call.
WIDE_SLICE = 1536        # output features per slice
FEW_ROWS = range(2, 33)  # rows (tokens) for which slicing pays


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear``, computed in output-feature slices for few rows and wide weights on CPU.

    Args:
        x: [T, in_features].
        weight: [out_features, in_features].
        bias: [out_features] or None.

    Returns:
        [T, out_features], equal to ``F.linear(x, weight, bias)`` up to float rounding.
    """
    if x.shape[0] not in FEW_ROWS or weight.shape[0] <= 2 * WIDE_SLICE or x.device.type != "cpu":
        return F.linear(x, weight, bias)
    out = torch.cat([F.linear(x, w) for w in weight.split(WIDE_SLICE)], dim=-1)  # (T, out)
    return out if bias is None else out + bias


def swiglu_mlp(x: torch.Tensor, gate_up_proj: torch.Tensor,
               down_proj: torch.Tensor) -> torch.Tensor:
    """Llama's MLP: ``down(silu(gate(x)) * up(x))``, gate and up in one matmul.

    Args:
        x: [T, hidden_size].
        gate_up_proj: [2 * intermediate_size, hidden_size], gate_proj's rows then up_proj's.
        down_proj: [hidden_size, intermediate_size].

    Returns:
        [T, hidden_size].
    """
    gate, up = linear(x, gate_up_proj).chunk(2, dim=-1)  # (T, I) x2
    return linear(F.silu(gate) * up, down_proj)          # (T, C)
