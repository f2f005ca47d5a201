"""Triton paged attention for a mixed batch: prefill, chunked prefill and decode in one launch.

Grid ``(num_seqs, ceil(max_query_len / BLOCK_Q), num_kv_heads)``. A program takes ``BLOCK_Q``
consecutive new tokens of one sequence together with the ``num_queries_per_kv`` query heads that
read the same KV head, so each K/V tile gathered from the paged cache serves all of them::

    Q tile rows (BLOCK_M >= BLOCK_Q * G)        K/V tiles (BLOCK_N keys each)
    row r -> token  q_tile * BLOCK_Q + r // G   key position p -> block_table[seq, p // block_size]
             head   kv_head * G + r % G                        offset p % block_size

It walks the keys from the first one any of its rows may see (0, or the sliding-window start) to its
last query's position, with flash attention's online softmax in fp32.

NOTE: import only after ``TRITON_INTERPRET`` is decided (``kvlab.kernels`` does it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvlab.kernels.checks import AttentionDims
from kvlab.kernels.paged_tile import LOG2_E, attend_paged_keys
from kvlab.kernels.tiles import AttentionTiles, next_power_of_2


@triton.jit
def unified_attention_kernel(
    out_ptr,  # *Pointer* to out [num_tokens, num_q_heads, head_dim]
    q_ptr,  # *Pointer* to q [num_tokens, num_q_heads, head_dim]
    key_cache_ptr,  # *Pointer* to key_cache [num_blocks, block_size, num_kv_heads, head_dim]
    value_cache_ptr,  # *Pointer* to value_cache, same shape and strides as key_cache
    block_table_ptr,  # *Pointer* to block_table [num_seqs, max_num_blocks]
    seq_lens_ptr,  # *Pointer* to seq_lens [num_seqs] (tokens, including the new ones)
    query_start_loc_ptr,  # *Pointer* to query_start_loc [num_seqs + 1] (tokens)
    qk_scale,  # softmax scale * log2(e)
    sliding_window,  # window in tokens (ignored unless USE_WINDOW)
    stride_qt, stride_qh,  # q strides (elements) over token and head
    stride_ot, stride_oh,  # out strides (elements) over token and head
    stride_cb, stride_co, stride_ch,  # cache strides (elements) over block, offset, head
    stride_bt,  # block_table row stride (elements)
    NUM_QUERIES_PER_KV: tl.constexpr,  # GQA group size G
    HEAD_DIM: tl.constexpr,  # elements per head
    HEAD_DIM_PAD: tl.constexpr,  # HEAD_DIM rounded up to a power of two >= 16
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    BLOCK_M: tl.constexpr,  # Q tile rows (>= BLOCK_Q * G, power of two >= 16)
    BLOCK_Q: tl.constexpr,  # query tokens per program
    BLOCK_N: tl.constexpr,  # keys per loop iteration
    USE_WINDOW: tl.constexpr,  # apply the sliding window
    DOT_PRECISION: tl.constexpr,  # tl.dot input_precision
):
    seq = tl.program_id(0)
    q_tile = tl.program_id(1)
    kv_head = tl.program_id(2)
    q_start = tl.load(query_start_loc_ptr + seq).to(tl.int64)
    q_len = tl.load(query_start_loc_ptr + seq + 1).to(tl.int64) - q_start
    if q_tile * BLOCK_Q >= q_len:
        return  # this sequence has fewer new tokens than the longest one in the batch
    num_computed = tl.load(seq_lens_ptr + seq).to(tl.int64) - q_len  # cached before this step

    rows = tl.arange(0, BLOCK_M).to(tl.int64)
    q_idx = q_tile * BLOCK_Q + rows // NUM_QUERIES_PER_KV  # (BLOCK_M,) token index in the seq
    head = kv_head * NUM_QUERIES_PER_KV + rows % NUM_QUERIES_PER_KV  # (BLOCK_M,) query head
    row_valid = (rows < BLOCK_Q * NUM_QUERIES_PER_KV) & (q_idx < q_len)
    dims = tl.arange(0, HEAD_DIM_PAD)
    io_mask = row_valid[:, None] & (dims < HEAD_DIM)[None, :]
    q = tl.load(q_ptr + (q_start + q_idx)[:, None] * stride_qt + head[:, None] * stride_qh
                + dims[None, :], mask=io_mask, other=0.0)  # (BLOCK_M, HEAD_DIM_PAD)

    # Keys this tile needs: up to its last token's position; from the window start of its first.
    kv_end = num_computed + tl.minimum(q_len, (q_tile + 1) * BLOCK_Q)
    kv_start = 0
    if USE_WINDOW:
        first = tl.maximum(num_computed + q_tile * BLOCK_Q - sliding_window + 1, 0)
        kv_start = (first // BLOCK_N) * BLOCK_N
    m_i, l_i, acc = attend_paged_keys(
        q, num_computed + q_idx, kv_start, kv_end, key_cache_ptr, value_cache_ptr,
        block_table_ptr + seq.to(tl.int64) * stride_bt, kv_head, qk_scale, sliding_window,
        stride_cb, stride_co, stride_ch, BLOCK_M, BLOCK_N, HEAD_DIM, HEAD_DIM_PAD, BLOCK_SIZE,
        USE_WINDOW, DOT_PRECISION)

    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # padded rows saw no key
    out_ptrs = (out_ptr + (q_start + q_idx)[:, None] * stride_ot + head[:, None] * stride_oh
                + dims[None, :])
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=io_mask)


def head_dim_padded(head_dim: int) -> int:
    """head_dim rounded up to a power of two, at least 16 (``tl.dot`` needs K >= 16)."""
    return max(16, next_power_of_2(head_dim))


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot`` input precision: "ieee" for fp32 (no TF32 rounding); else "tf32" (ignored)."""
    return "ieee" if dtype == torch.float32 else "tf32"


