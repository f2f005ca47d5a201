"""Triton building blocks shared by the paged-attention kernels.

* ``load_kv_tiles``: gather ``BLOCK_N`` consecutive key positions of one sequence from the paged
  cache. Each position looks up its own block id (``block_table[p // block_size]``), so one tile may
  span several physical blocks (block_size 4 with 64-key tiles) or part of one (block_size 32 with
  16-key tiles): the tile size never has to match the cache's block size.
* ``online_softmax_step``: fold one tile of scores into the running max / sum / accumulator of
  flash attention (scores in log2 units, so ``exp2`` replaces ``exp``).
* ``attend_paged_keys``: the key loop both kernels share: positions ``[start, end)`` of one sequence
  against a tile of query rows, with the causal and sliding-window masks.

NOTE: index arithmetic is done in int64. Besides overflow safety for large caches, this keeps the
Triton interpreter fast: it checks every int32 add/mul for overflow, which costs more than the op.

NOTE: import only after ``TRITON_INTERPRET`` is decided (``kvlab.kernels`` does it).
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2_E = 1.4426950408889634  # scores are kept in log2 units: exp(x) == exp2(x * log2(e))


@triton.jit
def load_kv_tiles(
    key_cache_ptr,  # *Pointer* to key_cache [num_blocks, block_size, num_kv_heads, head_dim]
    value_cache_ptr,  # *Pointer* to value_cache, same shape and strides as key_cache
    block_table_row_ptr,  # *Pointer* to this sequence's row of block_table (block ids)
    k_pos,  # (BLOCK_N,) int64 key positions in the sequence (tokens)
    k_valid,  # (BLOCK_N,) which positions exist (masked lanes read 0)
    kv_head,  # KV head this program serves
    dims,  # (HEAD_DIM_PAD,) element indices within a head
    dim_valid,  # (HEAD_DIM_PAD,) dims < head_dim
    stride_cb, stride_co, stride_ch,  # cache strides (elements) over block, offset, head
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
):
    """Return ``(k, v)``: k (HEAD_DIM_PAD, BLOCK_N) for ``Q @ K``; v (BLOCK_N, HEAD_DIM_PAD)."""
    block_ids = tl.load(block_table_row_ptr + k_pos // BLOCK_SIZE, mask=k_valid, other=0)
    slot_base = (block_ids.to(tl.int64) * stride_cb + (k_pos % BLOCK_SIZE) * stride_co
                 + kv_head * stride_ch)  # (BLOCK_N,) element offset of each key's head vector
    k = tl.load(key_cache_ptr + slot_base[None, :] + dims[:, None],
                mask=dim_valid[:, None] & k_valid[None, :], other=0.0)
    v = tl.load(value_cache_ptr + slot_base[:, None] + dims[None, :],
                mask=k_valid[:, None] & dim_valid[None, :], other=0.0)
    return k, v


@triton.jit
def online_softmax_step(
    scores,  # (BLOCK_M, BLOCK_N) fp32 scores in log2 units, -inf where masked
    v,  # (BLOCK_N, HEAD_DIM_PAD) value tile
    m_i,  # (BLOCK_M,) running max (log2 units)
    l_i,  # (BLOCK_M,) running sum of exp2(score - m_i)
    acc,  # (BLOCK_M, HEAD_DIM_PAD) fp32 running sum of p @ v
    DOT_PRECISION: tl.constexpr,  # tl.dot input_precision ("ieee" keeps fp32 exact)
):
    """Return the updated ``(m_i, l_i, acc)``."""
    m_new = tl.maximum(m_i, tl.max(scores, 1))
    # NOTE: a row may have seen only masked keys so far (m_new == -inf); shift by 0 instead so
    # exp2(-inf - -inf) never produces NaN. Its p and alpha are then exactly 0.
    m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(scores - m_shift[:, None])  # (BLOCK_M, BLOCK_N)
    alpha = tl.exp2(m_i - m_shift)  # (BLOCK_M,) rescales what was accumulated so far
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
    return m_new, l_i, acc


@triton.jit
def attend_paged_keys(
    q,  # (BLOCK_M, HEAD_DIM_PAD) query rows, zero where padded
    q_pos,  # (BLOCK_M,) int64 position of each row's token in its sequence (tokens)
    start, end,  # key positions [start, end) to visit (tokens)
    key_cache_ptr,  # *Pointer* to key_cache [num_blocks, block_size, num_kv_heads, head_dim]
    value_cache_ptr,  # *Pointer* to value_cache, same shape and strides as key_cache
    block_table_row_ptr,  # *Pointer* to this sequence's row of block_table
    kv_head,  # KV head of these rows
    qk_scale,  # softmax scale * log2(e)
    sliding_window,  # window in tokens (ignored unless USE_WINDOW)
    stride_cb, stride_co, stride_ch,  # cache strides (elements) over block, offset, head
    BLOCK_M: tl.constexpr,  # query rows
    BLOCK_N: tl.constexpr,  # keys per iteration
    HEAD_DIM: tl.constexpr,  # elements per head
    HEAD_DIM_PAD: tl.constexpr,  # HEAD_DIM rounded up to a power of two >= 16
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    USE_WINDOW: tl.constexpr,  # apply the sliding window
    DOT_PRECISION: tl.constexpr,  # tl.dot input_precision
):
    """Return ``(m_i, l_i, acc)``: running max, sum and unnormalized output over the keys."""
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_valid = dims < HEAD_DIM
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], tl.float32)
    for start_n in range(start, end, BLOCK_N):
        k_pos = start_n + tl.arange(0, BLOCK_N).to(tl.int64)  # (BLOCK_N,)
        k_valid = k_pos < end
        k, v = load_kv_tiles(key_cache_ptr, value_cache_ptr, block_table_row_ptr, k_pos, k_valid,
                             kv_head, dims, dim_valid, stride_cb, stride_co, stride_ch, BLOCK_SIZE)
        scores = tl.dot(q, k, input_precision=DOT_PRECISION) * qk_scale  # (BLOCK_M, BLOCK_N)
        allowed = (k_pos[None, :] <= q_pos[:, None]) & k_valid[None, :]  # causal
        if USE_WINDOW:  # the last `sliding_window` positions, the query's own included
            allowed = allowed & (k_pos[None, :] > q_pos[:, None] - sliding_window)
        scores = tl.where(allowed, scores, float("-inf"))
        m_i, l_i, acc = online_softmax_step(scores, v, m_i, l_i, acc, DOT_PRECISION)
    return m_i, l_i, acc
