"""Split-KV ("flash-decoding") paged attention for decode batches (one new token per sequence).

With one query token per sequence, the unified kernel launches only ``num_seqs * num_kv_heads``
programs, each walking a whole context: a small batch with long contexts leaves most SMs idle. Here
each context is cut into ``num_splits`` key ranges processed in parallel, then merged::

    stage 1  grid (num_seqs, num_kv_heads, num_splits)
             program -> G query heads x keys [split_start, split_end)
             writes partial_out = softmax-weighted sum over its keys  [num_seqs, H_q, splits, D]
                    partial_lse = log2-sum-exp2 of its scores         [num_seqs, H_q, splits]
    stage 2  grid (num_seqs, num_q_heads)
             out = sum_s 2^(lse_s - max lse) * partial_out_s / sum_s 2^(lse_s - max lse)

Empty splits (short contexts) leave ``lse = -inf`` and weigh nothing.

NOTE: import only after ``TRITON_INTERPRET`` is decided (``kvlab.kernels`` does it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvlab.kernels.checks import AttentionDims
from kvlab.kernels.paged_tile import LOG2_E, attend_paged_keys
from kvlab.kernels.tiles import next_power_of_2
from kvlab.kernels.unified_attention import dot_precision, head_dim_padded


@triton.jit
def decode_split_kernel(
    partial_out_ptr,  # *Pointer* to fp32 [num_seqs, num_q_heads, num_splits, HEAD_DIM_PAD]
    partial_lse_ptr,  # *Pointer* to fp32 [num_seqs, num_q_heads, num_splits] (log2 units)
    q_ptr,  # *Pointer* to q [num_seqs, num_q_heads, head_dim] (one token per sequence)
    key_cache_ptr,  # *Pointer* to key_cache [num_blocks, block_size, num_kv_heads, head_dim]
    value_cache_ptr,  # *Pointer* to value_cache, same shape and strides as key_cache
    block_table_ptr,  # *Pointer* to block_table [num_seqs, max_num_blocks]
    seq_lens_ptr,  # *Pointer* to seq_lens [num_seqs] (tokens, including the new one)
    query_start_loc_ptr,  # *Pointer* to query_start_loc [num_seqs + 1]: the token of each sequence
    qk_scale,  # softmax scale * log2(e)
    sliding_window,  # window in tokens (ignored unless USE_WINDOW)
    stride_qt, stride_qh,  # q strides (elements) over token and head
    stride_cb, stride_co, stride_ch,  # cache strides (elements) over block, offset, head
    stride_bt,  # block_table row stride (elements)
    num_splits,  # key ranges per sequence
    NUM_Q_HEADS: tl.constexpr,  # query heads
    NUM_QUERIES_PER_KV: tl.constexpr,  # GQA group size G
    HEAD_DIM: tl.constexpr,  # elements per head
    HEAD_DIM_PAD: tl.constexpr,  # HEAD_DIM rounded up to a power of two >= 16
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    BLOCK_H: tl.constexpr,  # Q tile rows (G padded to a power of two >= 16)
    BLOCK_N: tl.constexpr,  # keys per loop iteration
    USE_WINDOW: tl.constexpr,  # apply the sliding window
    DOT_PRECISION: tl.constexpr,  # tl.dot input_precision
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + seq).to(tl.int64)
    kv_start = 0
    if USE_WINDOW:  # the new token at seq_len - 1 sees positions > seq_len - 1 - window
        kv_start = tl.maximum(seq_len - sliding_window, 0)
    keys_per_split = tl.cdiv(tl.cdiv(seq_len - kv_start, num_splits), BLOCK_N) * BLOCK_N
    split_start = kv_start + split * keys_per_split
    split_end = tl.minimum(split_start + keys_per_split, seq_len)

    rows = tl.arange(0, BLOCK_H).to(tl.int64)
    head = kv_head * NUM_QUERIES_PER_KV + rows  # (BLOCK_H,) query heads of this KV head
    row_valid = rows < NUM_QUERIES_PER_KV
    dims = tl.arange(0, HEAD_DIM_PAD)
    tok = tl.load(query_start_loc_ptr + seq).to(tl.int64)
    q = tl.load(q_ptr + tok * stride_qt + head[:, None] * stride_qh + dims[None, :],
                mask=row_valid[:, None] & (dims < HEAD_DIM)[None, :], other=0.0)  # (BLOCK_H, D)
    # NOTE: every row is the token at seq_len - 1, so the causal mask keeps all keys < split_end;
    # the window is already applied through kv_start, hence USE_WINDOW=False below.
    m_i, l_i, acc = attend_paged_keys(
        q, tl.zeros([BLOCK_H], tl.int64) + seq_len - 1, split_start, split_end, key_cache_ptr,
        value_cache_ptr, block_table_ptr + seq.to(tl.int64) * stride_bt, kv_head, qk_scale,
        sliding_window, stride_cb, stride_co, stride_ch, BLOCK_H, BLOCK_N, HEAD_DIM, HEAD_DIM_PAD,
        BLOCK_SIZE, False, DOT_PRECISION)

    lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.log2(tl.where(l_i == 0.0, 1.0, l_i)))
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # an empty split leaves lse = -inf
    row_base = (seq.to(tl.int64) * NUM_Q_HEADS + head) * num_splits + split  # (BLOCK_H,)
    tl.store(partial_lse_ptr + row_base, lse, mask=row_valid)
    tl.store(partial_out_ptr + row_base[:, None] * HEAD_DIM_PAD + dims[None, :], acc,
             mask=row_valid[:, None])


@triton.jit
def decode_reduce_kernel(
    out_ptr,  # *Pointer* to out [num_tokens, num_q_heads, head_dim]
    partial_out_ptr,  # *Pointer* to fp32 [num_seqs, num_q_heads, num_splits, HEAD_DIM_PAD]
    partial_lse_ptr,  # *Pointer* to fp32 [num_seqs, num_q_heads, num_splits] (log2 units)
    query_start_loc_ptr,  # *Pointer* to query_start_loc [num_seqs + 1]: the token of each sequence
    stride_ot, stride_oh,  # out strides (elements) over token and head
    num_splits,  # key ranges per sequence
    NUM_Q_HEADS: tl.constexpr,  # query heads
    SPLITS_PAD: tl.constexpr,  # num_splits rounded up to a power of two
    HEAD_DIM: tl.constexpr,  # elements per head
    HEAD_DIM_PAD: tl.constexpr,  # row length of partial_out
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    splits = tl.arange(0, SPLITS_PAD)
    dims = tl.arange(0, HEAD_DIM_PAD)
    base = (seq.to(tl.int64) * NUM_Q_HEADS + head) * num_splits
    lse = tl.load(partial_lse_ptr + base + splits, mask=splits < num_splits, other=float("-inf"))
    weight = tl.exp2(lse - tl.max(lse, 0))  # (SPLITS_PAD,); split 0 is never empty (seq_len >= 1)
    part = tl.load(partial_out_ptr + (base + splits)[:, None] * HEAD_DIM_PAD + dims[None, :],
                   mask=(splits < num_splits)[:, None], other=0.0)  # (SPLITS_PAD, HEAD_DIM_PAD)
    merged = tl.sum(part * weight[:, None], 0) / tl.sum(weight, 0)  # (HEAD_DIM_PAD,)
    tok = tl.load(query_start_loc_ptr + seq).to(tl.int64)
    tl.store(out_ptr + tok * stride_ot + head * stride_oh + dims,
             merged.to(out_ptr.dtype.element_ty), mask=dims < HEAD_DIM)


def decode_attention_triton(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                            block_table: torch.Tensor, seq_lens: torch.Tensor,
                            query_start_loc: torch.Tensor, out: torch.Tensor, *, scale: float,
                            sliding_window: int | None, dims: AttentionDims, num_splits: int,
                            block_h: int, block_n: int, num_warps: int = 4) -> torch.Tensor:
    """Launch the two split-KV decode kernels on already-checked arguments (every q_len == 1).

    Mirrors: the 3D (parallel softmax segments) launch of
    vllm/v1/attention/ops/triton_unified_attention.py::unified_attention plus its
    ``reduce_segments`` kernel; the split idea is also in
    vllm/v1/attention/ops/triton_decode_attention.py.
    Differs: splits are equal key ranges aligned to ``block_n`` (vLLM: fixed 16 segments of tiles).

    Args:
        q, key_cache, value_cache, block_table, seq_lens, query_start_loc, scale, sliding_window:
            as in ``kvlab.kernels.paged_attention`` (checked by the caller).
        out: [num_seqs, num_q_heads, head_dim] buffer in q's dtype, written in place.
        dims: sizes from ``checks.check_attention_args``.
        num_splits: key ranges per sequence (>= 1).
        block_h: Q tile rows (power of two >= max(16, num_queries_per_kv)).
        block_n: keys per loop iteration (tokens, power of two >= 16).
        num_warps: warps per program of stage 1 (GPU only).

    Returns:
        ``out``.
    """
    if dims.num_seqs == 0:
        return out
    d_pad = head_dim_padded(dims.head_dim)
    partial_out = torch.empty((dims.num_seqs, dims.num_q_heads, num_splits, d_pad),
                              dtype=torch.float32, device=q.device)
    partial_lse = torch.empty((dims.num_seqs, dims.num_q_heads, num_splits),
                              dtype=torch.float32, device=q.device)
    split_grid = lambda meta: (dims.num_seqs, dims.num_kv_heads, num_splits)  # noqa: E731
    decode_split_kernel[split_grid](
        partial_out, partial_lse, q, key_cache, value_cache, block_table, seq_lens,
        query_start_loc, scale * LOG2_E, sliding_window or 0, q.stride(0), q.stride(1),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2), block_table.stride(0),
        num_splits, NUM_Q_HEADS=dims.num_q_heads, NUM_QUERIES_PER_KV=dims.num_queries_per_kv,
        HEAD_DIM=dims.head_dim, HEAD_DIM_PAD=d_pad, BLOCK_SIZE=dims.block_size, BLOCK_H=block_h,
        BLOCK_N=block_n, USE_WINDOW=sliding_window is not None,
        DOT_PRECISION=dot_precision(q.dtype), num_warps=num_warps, num_stages=2)
    reduce_grid = lambda meta: (dims.num_seqs, meta["NUM_Q_HEADS"])  # noqa: E731
    decode_reduce_kernel[reduce_grid](
        out, partial_out, partial_lse, query_start_loc, out.stride(0), out.stride(1), num_splits,
        NUM_Q_HEADS=dims.num_q_heads, SPLITS_PAD=next_power_of_2(num_splits),
        HEAD_DIM=dims.head_dim, HEAD_DIM_PAD=d_pad)
    return out