def unified_attention_triton(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                             block_table: torch.Tensor, seq_lens: torch.Tensor,
                             query_start_loc: torch.Tensor, out: torch.Tensor, *, scale: float,
                             sliding_window: int | None, dims: AttentionDims, max_query_len: int,
                             tiles: AttentionTiles) -> torch.Tensor:
    """Launch ``unified_attention_kernel`` on already-checked arguments.

    Mirrors: vllm/v1/attention/ops/triton_unified_attention.py::unified_attention (its 2D launch).
    Differs: a 3D grid over (sequence, query tile, KV head) with early exit instead of vLLM's flat
    grid plus a binary search for the sequence; no ALiBi, soft-cap, sinks or fp8.

    Args:
        q, key_cache, value_cache, block_table, seq_lens, query_start_loc, scale, sliding_window:
            as in ``kvlab.kernels.paged_attention`` (checked by the caller).
        out: [num_tokens, num_q_heads, head_dim] buffer in q's dtype, written in place.
        dims: sizes from ``checks.check_attention_args``.
        max_query_len: longest query length in the batch (tokens); sizes the grid.
        tiles: launch parameters (``tiles.attention_tiles``).

    Returns:
        ``out``.
    """
    if dims.num_tokens == 0 or dims.num_seqs == 0:
        return out
    if tiles.block_q * dims.num_queries_per_kv > tiles.block_m or tiles.block_q < 1:
        raise ValueError(f"tiles {tiles} cannot hold block_q tokens x "
                         f"{dims.num_queries_per_kv} query heads in block_m rows")
    grid = lambda meta: (dims.num_seqs, triton.cdiv(max_query_len, meta["BLOCK_Q"]),  # noqa: E731
                         dims.num_kv_heads)
    unified_attention_kernel[grid](
        out, q, key_cache, value_cache, block_table, seq_lens, query_start_loc,
        scale * LOG2_E, sliding_window or 0,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2), block_table.stride(0),
        NUM_QUERIES_PER_KV=dims.num_queries_per_kv, HEAD_DIM=dims.head_dim,
        HEAD_DIM_PAD=head_dim_padded(dims.head_dim), BLOCK_SIZE=dims.block_size,
        BLOCK_M=tiles.block_m, BLOCK_Q=tiles.block_q, BLOCK_N=tiles.block_n,
        USE_WINDOW=sliding_window is not None,
        DOT_PRECISION=dot_precision(q.dtype), num_warps=tiles.num_warps,
        num_stages=tiles.num_stages,
    )
    return out
