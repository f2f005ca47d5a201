"""Plain-torch references for the paged KV-cache kernels.

These are the trusted, readable versions: a loop over sequences that gathers each sequence's keys
and values out of the paged cache through its ``block_table`` row and runs ordinary masked softmax
attention in float32. The Triton kernels are tested against them; they are also the
``backend="torch"`` path and the CPU default of ``kvlab.kernels``.

Paged layout (vLLM's FlashAttention layout, one layer)::

    key_cache[block_id, offset, kv_head, :]   holds the key of the token in slot
    slot = block_id * block_size + offset

    sequence i, token position p -> block_id = block_table[i, p // block_size]
                                    offset   = p % block_size
"""

from __future__ import annotations

import torch

from kvlab.kernels.checks import (
    check_attention_args,
    check_cache_write_args,
    check_lengths,
)


def reshape_and_cache_torch(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                            value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Write each token's key/value into its slot of the paged cache (in place).

    Mirrors: vllm/_custom_ops.py::reshape_and_cache_flash (the CUDA op; the Triton twin is
    vllm/v1/attention/ops/triton_reshape_and_cache_flash.py). Differs: no fp8 cache / kv scales.

    Args:
        key: [num_tokens, num_kv_heads, head_dim] new keys.
        value: [num_tokens, num_kv_heads, head_dim] new values.
        key_cache: [num_blocks, block_size, num_kv_heads, head_dim], written in place.
        value_cache: [num_blocks, block_size, num_kv_heads, head_dim], written in place.
        slot_mapping: [num_tokens] int64 (or int32) slots, ``block_id * block_size + offset``;
            ``-1`` marks a padding token that is skipped.

    Raises:
        TypeError, ValueError: see ``kvlab.kernels.checks.check_cache_write_args``; also
            ValueError if a slot is outside ``[-1, num_blocks * block_size)`` (then nothing is
            written).
    """
    check_cache_write_args(key, value, key_cache, value_cache, slot_mapping)
    num_blocks, block_size = key_cache.shape[:2]
    slots = slot_mapping.to(torch.int64)
    if slots.numel() and (int(slots.min()) < -1 or int(slots.max()) >= num_blocks * block_size):
        raise ValueError(f"slot_mapping values must lie in [-1, {num_blocks * block_size}) "
                         f"(num_blocks * block_size), got [{int(slots.min())}, {int(slots.max())}]")
    keep = slots >= 0                                     # (T,) padding tokens carry -1
    block_ids = slots[keep] // block_size                 # (T',)
    offsets = slots[keep] % block_size                    # (T',)
    key_cache[block_ids, offsets] = key[keep]             # (T', H_kv, D)
    value_cache[block_ids, offsets] = value[keep]         # (T', H_kv, D)


def gather_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table_row: torch.Tensor,
              seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather one sequence's keys and values from the paged cache into contiguous tensors.

    Args:
        key_cache: [num_blocks, block_size, num_kv_heads, head_dim].
        value_cache: [num_blocks, block_size, num_kv_heads, head_dim].
        block_table_row: [max_num_blocks] block ids of this sequence, in position order.
        seq_len: tokens to gather (positions ``0 .. seq_len - 1``).

    Returns:
        ``(k, v)``, each [seq_len, num_kv_heads, head_dim] in the cache dtype.
    """
    block_size = key_cache.shape[1]
    positions = torch.arange(seq_len, device=key_cache.device)          # (S,)
    block_ids = block_table_row.to(torch.int64)[positions // block_size]  # (S,)
    offsets = positions % block_size                                    # (S,)
    return key_cache[block_ids, offsets], value_cache[block_ids, offsets]  # (S, H_kv, D) x2


def attention_mask(q_len: int, seq_len: int, sliding_window: int | None,
                   device: torch.device | str = "cpu") -> torch.Tensor:
    """Boolean mask of which keys each new query token may attend.

    Query ``j`` sits at position ``p = seq_len - q_len + j``; it sees key position ``k`` when
    ``k <= p`` and, with a window ``W``, ``k > p - W`` (the last ``W`` positions including itself).

    Returns:
        [q_len, seq_len] bool, True = attend.
    """
    q_pos = torch.arange(seq_len - q_len, seq_len, device=device)[:, None]  # (Q, 1)
    k_pos = torch.arange(seq_len, device=device)[None, :]                    # (1, S)
    mask = k_pos <= q_pos                                                    # (Q, S)
    if sliding_window is not None:
        mask &= k_pos > q_pos - sliding_window
    return mask


def paged_attention_torch(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                          block_table: torch.Tensor, seq_lens: torch.Tensor,
                          query_start_loc: torch.Tensor, *, scale: float,
                          sliding_window: int | None = None,
                          out: torch.Tensor | None = None) -> torch.Tensor:
    """Causal (optionally sliding-window) GQA attention of packed new tokens over a paged cache.

    Mirrors: what vllm/v1/attention/ops/triton_unified_attention.py::unified_attention computes
    (prefill, chunked prefill and decode in one call), written as a per-sequence torch loop in
    float32. Differs: no ALiBi, soft-cap, sinks, fp8 cache or cascade attention.

    Args:
        q: [num_tokens, num_q_heads, head_dim], every sequence's new tokens packed back to back.
        key_cache: [num_blocks, block_size, num_kv_heads, head_dim].
        value_cache: [num_blocks, block_size, num_kv_heads, head_dim].
        block_table: [num_seqs, max_num_blocks] int32 block ids.
        seq_lens: [num_seqs] int32 context lengths in tokens, including this step's new tokens.
        query_start_loc: [num_seqs + 1] int32, cumulative query lengths (tokens); sequence
            ``i`` owns ``q[query_start_loc[i]:query_start_loc[i + 1]]``.
        scale: softmax scale, usually ``head_dim ** -0.5``.
        sliding_window: attend only the last ``sliding_window`` positions (tokens), or None.
        out: optional [num_tokens, num_q_heads, head_dim] output buffer in q's dtype.

    Returns:
        [num_tokens, num_q_heads, head_dim] in q's dtype (``out`` when given).

    Raises:
        TypeError, ValueError: see ``kvlab.kernels.checks`` (shapes, dtypes, devices, lengths).
    """
    dims = check_attention_args(q, key_cache, value_cache, block_table, seq_lens, query_start_loc,
                                scale, sliding_window, out)
    check_lengths(dims, seq_lens, query_start_loc)
    result = torch.empty_like(q) if out is None else out
    starts = query_start_loc.tolist()
    for i, seq_len in enumerate(seq_lens.tolist()):
        start, end = starts[i], starts[i + 1]
        if end == start:
            continue
        k, v = gather_kv(key_cache, value_cache, block_table[i], seq_len)  # (S, H_kv, D) x2
        k = k.float().repeat_interleave(dims.num_queries_per_kv, dim=1)  # (S, H_q, D)
        v = v.float().repeat_interleave(dims.num_queries_per_kv, dim=1)  # (S, H_q, D)
        qi = q[start:end].float()                                         # (Q, H_q, D)
        scores = torch.einsum("qhd,khd->hqk", qi, k) * scale              # (H_q, Q, S)
        mask = attention_mask(end - start, seq_len, sliding_window, q.device)  # (Q, S)
        scores = scores.masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)                             # (H_q, Q, S)
        result[start:end] = torch.einsum("hqk,khd->qhd", probs, v).to(q.dtype)  # (Q, H_q, D)
    return result
