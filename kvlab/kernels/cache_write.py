"""Triton kernel that writes new keys/values into the paged KV cache (``reshape_and_cache``).

Each program copies a tile of ``BLOCK_T`` tokens x ``BLOCK_HD`` of the flattened ``(kv_head, dim)``
axis from ``key``/``value`` into the slots named by ``slot_mapping``::

    token t --(slot_mapping[t] = block_id * block_size + offset)--> key_cache[block_id, offset]

Padding tokens (slot ``-1``) are masked out, exactly as vLLM skips them.

NOTE: import this module only after ``TRITON_INTERPRET`` is decided (``kvlab.kernels`` does it):
Triton reads the flag when ``@triton.jit`` decorates the kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvlab.kernels.checks import check_cache_write_args
from kvlab.kernels.tiles import cache_write_tiles


@triton.jit
def reshape_and_cache_kernel(
    key_ptr,  # *Pointer* to key [num_tokens, num_kv_heads, head_dim]
    value_ptr,  # *Pointer* to value [num_tokens, num_kv_heads, head_dim]
    key_cache_ptr,  # *Pointer* to key_cache [num_blocks, block_size, num_kv_heads, head_dim]
    value_cache_ptr,  # *Pointer* to value_cache, same shape and strides as key_cache
    slot_mapping_ptr,  # *Pointer* to slot_mapping [num_tokens] (int32/int64, -1 = skip)
    num_tokens,  # number of rows of key/value (tokens)
    stride_kt, stride_kh,  # key strides (elements) over token and head; dim stride is 1
    stride_vt, stride_vh,  # value strides (elements) over token and head; dim stride is 1
    stride_cb, stride_co, stride_ch,  # cache strides (elements) over block, offset, head
    block_size,  # tokens per cache block
    HEAD_DIM: tl.constexpr,  # elements per head
    NUM_HD: tl.constexpr,  # num_kv_heads * HEAD_DIM: length of the flattened (head, dim) axis
    BLOCK_T: tl.constexpr,  # tokens per program
    BLOCK_HD: tl.constexpr,  # flattened (head, dim) elements per program (power of two)
):
    pid_t = tl.program_id(0)
    pid_hd = tl.program_id(1)
    tokens = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)  # (BLOCK_T,)
    hd = pid_hd * BLOCK_HD + tl.arange(0, BLOCK_HD)  # (BLOCK_HD,)
    head = hd // HEAD_DIM
    dim = hd % HEAD_DIM
    slots = tl.load(slot_mapping_ptr + tokens, mask=tokens < num_tokens, other=-1).to(tl.int64)
    block_ids = slots // block_size  # (BLOCK_T,) only meaningful where slots >= 0
    offsets = slots % block_size
    mask = (slots >= 0)[:, None] & (hd < NUM_HD)[None, :]  # (BLOCK_T, BLOCK_HD)
    t64 = tokens.to(tl.int64)[:, None]
    src_k = key_ptr + t64 * stride_kt + head[None, :] * stride_kh + dim[None, :]
    src_v = value_ptr + t64 * stride_vt + head[None, :] * stride_vh + dim[None, :]
    dst = (block_ids[:, None] * stride_cb + offsets[:, None] * stride_co
           + head[None, :] * stride_ch + dim[None, :])  # (BLOCK_T, BLOCK_HD) element offsets
    tl.store(key_cache_ptr + dst, tl.load(src_k, mask=mask), mask=mask)
    tl.store(value_cache_ptr + dst, tl.load(src_v, mask=mask), mask=mask)


def reshape_and_cache_triton(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                             value_cache: torch.Tensor, slot_mapping: torch.Tensor, *,
                             block_t: int | None = None, block_hd: int | None = None) -> None:
    """Write each token's key/value into its slot of the paged cache with a Triton kernel.

    Mirrors:
    vllm/v1/attention/ops/triton_reshape_and_cache_flash.py::triton_reshape_and_cache_flash.
    Differs: tiles several tokens per program (cheap under the Triton interpreter); no fp8 cache.

    Args:
        key: [num_tokens, num_kv_heads, head_dim], contiguous in head_dim.
        value: [num_tokens, num_kv_heads, head_dim], contiguous in head_dim.
        key_cache: [num_blocks, block_size, num_kv_heads, head_dim], written in place.
        value_cache: [num_blocks, block_size, num_kv_heads, head_dim], same strides as key_cache.
        slot_mapping: [num_tokens] int64 slots (``-1`` = padding token, skipped).
        block_t: tokens per program (default from ``tiles.cache_write_tiles``).
        block_hd: flattened (head, dim) elements per program, a power of two (default: tiles).

    Raises:
        TypeError, ValueError: see ``kvlab.kernels.checks.check_cache_write_args``; ValueError
            also for non-unit head_dim strides or value_cache strides that differ from key_cache's.

    NOTE: slot values are not range-checked here (that would sync the GPU); the reference does.
    """
    check_cache_write_args(key, value, key_cache, value_cache, slot_mapping)
    if key.stride(-1) != 1 or value.stride(-1) != 1:
        raise ValueError("key/value must be contiguous in head_dim (stride(-1) == 1)")
    if key_cache.stride() != value_cache.stride():
        raise ValueError(f"key_cache strides {key_cache.stride()} != value_cache strides "
                         f"{value_cache.stride()}")
    num_tokens, num_kv_heads, head_dim = key.shape
    if num_tokens == 0:
        return
    num_hd = num_kv_heads * head_dim
    default_t, default_hd = cache_write_tiles(key.device, num_tokens, num_hd)
    block_t = block_t or default_t
    block_hd = block_hd or default_hd
    if block_hd & (block_hd - 1) or block_t & (block_t - 1):
        raise ValueError(f"block_t ({block_t}) and block_hd ({block_hd}) must be powers of two")
    grid = lambda meta: (triton.cdiv(num_tokens, meta["BLOCK_T"]),  # noqa: E731
                         triton.cdiv(num_hd, meta["BLOCK_HD"]))
    reshape_and_cache_kernel[grid](
        key, value, key_cache, value_cache, slot_mapping, num_tokens,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2), key_cache.shape[1],
        HEAD_DIM=head_dim, NUM_HD=num_hd, BLOCK_T=block_t, BLOCK_HD=block_hd,
    )
