"""AttentionMetadata: what the attention kernels need to find a batch's tokens in the paged cache.

Mirrors: vllm/v1/attention/backends/flash_attn.py::FlashAttentionMetadata (the fields the kernels
read). Differs: no cascade / DCP / AOT-scheduling fields; per-group tables live in one object (vLLM
builds one metadata object per KV-cache group and hands each layer its group's).

A batch packs every sequence's *new* tokens back to back; each sequence may be a full prefill, a
chunk of a prefill, or a one-token decode::

    seq 0: prefill of 5 tokens      seq 1: decode            seq 2: 2nd chunk of 4 tokens
    |t0 t1 t2 t3 t4|                |t5|                     |t6 t7 t8 t9|
    query_start_loc = [0, 5, 6, 10]     (cumulative query lengths, tokens)
    seq_lens        = [5, 18, 12]       (tokens in the cache after this step: computed + new)
    positions       = [0 1 2 3 4 | 17 | 8 9 10 11]

``slot_mapping[t] = block_id * block_size + position % block_size`` where ``block_id`` is entry
``position // block_size`` of the token's row of ``block_table``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class AttentionMetadata:
    """Where one batch's tokens live in the paged KV cache.

    Attributes:
        slot_mapping: [num_tokens] int64 slot of each new token (``-1`` = padding, not written).
        block_table: [num_seqs, max_num_blocks] int32 block ids of each sequence, in position order.
        seq_lens: [num_seqs] int32 tokens per sequence including this step's new ones (tokens).
        query_start_loc: [num_seqs + 1] int32 cumulative new-token counts (tokens).
        max_query_len: longest run of new tokens of one sequence (tokens).
        max_seq_len: longest ``seq_lens`` entry (tokens).
        group_slot_mappings: for hybrid models, one slot mapping per ``kv_cache_group_id``; None =
            every group uses ``slot_mapping``.
        group_block_tables: for hybrid models, one block table per ``kv_cache_group_id``; None =
            every group uses ``block_table``.
    """

    slot_mapping: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    query_start_loc: torch.Tensor
    max_query_len: int
    max_seq_len: int
    group_slot_mappings: tuple[torch.Tensor, ...] | None = None
    group_block_tables: tuple[torch.Tensor, ...] | None = None

    def __post_init__(self) -> None:
        num_seqs = self.seq_lens.shape[0]
        if self.query_start_loc.shape != (num_seqs + 1,):
            raise ValueError(f"query_start_loc must have shape ({num_seqs + 1},) for {num_seqs} "
                             f"sequences, got {tuple(self.query_start_loc.shape)}")
        if self.block_table.dim() != 2 or self.block_table.shape[0] != num_seqs:
            raise ValueError(f"block_table must be [num_seqs={num_seqs}, max_num_blocks], got "
                             f"{tuple(self.block_table.shape)}")
        if (self.group_slot_mappings is None) != (self.group_block_tables is None):
            raise ValueError("give both group_slot_mappings and group_block_tables, or neither")
        if self.group_block_tables is not None:
            if len(self.group_block_tables) != len(self.group_slot_mappings):
                raise ValueError("group_slot_mappings and group_block_tables need one entry per "
                                 "kv_cache_group_id each")
            object.__setattr__(self, "group_slot_mappings", tuple(self.group_slot_mappings))
            object.__setattr__(self, "group_block_tables", tuple(self.group_block_tables))

    @property
    def num_seqs(self) -> int:
        """Sequences in the batch."""
        return self.seq_lens.shape[0]

    @property
    def num_tokens(self) -> int:
        """New tokens in the batch (tokens)."""
        return self.slot_mapping.shape[0]

    @property
    def num_kv_cache_groups(self) -> int | None:
        """Groups with their own tables, or None when all share one."""
        return None if self.group_block_tables is None else len(self.group_block_tables)

    def tables_for_group(self, kv_cache_group_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(slot_mapping, block_table)`` of one KV-cache group.

        Raises:
            KeyError: per-group tables are given and ``kv_cache_group_id`` is not one of them.
        """
        if self.group_block_tables is None:
            return self.slot_mapping, self.block_table
        if not 0 <= kv_cache_group_id < len(self.group_block_tables):
            raise KeyError(f"kv_cache_group_id {kv_cache_group_id} has no tables; this metadata "
                           f"holds groups 0..{len(self.group_block_tables) - 1}")
        return (self.group_slot_mappings[kv_cache_group_id],
                self.group_block_tables[kv_cache_group_id])

    def to(self, device: str | torch.device) -> AttentionMetadata:
        """A copy with every tensor on ``device``."""
        def move(ts: tuple[torch.Tensor, ...] | None) -> tuple[torch.Tensor, ...] | None:
            return None if ts is None else tuple(t.to(device) for t in ts)

        return replace(self, slot_mapping=self.slot_mapping.to(device),
                       block_table=self.block_table.to(device), seq_lens=self.seq_lens.to(device),
                       query_start_loc=self.query_start_loc.to(device),
                       group_slot_mappings=move(self.group_slot_mappings),
                       group_block_tables=move(self.group_block_tables))


