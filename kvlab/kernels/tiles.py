"""Tile sizes and launch heuristics for the kvlab Triton kernels.

Two regimes pull the tile sizes apart:

* **GPU (compiled Triton):** tiles sized for registers and shared memory: 16-64 query rows, 32-64
  keys per loop iteration, 4 warps. ``tl.dot`` needs every dimension >= 16.
* **Triton interpreter (CPU):** every ``tl`` op costs ~60-150 us regardless of its size, so cost
  grows with programs x loop iterations, not with bytes. Tiles are made as large as the problem
  (up to 512 query rows and 256 keys) so a step runs in a handful of programs and iterations.

All functions here are pure Python on sizes; they never touch tensor data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

# Split-KV decode heuristic (see ``choose_num_splits``).
MIN_KEYS_PER_SPLIT = 256  # tokens: below this a split's fixed cost outweighs the extra parallelism
MAX_NUM_SPLITS = 64  # splits: bound on the partial-result buffer and the reduction width
PROGRAMS_PER_SM = 4  # target resident programs per SM when sizing the split count


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def interpreting(device: torch.device) -> bool:
    """True when Triton kernels on ``device`` run under the Triton interpreter (CPU tensors or
    ``TRITON_INTERPRET=1``)."""
    return device.type != "cuda" or os.environ.get("TRITON_INTERPRET", "0") == "1"


@dataclass(frozen=True)
class AttentionTiles:
    """Launch parameters of the unified paged-attention kernel.

    Attributes:
        block_m: rows of a Q tile (``block_q`` tokens x ``num_queries_per_kv`` heads, padded).
        block_q: query tokens per program (tokens).
        block_n: keys per inner-loop iteration (tokens).
        num_warps: warps per program (GPU only).
        num_stages: software-pipelining stages (GPU only).
    """

    block_m: int
    block_q: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2


def attention_tiles(device: torch.device, num_queries_per_kv: int, max_query_len: int,
                    max_seq_len: int, element_size: int = 2) -> AttentionTiles:
    """Pick tiles for ``unified_attention_triton``.

    A program owns ``block_q`` consecutive query tokens of one sequence and all
    ``num_queries_per_kv`` query heads that share one KV head, so each K/V tile it loads serves
    ``block_m = block_q * num_queries_per_kv`` rows (rounded up to a power of two >= 16).

    Args:
        device: where the tensors live.
        num_queries_per_kv: GQA group size.
        max_query_len: longest query in the batch (tokens).
        max_seq_len: longest context in the batch (tokens).
        element_size: bytes per element of q and the caches; fp32 (4) gets half-size GPU tiles
            (shared memory: a 64 x 64 fp32 tile pair at head_dim 128 needs ~115 KB).
    """
    group = num_queries_per_kv
    if interpreting(device):
        block_m = max(16, next_power_of_2(group), min(512, next_power_of_2(max_query_len * group)))
        block_n = max(16, min(256, next_power_of_2(max_seq_len)))
        return AttentionTiles(block_m, block_m // group, block_n, 1, 1)
    wide = element_size <= 2
    rows = 16 if max_query_len == 1 else (64 if wide else 32)
    block_m = max(rows, next_power_of_2(group))
    block_n = 64 if wide and max_query_len > 1 else 32
    return AttentionTiles(block_m, block_m // group, block_n, 4, 2)


def decode_tiles(device: torch.device, num_queries_per_kv: int) -> tuple[int, int]:
    """Return ``(block_h, block_n)`` for the split-KV decode kernel.

    ``block_h`` holds one KV head's query heads (padded to a power of two >= 16 for ``tl.dot``);
    ``block_n`` is keys per inner-loop iteration (tokens).
    """
    block_h = max(16, next_power_of_2(num_queries_per_kv))
    return block_h, (256 if interpreting(device) else 64)


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of ``device`` (1 for the interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def choose_num_splits(num_seqs: int, num_kv_heads: int, max_seq_len: int, sm_count: int) -> int:
    """Split count for split-KV (flash-decoding) decode.

    Heuristic: without splitting, decode launches ``num_seqs * num_kv_heads`` programs, each walking
    a whole context. Split each context into ``num_splits`` ranges so the launch reaches about
    ``PROGRAMS_PER_SM * sm_count`` programs, but keep every split at least ``MIN_KEYS_PER_SPLIT``
    keys long and the count at most ``MAX_NUM_SPLITS``::

        num_splits = clamp(ceil(PROGRAMS_PER_SM * sm_count / (num_seqs * num_kv_heads)),
                           1, min(MAX_NUM_SPLITS, ceil(max_seq_len / MIN_KEYS_PER_SPLIT)))

    For example, H100 (132 SMs), 8 sequences x 8 KV heads x 8192 tokens -> ceil(528 / 64) = 9 splits.

    Args:
        num_seqs: sequences in the decode batch.
        num_kv_heads: KV heads.
        max_seq_len: longest context (tokens).
        sm_count: streaming multiprocessors of the device.
    """
    base = max(1, num_seqs * num_kv_heads)
    wanted = -(-PROGRAMS_PER_SM * sm_count // base)
    cap = min(MAX_NUM_SPLITS, max(1, -(-max_seq_len // MIN_KEYS_PER_SPLIT)))
    return max(1, min(wanted, cap))


def cache_write_tiles(device: torch.device, num_tokens: int, num_hd: int) -> tuple[int, int]:
    """Return ``(block_t, block_hd)`` for ``reshape_and_cache_kernel``.

    Args:
        device: where the tensors live.
        num_tokens: tokens to write.
        num_hd: ``num_kv_heads * head_dim`` (elements per token).
    """
    if interpreting(device):
        return min(512, next_power_of_2(num_tokens)), min(4096, next_power_of_2(num_hd))
    return 4, min(1024, next_power_of_2(num_hd))
