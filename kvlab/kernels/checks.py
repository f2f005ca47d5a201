"""Argument checks shared by every backend of kvlab.kernels.

Both the plain-torch reference and the Triton wrappers call these before touching memory, so a bad
argument raises the same clear error whichever backend runs, and nothing is written.

NOTE: the *shape/dtype/device* checks never read tensor values (no GPU sync). The *length* checks in
``check_lengths`` read ``seq_lens`` and ``query_start_loc`` (a sync on CUDA); the attention wrappers
run them only when the caller did not pass ``max_query_len``/``max_seq_len`` (which need that read
anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

BACKENDS = ("auto", "triton", "torch")
HALF_AND_FLOAT = (torch.float16, torch.bfloat16, torch.float32)
INDEX_DTYPES = (torch.int32, torch.int64)


@dataclass(frozen=True)
class AttentionDims:
    """Sizes read off the attention arguments.

    Attributes:
        num_tokens: query tokens packed in ``q`` (tokens).
        num_q_heads: query heads.
        num_kv_heads: key/value heads.
        head_dim: elements per head.
        num_blocks: physical KV-cache blocks (blocks).
        block_size: tokens per block (tokens).
        num_seqs: sequences in the batch.
        max_num_blocks: columns of ``block_table`` (blocks).
    """

    num_tokens: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    num_blocks: int
    block_size: int
    num_seqs: int
    max_num_blocks: int

    @property
    def num_queries_per_kv(self) -> int:
        """GQA group size: query heads sharing one KV head."""
        return self.num_q_heads // self.num_kv_heads


def check_backend(backend: str) -> str:
    """Return ``backend`` if known; raise ValueError naming the allowed ones otherwise."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(map(repr, BACKENDS))}")
    return backend


def _require(cond: bool, msg: str, exc: type[Exception] = ValueError) -> None:
    if not cond:
        raise exc(msg)


def _check_tensor(name: str, t: object, ndim: int, dtypes: tuple[torch.dtype, ...]) -> None:
    _require(isinstance(t, torch.Tensor), f"{name} must be a torch.Tensor, got {type(t).__name__}",
             TypeError)
    _require(t.dim() == ndim, f"{name} must have {ndim} dims, got shape {tuple(t.shape)}")
    _require(t.dtype in dtypes,
             f"{name} dtype {t.dtype} not supported; allowed: {', '.join(map(str, dtypes))}",
             TypeError)