def _block_table_and_slots(block_ids: Sequence[Sequence[int]], num_computed_tokens: Sequence[int],
                           num_new_tokens: Sequence[int],
                           block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max((len(ids) for ids in block_ids), default=0)
    block_table = torch.zeros(len(block_ids), max(width, 1), dtype=torch.int32)  # (S, B)
    slots: list[int] = []
    rows = zip(block_ids, num_computed_tokens, num_new_tokens, strict=True)
    for i, (ids, start, count) in enumerate(rows):
        needed = -(-(start + count) // block_size)
        if len(ids) < needed:
            raise ValueError(f"sequence {i} needs {needed} blocks for {start + count} tokens with "
                             f"block_size={block_size}, got {len(ids)} block ids")
        block_table[i, :len(ids)] = torch.tensor(list(ids), dtype=torch.int32)
        slots += [ids[p // block_size] * block_size + p % block_size
                  for p in range(start, start + count)]
    return block_table, torch.tensor(slots, dtype=torch.int64)  # (S, B), (T,)


def _check_batch(block_ids: Sequence[Sequence[int]], num_computed_tokens: Sequence[int],
                 num_new_tokens: Sequence[int], block_size: int,
                 group_block_ids: Sequence[Sequence[Sequence[int]]] | None) -> None:
    num_seqs = len(block_ids)
    if not num_seqs or not num_seqs == len(num_computed_tokens) == len(num_new_tokens):
        raise ValueError("block_ids, num_computed_tokens and num_new_tokens need one entry per "
                         "sequence each, for at least one sequence")
    if block_size <= 0 or any(n < 1 for n in num_new_tokens) or \
            any(c < 0 for c in num_computed_tokens):
        raise ValueError("block_size and num_new_tokens must be >= 1, num_computed_tokens >= 0")
    if group_block_ids is not None:
        if any(len(g) != num_seqs for g in group_block_ids):
            raise ValueError(f"group_block_ids needs {num_seqs} block lists per group")
        if [list(b) for b in group_block_ids[0]] != [list(b) for b in block_ids]:
            raise ValueError("with group_block_ids, block_ids must equal group 0's block ids")


def build_attention_metadata(block_ids: Sequence[Sequence[int]],
                             num_computed_tokens: Sequence[int], num_new_tokens: Sequence[int],
                             block_size: int, *,
                             group_block_ids: Sequence[Sequence[Sequence[int]]] | None = None,
                             device: str | torch.device = "cpu"
                             ) -> tuple[torch.Tensor, AttentionMetadata]:
    """Positions and metadata of a batch from per-sequence block ids (for tests, notebooks, demos).

    An engine fills the same fields from ``kvlab.worker.BlockTable``; this is the by-hand way.

    Args:
        block_ids: per sequence, its block ids in position order (blocks).
        num_computed_tokens: per sequence, tokens already in the cache (tokens).
        num_new_tokens: per sequence, tokens this step computes, at least 1 (tokens).
        block_size: tokens per block.
        group_block_ids: hybrid models: ``[kv_cache_group_id][seq] -> block ids``; then
            ``block_ids`` must equal group 0's.
        device: where the tensors go.

    Returns:
        ``(positions [num_tokens] int64, AttentionMetadata)``.

    Raises:
        ValueError: no sequences, lengths differ, a count is negative or zero, a sequence has too
            few blocks, or ``block_ids`` differs from group 0's.

    Examples:
        >>> pos, md = build_attention_metadata([[7, 2], [5]], [0, 3], [5, 1], block_size=4)
        >>> pos.tolist(), md.slot_mapping.tolist(), md.seq_lens.tolist()
        ([0, 1, 2, 3, 4, 3], [28, 29, 30, 31, 8, 23], [5, 4])
    """
    _check_batch(block_ids, num_computed_tokens, num_new_tokens, block_size, group_block_ids)
    block_table, slot_mapping = _block_table_and_slots(block_ids, num_computed_tokens,
                                                       num_new_tokens, block_size)
    groups = None
    if group_block_ids is not None:
        groups = [_block_table_and_slots(ids, num_computed_tokens, num_new_tokens, block_size)
                  for ids in group_block_ids]
    counts = list(zip(num_computed_tokens, num_new_tokens, strict=True))
    seq_lens = [c + n for c, n in counts]
    positions = torch.cat([torch.arange(c, c + n) for c, n in counts])          # (T,)
    starts = torch.tensor([0, *num_new_tokens]).cumsum(0).to(torch.int32)  # (S + 1,)
    metadata = AttentionMetadata(
        slot_mapping=slot_mapping, block_table=block_table,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32), query_start_loc=starts,
        max_query_len=max(num_new_tokens), max_seq_len=max(seq_lens),
        group_slot_mappings=None if groups is None else tuple(s for _, s in groups),
        group_block_tables=None if groups is None else tuple(b for b, _ in groups))
    return positions.to(device), metadata.to(device)
