"""Random paged batches for tests, benchmarks and notebooks.

``random_paged_batch`` builds what a worker step hands the attention kernel: a paged cache filled
with random keys/values, a block table whose block ids are scattered (never contiguous; block 0 is
kept free as vLLM's ``null_block``), per-sequence context lengths and packed new-token queries.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PagedBatch:
    """One attention step over a paged cache.

    Attributes:
        q: [num_tokens, num_q_heads, head_dim] packed new-token queries.
        key_cache: [num_blocks, block_size, num_kv_heads, head_dim] (a view of ``kv_cache[0]``).
        value_cache: [num_blocks, block_size, num_kv_heads, head_dim] (a view of ``kv_cache[1]``).
        block_table: [num_seqs, max_num_blocks] int32 block ids (unused columns hold 0).
        seq_lens: [num_seqs] int32 context lengths incl. the new tokens (tokens).
        query_start_loc: [num_seqs + 1] int32 cumulative query lengths (tokens).
        max_query_len: longest query (tokens).
        max_seq_len: longest context (tokens).
    """

    q: torch.Tensor
    key_cache: torch.Tensor
    value_cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    query_start_loc: torch.Tensor
    max_query_len: int
    max_seq_len: int

    def attention_args(self) -> tuple[torch.Tensor, ...]:
        """Positional arguments of ``paged_attention``: (q, key_cache, value_cache, block_table,
        seq_lens, query_start_loc)."""
        return (self.q, self.key_cache, self.value_cache, self.block_table, self.seq_lens,
                self.query_start_loc)

    def kv_bytes_read(self) -> int:
        """Bytes of K and V a kernel must read for this batch: every context token, both caches."""
        num_kv_heads, head_dim = self.key_cache.shape[2:]
        elem = self.key_cache.element_size()
        return 2 * int(self.seq_lens.sum()) * num_kv_heads * head_dim * elem


def scattered_block_table(blocks_per_seq: list[int], num_blocks: int,
                          gen: torch.Generator) -> torch.Tensor:
    """Give each sequence distinct random block ids from ``1 .. num_blocks - 1``.

    Returns:
        [num_seqs, max(blocks_per_seq) + 1] int32; unused columns hold 0 (the null_block).
    """
    ids = (torch.randperm(num_blocks - 1, generator=gen) + 1).tolist()  # scattered physical ids
    block_table = torch.zeros(len(blocks_per_seq), max(blocks_per_seq, default=0) + 1,
                              dtype=torch.int32)
    for i, n in enumerate(blocks_per_seq):
        block_table[i, :n] = torch.tensor(ids[:n], dtype=torch.int32)
        ids = ids[n:]
    return block_table


def random_paged_batch(seq_lens: list[int], query_lens: list[int], *, num_q_heads: int,
                       num_kv_heads: int, head_dim: int, block_size: int,
                       dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                       seed: int = 0, extra_blocks: int = 3) -> PagedBatch:
    """Build a random paged attention batch.

    Args:
        seq_lens: per-sequence context length including the new tokens (tokens).
        query_lens: per-sequence new tokens (tokens), each ``<= seq_lens[i]``; 1 = decode,
            ``== seq_len`` = prefill, in between = chunked prefill.
        num_q_heads: query heads (a multiple of ``num_kv_heads``).
        num_kv_heads: key/value heads.
        head_dim: elements per head.
        block_size: tokens per cache block.
        dtype: dtype of q and the caches.
        device: where the tensors are put.
        seed: random seed (the batch is generated on CPU, then moved).
        extra_blocks: unused physical blocks (random data a wrong gather would pick up) (blocks).

    Returns:
        A ``PagedBatch``.

    Raises:
        ValueError: lists of different lengths, or a query longer than its context.
    """
    if len(seq_lens) != len(query_lens):
        raise ValueError(f"seq_lens ({len(seq_lens)}) and query_lens ({len(query_lens)}) "
                         "differ in length")
    if any(ql > sl or ql < 0 for sl, ql in zip(seq_lens, query_lens, strict=True)):
        raise ValueError("each query_len must lie in [0, seq_len]: "
                         f"{list(zip(seq_lens, query_lens, strict=True))}")
    gen = torch.Generator().manual_seed(seed)
    blocks_per_seq = [-(-sl // block_size) for sl in seq_lens]  # ceil, blocks
    num_blocks = 1 + sum(blocks_per_seq) + extra_blocks  # block 0 = null_block
    block_table = scattered_block_table(blocks_per_seq, num_blocks, gen)
    kv_cache = torch.randn(2, num_blocks, block_size, num_kv_heads, head_dim, generator=gen)
    q = torch.randn(sum(query_lens), num_q_heads, head_dim, generator=gen)
    query_start_loc = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()],
                                   dtype=torch.int32)
    kv_cache = kv_cache.to(device=device, dtype=dtype)
    return PagedBatch(
        q=q.to(device=device, dtype=dtype), key_cache=kv_cache[0], value_cache=kv_cache[1],
        block_table=block_table.to(device), seq_lens=torch.tensor(seq_lens, dtype=torch.int32,
                                                                  device=device),
        query_start_loc=query_start_loc.to(device), max_query_len=max(query_lens, default=0),
        max_seq_len=max(seq_lens, default=0))