def _check_same_device(**tensors: torch.Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{n}={d}" for n, d in devices.items())
        raise ValueError(f"all tensors must be on one device, got {listing}")


def _check_cache_pair(key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
    _check_tensor("key_cache", key_cache, 4, HALF_AND_FLOAT)
    _check_tensor("value_cache", value_cache, 4, HALF_AND_FLOAT)
    _require(key_cache.shape == value_cache.shape,
             f"key_cache {tuple(key_cache.shape)} and value_cache {tuple(value_cache.shape)} "
             "must match "
             "([num_blocks, block_size, num_kv_heads, head_dim])")
    _require(key_cache.dtype == value_cache.dtype,
             f"key_cache dtype {key_cache.dtype} != value_cache dtype {value_cache.dtype}",
             TypeError)
    _require(key_cache.stride(-1) == 1 and value_cache.stride(-1) == 1,
             "key_cache/value_cache must be contiguous in head_dim (stride(-1) == 1)")


def check_cache_write_args(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                           value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Check the arguments of ``reshape_and_cache``.

    Raises:
        TypeError: a non-tensor, or a dtype outside fp16/bf16/fp32 (data) or int32/int64 (slots), or
            key/value dtype different from the cache dtype (kvlab stores no fp8 cache).
        ValueError: wrong rank, mismatched shapes, or tensors on different devices.
    """
    _check_tensor("key", key, 3, HALF_AND_FLOAT)
    _check_tensor("value", value, 3, HALF_AND_FLOAT)
    _check_cache_pair(key_cache, value_cache)
    _check_tensor("slot_mapping", slot_mapping, 1, INDEX_DTYPES)
    _require(key.shape == value.shape,
             f"key {tuple(key.shape)} and value {tuple(value.shape)} must match "
             "([num_tokens, num_kv_heads, head_dim])")
    _require(tuple(key.shape[1:]) == tuple(key_cache.shape[2:]),
             f"key heads/head_dim {tuple(key.shape[1:])} != cache's {tuple(key_cache.shape[2:])}")
    _require(slot_mapping.shape[0] == key.shape[0],
             f"slot_mapping has {slot_mapping.shape[0]} entries but key has {key.shape[0]} tokens")
    _require(key.dtype == key_cache.dtype and value.dtype == value_cache.dtype,
             f"key/value dtype {key.dtype}/{value.dtype} must equal cache dtype {key_cache.dtype}",
             TypeError)
    _check_same_device(key=key, value=value, key_cache=key_cache, value_cache=value_cache,
                       slot_mapping=slot_mapping)


def check_attention_args(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                         block_table: torch.Tensor, seq_lens: torch.Tensor,
                         query_start_loc: torch.Tensor, scale: float,
                         sliding_window: int | None, out: torch.Tensor | None) -> AttentionDims:
    """Check the arguments of ``paged_attention`` and return the sizes they imply.

    Raises:
        TypeError: a non-tensor, an unsupported dtype, q dtype != cache dtype, or
            out dtype != q dtype.
        ValueError: wrong rank or shape, num_q_heads not a multiple of num_kv_heads, a bad
            ``scale``/``sliding_window``, or tensors on different devices.
    """
    _check_tensor("q", q, 3, HALF_AND_FLOAT)
    _check_cache_pair(key_cache, value_cache)
    _check_tensor("block_table", block_table, 2, INDEX_DTYPES)
    _check_tensor("seq_lens", seq_lens, 1, INDEX_DTYPES)
    _check_tensor("query_start_loc", query_start_loc, 1, INDEX_DTYPES)
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    num_tokens, num_q_heads, q_head_dim = q.shape
    num_seqs = seq_lens.shape[0]
    _require(q_head_dim == head_dim, f"q head_dim {q_head_dim} != cache head_dim {head_dim}")
    _require(num_kv_heads > 0 and num_q_heads % num_kv_heads == 0,
             f"num_q_heads {num_q_heads} must be a multiple of num_kv_heads {num_kv_heads} (GQA)")
    _require(q.dtype == key_cache.dtype, f"q dtype {q.dtype} != cache dtype {key_cache.dtype}",
             TypeError)
    _require(q.stride(-1) == 1, "q must be contiguous in head_dim (stride(-1) == 1)")
    _require(block_table.shape[0] == num_seqs,
             f"block_table has {block_table.shape[0]} rows but seq_lens has {num_seqs} sequences")
    _require(query_start_loc.shape[0] == num_seqs + 1,
             f"query_start_loc must have num_seqs + 1 = {num_seqs + 1} entries, "
             f"got {query_start_loc.shape[0]}")
    _require(isinstance(scale, (int, float)) and scale > 0,
             f"scale must be a positive float, got {scale!r}")
    _require(sliding_window is None or (isinstance(sliding_window, int) and sliding_window > 0),
             f"sliding_window must be None or a positive int (tokens), got {sliding_window!r}")
    if out is not None:
        _require(isinstance(out, torch.Tensor), "out must be a torch.Tensor or None", TypeError)
        _require(out.shape == q.shape, f"out shape {tuple(out.shape)} != q shape {tuple(q.shape)}")
        _require(out.dtype == q.dtype, f"out dtype {out.dtype} != q dtype {q.dtype}", TypeError)
        _require(out.stride(-1) == 1, "out must be contiguous in head_dim (stride(-1) == 1)")
        _check_same_device(q=q, out=out)
    _check_same_device(q=q, key_cache=key_cache, value_cache=value_cache, block_table=block_table,
                       seq_lens=seq_lens, query_start_loc=query_start_loc)
    return AttentionDims(num_tokens, num_q_heads, num_kv_heads, head_dim, num_blocks, block_size,
                         num_seqs, block_table.shape[1])


def check_lengths(dims: AttentionDims, seq_lens: torch.Tensor,
                  query_start_loc: torch.Tensor) -> tuple[int, int]:
    """Check the per-sequence lengths and return ``(max_query_len, max_seq_len)`` (tokens).

    Reads ``seq_lens`` and ``query_start_loc`` (a device sync on CUDA).

    Raises:
        ValueError: query_start_loc not starting at 0, decreasing, or not ending at num_tokens; a
            sequence whose seq_len is smaller than its query length; or a seq_len beyond what its
            block_table row can address (max_num_blocks * block_size tokens).
    """
    qsl = query_start_loc.detach().to("cpu", torch.int64)
    lens = seq_lens.detach().to("cpu", torch.int64)
    q_lens = qsl[1:] - qsl[:-1]
    _require(int(qsl[0]) == 0, f"query_start_loc[0] must be 0, got {int(qsl[0])}")
    _require(bool((q_lens >= 0).all()),
             f"query_start_loc must be non-decreasing, got {qsl.tolist()}")
    _require(int(qsl[-1]) == dims.num_tokens,
             f"query_start_loc[-1] = {int(qsl[-1])} must equal q's num_tokens {dims.num_tokens}")
    bad = torch.nonzero(lens < q_lens).flatten().tolist()
    _require(not bad, f"seq_lens must include the new tokens (seq_len >= query len); "
             f"violated by sequences {bad}")
    capacity = dims.max_num_blocks * dims.block_size
    _require(bool((lens <= capacity).all()),
             f"seq_lens up to {int(lens.max())} tokens exceed the block_table capacity "
             f"{capacity} = {dims.max_num_blocks} blocks * {dims.block_size} tokens")
    max_query_len = int(q_lens.max()) if dims.num_seqs else 0
    max_seq_len = int(lens.max()) if dims.num_seqs else 0
    return max_query_len, max_seq_len
