"""kvlab.kernels: Triton paged KV-cache kernels (cache write, paged attention), torch references.

The kernels read and write the same paged cache that ``kvlab.core`` hands out block ids for
(vLLM's FlashAttention layout, per layer
``kv_cache[layer]: [2, num_blocks, block_size, num_kv_heads, head_dim]``,
``key_cache = kv_cache[layer][0]``, ``value_cache = kv_cache[layer][1]``).

Public API:
    reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, *, backend="auto")
    paged_attention(q, key_cache, value_cache, block_table, seq_lens, query_start_loc, *, scale,
                    sliding_window=None, out=None, backend="auto", max_query_len=None,
                    max_seq_len=None)
    paged_attention_decode(...): split-KV decode for batches of one token per sequence
    reshape_and_cache_torch, paged_attention_torch, gather_kv: the plain-torch references
    plan_paged_attention, write_kv, paged_attention_sdpa: the batched torch path (plan once per
        step, then one index_copy_ write and one SDPA call per layer); paged_attention_batched
        wraps them with paged_attention_torch's arguments
    random_paged_batch: a random paged attention batch (tests, benchmarks, notebooks)

Without CUDA, importing this package sets ``TRITON_INTERPRET=1`` (unless already set) *before* the
Triton kernels are defined, so ``backend="triton"`` runs them on CPU tensors under the interpreter.
Importing never fails without triton; the Triton backend then raises a RuntimeError.
"""

import os

import torch

if not torch.cuda.is_available():
    # NOTE: must precede the import of any module that decorates @triton.jit kernels.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from kvlab.kernels.api import (  # noqa: E402
    paged_attention,
    paged_attention_decode,
    reshape_and_cache,
    triton_available,
)
from kvlab.kernels.batch import PagedBatch, random_paged_batch  # noqa: E402
from kvlab.kernels.reference import (  # noqa: E402
    gather_kv,
    paged_attention_torch,
    reshape_and_cache_torch,
)
from kvlab.kernels.sdpa import (  # noqa: E402
    PagedAttentionPlan,
    paged_attention_batched,
    paged_attention_sdpa,
    plan_paged_attention,
    write_kv,
)
from kvlab.kernels.tiles import AttentionTiles, choose_num_splits  # noqa: E402

__all__ = [
    "AttentionTiles",
    "PagedAttentionPlan",
    "PagedBatch",
    "choose_num_splits",
    "gather_kv",
    "paged_attention",
    "paged_attention_batched",
    "paged_attention_decode",
    "paged_attention_sdpa",
    "paged_attention_torch",
    "plan_paged_attention",
    "random_paged_batch",
    "reshape_and_cache",
    "reshape_and_cache_torch",
    "triton_available",
    "write_kv",
]
