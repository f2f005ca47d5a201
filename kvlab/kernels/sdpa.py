"""Batched torch paged attention: one ``scaled_dot_product_attention`` call per layer.

``kvlab.kernels.reference`` is the readable per-sequence loop the Triton kernels are tested
against; this module is the fast torch path the model runs on CPU. Everything that depends only on
the batch's layout (which slot holds key position ``j`` of sequence ``i``, which keys each query may
see, where each new token is written) is worked out and checked once per step by
``plan_paged_attention``; every layer of the KV-cache group then reuses that plan::

    step:   plan = plan_paged_attention(block_table, seq_lens, query_start_loc, block_size=16,
                                        num_blocks=64, num_queries_per_kv=3, slot_mapping=slots)
    layer:  write_kv(plan, k, v, key_cache, value_cache)      # index_copy_ into the slots
            out = paged_attention_sdpa(q, key_cache, value_cache, plan, scale=0.125)

The padded gather: sequences are split into a decode part (one new token each) and a prefill part
(several). Within a part, each sequence's visible keys are gathered from the paged cache into a
``[num_seqs, kv_heads, max_keys, head_dim]`` tensor (positions past a sequence's end point at its
last key and are masked), queries are padded to the part's longest, and one SDPA call attends all of
them. GQA without copying K/V: the ``G`` query heads that share a KV head become ``G`` query rows of
that KV head (``[S, H_kv, G * Q, D]``), so SDPA sees plain multi-head attention.

NOTE: with a sliding window only the window's keys are gathered (positions before
``first_query_position - sliding_window + 1`` are never read: their blocks may be the null_block).

Mirrors: the result of vllm/v1/attention/ops/triton_unified_attention.py::unified_attention (as the
reference does); the once-per-step metadata is the idea of vLLM's attention metadata builders.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kvlab.kernels.checks import AttentionDims, check_attention_args, check_lengths


@dataclass(frozen=True)
class SDPAPart:
    """Sequences attended by one SDPA call.

    Attributes:
        kv_slots: [num_seqs_part, max_keys] int64 slot (``block_id * block_size + offset``) of each
            gathered key position.
        attn_mask: [num_seqs_part, 1, G * max_query_len, max_keys] bool, True = attend; None =
            every gathered key is visible to every query.
        q_rows: [num_seqs_part * max_query_len] int64 packed token feeding each padded query row
            (padding repeats a sequence's last token); None = the rows are the tokens in order.
        pad_rows: [num_tokens_part] int64 padded row holding each real token; None = all rows.
        out_rows: [num_tokens_part] int64 packed token each result row belongs to; None = all
            tokens in order.
        max_query_len: padded query length (tokens).
    """

    kv_slots: torch.Tensor
    attn_mask: torch.Tensor | None
    q_rows: torch.Tensor | None
    pad_rows: torch.Tensor | None
    out_rows: torch.Tensor | None
    max_query_len: int


@dataclass(frozen=True)
class PagedAttentionPlan:
    """One step's checked layout for one KV-cache group, reused by each of its layers.

    Attributes:
        num_tokens: packed new tokens (tokens).
        num_queries_per_kv: GQA group size ``G``.
        parts: the SDPA calls (decode part first), covering every token with a query.
        write_slots: [num_written] int64 slots of the new keys/values (``-1`` padding removed), or
            None when no ``slot_mapping`` was given.
        write_rows: [num_written] int64 rows of ``key``/``value`` to write; None = all rows.
    """

    num_tokens: int
    num_queries_per_kv: int
    parts: tuple[SDPAPart, ...]
    write_slots: torch.Tensor | None
    write_rows: torch.Tensor | None


def _identity(rows: torch.Tensor, n: int) -> bool:
    return rows.numel() == n and bool((rows == torch.arange(n)).all())


def _plan_part(seqs: torch.Tensor, lens: torch.Tensor, q_lens: torch.Tensor,
               starts: torch.Tensor, block_table: torch.Tensor, block_size: int,
               num_blocks: int, group: int, window: int | None, num_tokens: int) -> SDPAPart:
    """Gather slots, mask and row maps of the sequences ``seqs`` (all CPU int64)."""
    seq_len, q_len = lens[seqs], q_lens[seqs]                                    # (S,) x2
    first_q = seq_len - q_len                                                    # (S,)
    key_start = (first_q - window + 1).clamp(min=0) if window else torch.zeros_like(first_q)
    max_q, max_k = int(q_len.max()), int((seq_len - key_start).max())
    r = torch.minimum(torch.arange(max_q)[None, :], q_len[:, None] - 1)         # (S, Q)
    q_pos = first_q[:, None] + r                                                 # (S, Q)
    k_pos = key_start[:, None] + torch.arange(max_k)[None, :]                    # (S, K)
    mask = k_pos[:, None, :] <= q_pos[:, :, None]                                # (S, Q, K)
    if window:
        mask &= k_pos[:, None, :] > q_pos[:, :, None] - window
    k_pos = torch.minimum(k_pos, seq_len[:, None] - 1)  # past the end: repeat the last key
    block_ids = block_table[seqs].gather(1, k_pos // block_size)                 # (S, K)
    if block_ids.numel() and (int(block_ids.min()) < 0 or int(block_ids.max()) >= num_blocks):
        raise ValueError(f"block_table entries in use must lie in [0, {num_blocks}) (num_blocks), "
                         f"got [{int(block_ids.min())}, {int(block_ids.max())}]")
    kv_slots = block_ids * block_size + k_pos % block_size                       # (S, K)
    num_seqs = seqs.shape[0]
    attn_mask = None if bool(mask.all()) else (
        mask[:, None].expand(num_seqs, group, max_q, max_k)
        .reshape(num_seqs, 1, group * max_q, max_k))                             # (S, 1, G*Q, K)
    q_rows = (starts[seqs][:, None] + r).flatten()                               # (S*Q,)
    real = (torch.arange(max_q)[None, :] < q_len[:, None]).flatten()             # (S*Q,)
    pad_rows = real.nonzero().flatten()                                          # (T_part,)
    out_rows = q_rows[pad_rows]                                                  # (T_part,)
    return SDPAPart(kv_slots=kv_slots, attn_mask=attn_mask,
                    q_rows=None if _identity(q_rows, num_tokens) else q_rows,
                    pad_rows=None if bool(real.all()) else pad_rows,
                    out_rows=None if _identity(out_rows, num_tokens) else out_rows,
                    max_query_len=max_q)


def plan_paged_attention(block_table: torch.Tensor, seq_lens: torch.Tensor,
                         query_start_loc: torch.Tensor, *, block_size: int, num_blocks: int,
                         num_queries_per_kv: int, sliding_window: int | None = None,
                         slot_mapping: torch.Tensor | None = None) -> PagedAttentionPlan:
    """Check one step's layout and precompute the gathers every layer of a group reuses.

    Args:
        block_table: [num_seqs, max_num_blocks] int32/int64 block ids in position order.
        seq_lens: [num_seqs] context lengths incl. this step's new tokens (tokens).
        query_start_loc: [num_seqs + 1] cumulative new-token counts (tokens).
        block_size: tokens per block (tokens).
        num_blocks: blocks in each layer's cache (blocks).
        num_queries_per_kv: query heads per KV head (GQA group size).
        sliding_window: attend only the last ``sliding_window`` positions (tokens), or None.
        slot_mapping: [num_tokens] slots of the new tokens (``-1`` = padding, not written); None
            when only attention is planned.

    Returns:
        A PagedAttentionPlan on ``block_table``'s device.

    Raises:
        ValueError: the lengths ``kvlab.kernels.checks.check_lengths`` rejects, a block id in use
            outside ``[0, num_blocks)``, a slot outside ``[-1, num_blocks * block_size)``, a
            slot_mapping whose length is not num_tokens, or a bad size/window.
    """
    if not all(isinstance(v, int) and v > 0 for v in (block_size, num_blocks, num_queries_per_kv)):
        raise ValueError("block_size, num_blocks and num_queries_per_kv must be positive ints, got "
                         f"{block_size!r}, {num_blocks!r}, {num_queries_per_kv!r}")
    if sliding_window is not None and not (isinstance(sliding_window, int) and sliding_window > 0):
        raise ValueError(f"sliding_window must be None or a positive int (tokens), got "
                         f"{sliding_window!r}")
    device = block_table.device
    qsl = query_start_loc.detach().to("cpu", torch.int64)
    num_seqs, num_tokens = seq_lens.shape[0], int(qsl[-1]) if qsl.numel() else 0
    dims = AttentionDims(num_tokens, num_queries_per_kv, 1, 0, num_blocks, block_size, num_seqs,
                         block_table.shape[1])
    check_lengths(dims, seq_lens, query_start_loc)
    lens = seq_lens.detach().to("cpu", torch.int64)
    table = block_table.detach().to("cpu", torch.int64)
    q_lens = qsl[1:] - qsl[:-1]
    parts = []
    for seqs in ((q_lens == 1).nonzero().flatten(), (q_lens > 1).nonzero().flatten()):
        if seqs.numel():
            parts.append(_plan_part(seqs, lens, q_lens, qsl[:-1], table, block_size, num_blocks,
                                    num_queries_per_kv, sliding_window, num_tokens))
    write_slots = write_rows = None
    if slot_mapping is not None:
        write_slots, write_rows = _plan_write(slot_mapping, num_tokens, num_blocks * block_size)
    to = lambda t: None if t is None else t.to(device)  # noqa: E731
    parts = tuple(SDPAPart(to(p.kv_slots), to(p.attn_mask), to(p.q_rows), to(p.pad_rows),
                           to(p.out_rows), p.max_query_len) for p in parts)
    return PagedAttentionPlan(num_tokens, num_queries_per_kv, parts, to(write_slots),
                              to(write_rows))


def _plan_write(slot_mapping: torch.Tensor, num_tokens: int,
                num_slots: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    if slot_mapping.dim() != 1 or slot_mapping.shape[0] != num_tokens:
        raise ValueError(f"slot_mapping must be [num_tokens={num_tokens}], got "
                         f"{tuple(slot_mapping.shape)}")
    slots = slot_mapping.detach().to("cpu", torch.int64)
    if slots.numel() and (int(slots.min()) < -1 or int(slots.max()) >= num_slots):
        raise ValueError(f"slot_mapping values must lie in [-1, {num_slots}) "
                         f"(num_blocks * block_size), got [{int(slots.min())}, {int(slots.max())}]")
    keep = slots >= 0                                                            # (T,)
    if bool(keep.all()):
        return slots, None
    return slots[keep], keep.nonzero().flatten()


def write_kv(plan: PagedAttentionPlan, key: torch.Tensor, value: torch.Tensor,
             key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
    """Write the step's new keys/values into their planned slots (in place, ``index_copy_``).

    Args:
        plan: from ``plan_paged_attention`` with a ``slot_mapping``.
        key, value: [num_tokens, num_kv_heads, head_dim] in the cache dtype.
        key_cache, value_cache: [num_blocks, block_size, num_kv_heads, head_dim], contiguous.

    Raises:
        ValueError: the plan has no slots, or a cache is not contiguous.
    """
    if plan.write_slots is None:
        raise ValueError("this plan was made without a slot_mapping: nothing to write")
    if not (key_cache.is_contiguous() and value_cache.is_contiguous()):
        raise ValueError("write_kv needs contiguous key_cache/value_cache (kv_cache[layer][0/1])")
    if plan.write_rows is not None:
        key, value = key[plan.write_rows], value[plan.write_rows]               # (T', H_kv, D)
    key_cache.view(-1, *key_cache.shape[2:]).index_copy_(0, plan.write_slots, key)
    value_cache.view(-1, *value_cache.shape[2:]).index_copy_(0, plan.write_slots, value)


def _attend_part(q: torch.Tensor, k_flat: torch.Tensor, v_flat: torch.Tensor, part: SDPAPart,
                 group: int, scale: float) -> torch.Tensor:
    """Padded rows [S * Q, H_q, D] (float32) of one part's SDPA call."""
    num_seqs, max_k = part.kv_slots.shape
    num_q, num_kv, head_dim = part.max_query_len, k_flat.shape[1], k_flat.shape[2]
    slots = part.kv_slots.view(-1)
    k = k_flat.index_select(0, slots).view(num_seqs, max_k, num_kv, head_dim).transpose(1, 2)
    v = v_flat.index_select(0, slots).view(num_seqs, max_k, num_kv, head_dim).transpose(1, 2)
    qp = q if part.q_rows is None else q.index_select(0, part.q_rows)           # (S*Q, H_q, D)
    qp = qp.view(num_seqs, num_q, num_kv, group, head_dim).permute(0, 2, 3, 1, 4)
    qp = qp.reshape(num_seqs, num_kv, group * num_q, head_dim)                  # (S, H_kv, G*Q, D)
    o = F.scaled_dot_product_attention(qp.float(), k.float(), v.float(),
                                       attn_mask=part.attn_mask, scale=scale)  # (S, H_kv, G*Q, D)
    o = o.view(num_seqs, num_kv, group, num_q, head_dim).permute(0, 3, 1, 2, 4)
    return o.reshape(num_seqs * num_q, num_kv * group, head_dim)               # (S*Q, H_q, D)


def paged_attention_sdpa(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                         plan: PagedAttentionPlan, *, scale: float,
                         out: torch.Tensor | None = None) -> torch.Tensor:
    """Causal GQA attention of a planned packed batch: one SDPA call per part (float32 math).

    Args:
        q: [num_tokens, num_q_heads, head_dim], num_q_heads = num_kv_heads * plan's G.
        key_cache, value_cache: [num_blocks, block_size, num_kv_heads, head_dim], contiguous in
            their last three dims (``kv_cache[layer][0/1]``).
        plan: this step's ``plan_paged_attention`` for the layer's KV-cache group.
        scale: softmax scale.
        out: optional [num_tokens, num_q_heads, head_dim] buffer in q's dtype.

    Returns:
        [num_tokens, num_q_heads, head_dim] in q's dtype (``out`` when given). Rows of sequences
        with no new tokens are left untouched (uninitialised without ``out``).

    Raises:
        ValueError: q's token count differs from the plan's.
    """
    if q.shape[0] != plan.num_tokens:
        raise ValueError(f"q has {q.shape[0]} tokens, the plan {plan.num_tokens}")
    k_flat = key_cache.reshape(-1, *key_cache.shape[2:])                        # (N*B, H_kv, D)
    v_flat = value_cache.reshape(-1, *value_cache.shape[2:])                    # (N*B, H_kv, D)
    parts = plan.parts
    if out is None and len(parts) == 1 and parts[0].pad_rows is None \
            and parts[0].out_rows is None:
        return _attend_part(q, k_flat, v_flat, parts[0], plan.num_queries_per_kv,
                            scale).to(q.dtype)
    result = torch.empty_like(q) if out is None else out
    for part in parts:
        rows = _attend_part(q, k_flat, v_flat, part, plan.num_queries_per_kv, scale)
        if part.pad_rows is not None:
            rows = rows.index_select(0, part.pad_rows)                          # (T_part, H_q, D)
        if part.out_rows is None:
            result.copy_(rows)
        else:
            result.index_copy_(0, part.out_rows, rows.to(q.dtype))
    return result


def paged_attention_batched(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                            block_table: torch.Tensor, seq_lens: torch.Tensor,
                            query_start_loc: torch.Tensor, *, scale: float,
                            sliding_window: int | None = None,
                            out: torch.Tensor | None = None) -> torch.Tensor:
    """``paged_attention_torch``'s arguments and result, computed with one plan and SDPA calls.

    Checks every argument (``kvlab.kernels.checks``), plans, attends. A model that runs many layers
    on one layout should plan once (``plan_paged_attention``) and call ``paged_attention_sdpa``.

    Raises:
        TypeError, ValueError: as ``paged_attention_torch``, plus a block id in use outside
            ``[0, num_blocks)``.
    """
    dims = check_attention_args(q, key_cache, value_cache, block_table, seq_lens, query_start_loc,
                                scale, sliding_window, out)
    check_lengths(dims, seq_lens, query_start_loc)
    plan = plan_paged_attention(block_table, seq_lens, query_start_loc,
                                block_size=dims.block_size, num_blocks=dims.num_blocks,
                                num_queries_per_kv=dims.num_queries_per_kv,
                                sliding_window=sliding_window)
    return paged_attention_sdpa(q, key_cache, value_cache, plan, scale=scale, out=out)
