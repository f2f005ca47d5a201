"""Public entry points of kvlab.kernels: pick a backend, check arguments, launch.

``backend``:

* ``"auto"``: compiled Triton for CUDA tensors, the torch reference for CPU tensors;
* ``"triton"``: Triton (on CPU tensors it runs under the Triton interpreter, which
  ``kvlab.kernels`` switches on when no CUDA device exists);
* ``"torch"``: the plain-torch reference (``kvlab.kernels.reference``).

``paged_attention`` sends a batch to the split-KV decode kernels when it runs compiled on a GPU,
every query length is 1, and ``tiles.choose_num_splits`` asks for 2 or more splits (small batches
with long contexts); otherwise to the unified kernel.
"""

from __future__ import annotations

from types import ModuleType

import torch

from kvlab.kernels import reference
from kvlab.kernels.checks import (
    AttentionDims,
    check_attention_args,
    check_backend,
    check_lengths,
)
from kvlab.kernels.tiles import (
    AttentionTiles,
    attention_tiles,
    choose_num_splits,
    decode_tiles,
    interpreting,
    num_sms,
)

try:  # NOTE: kvlab.kernels sets TRITON_INTERPRET (when needed) before this import runs.
    from kvlab.kernels import cache_write, decode_attention, unified_attention
    TRITON_IMPORT_ERROR: Exception | None = None
except ImportError as exc:  # triton missing: the torch backend still works
    cache_write = decode_attention = unified_attention = None  # type: ignore[assignment]
    TRITON_IMPORT_ERROR = exc


def _use_triton(backend: str, device: torch.device) -> bool:
    check_backend(backend)
    if backend == "auto":
        return device.type == "cuda"
    return backend == "triton"


def triton_available(device: torch.device | str = "cpu") -> bool:
    """True when the Triton backend can run on tensors of ``device``.

    CPU tensors need the kernels to have been decorated under ``TRITON_INTERPRET=1``.
    """
    if TRITON_IMPORT_ERROR is not None:
        return False
    device = torch.device(device)
    kernel = unified_attention.unified_attention_kernel
    interpreted = type(kernel).__name__ == "InterpretedFunction"
    return interpreted or device.type == "cuda"


def _triton_modules(device: torch.device) -> tuple[ModuleType, ModuleType, ModuleType]:
    if TRITON_IMPORT_ERROR is not None:
        raise RuntimeError("backend='triton' needs the 'triton' package, which failed to import: "
                           f"{TRITON_IMPORT_ERROR}; install triton or use backend='torch'")
    if not triton_available(device):
        raise RuntimeError(f"Triton kernels cannot run on {device} tensors here: they were "
                           "compiled for the GPU. Move the tensors to CUDA, use backend='torch', "
                           "or set TRITON_INTERPRET=1 before importing kvlab.kernels (automatic "
                           "when CUDA is absent) to run them under the interpreter")
    return cache_write, unified_attention, decode_attention


def reshape_and_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                      value_cache: torch.Tensor, slot_mapping: torch.Tensor, *,
                      backend: str = "auto") -> None:
    """Write new keys/values into their slots of one layer's paged KV cache (in place).

    Mirrors: vllm/_custom_ops.py::reshape_and_cache_flash (Triton twin:
    vllm/v1/attention/ops/triton_reshape_and_cache_flash.py). Differs: no fp8 cache.

    Args:
        key: [num_tokens, num_kv_heads, head_dim].
        value: [num_tokens, num_kv_heads, head_dim].
        key_cache: [num_blocks, block_size, num_kv_heads, head_dim] (``kv_cache[layer][0]``).
        value_cache: [num_blocks, block_size, num_kv_heads, head_dim] (``kv_cache[layer][1]``).
        slot_mapping: [num_tokens] int64, ``block_id * block_size + offset``; ``-1`` = padding,
            skipped.
        backend: "auto" | "triton" | "torch".

    Raises:
        ValueError: unknown backend, or bad shapes/devices (see ``kvlab.kernels.checks``).
        TypeError: bad dtypes.
        RuntimeError: backend="triton" without a usable Triton.
    """
    if _use_triton(backend, key.device):
        ops, _, _ = _triton_modules(key.device)
        ops.reshape_and_cache_triton(key, value, key_cache, value_cache, slot_mapping)
    else:
        reference.reshape_and_cache_torch(key, value, key_cache, value_cache, slot_mapping)


def paged_attention(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                    block_table: torch.Tensor, seq_lens: torch.Tensor,
                    query_start_loc: torch.Tensor, *, scale: float,
                    sliding_window: int | None = None, out: torch.Tensor | None = None,
                    backend: str = "auto", max_query_len: int | None = None,
                    max_seq_len: int | None = None,
                    tiles: AttentionTiles | None = None) -> torch.Tensor:
    """Causal GQA attention of a packed varlen batch (prefill, chunked, decode) over a paged cache.

    Mirrors: vllm/v1/attention/ops/triton_unified_attention.py::unified_attention (as called by
    vllm/v1/attention/backends/triton_attn.py). Differs: no ALiBi, soft-cap, sinks, fp8 or cascade.

    Args:
        q: [num_tokens, num_q_heads, head_dim], every sequence's new tokens back to back.
        key_cache: [num_blocks, block_size, num_kv_heads, head_dim].
        value_cache: [num_blocks, block_size, num_kv_heads, head_dim].
        block_table: [num_seqs, max_num_blocks] int32 block ids.
        seq_lens: [num_seqs] int32 context lengths (tokens) including this step's new tokens.
        query_start_loc: [num_seqs + 1] int32 cumulative query lengths (tokens). Query token
            ``j`` of sequence ``i`` sits at ``seq_lens[i] - q_len_i + j`` and sees keys at
            positions ``<=`` it.
        scale: softmax scale (usually ``head_dim ** -0.5``).
        sliding_window: attend only the last ``sliding_window`` positions incl. itself (tokens).
        out: optional output buffer, [num_tokens, num_q_heads, head_dim] in q's dtype.
        backend: "auto" | "triton" | "torch".
        max_query_len: longest query (tokens); when both maxima are given the lengths are trusted
            and not read back (no GPU sync); otherwise they are read and checked.
        max_seq_len: longest context (tokens).
        tiles: override the unified kernel's launch tiles (tests, benchmarks).

    Returns:
        [num_tokens, num_q_heads, head_dim] in q's dtype (``out`` when given).

    Raises:
        ValueError: unknown backend, bad shapes/devices/lengths (see ``kvlab.kernels.checks``).
        TypeError: bad dtypes.
        RuntimeError: backend="triton" without a usable Triton.
    """
    if not _use_triton(backend, q.device):
        return reference.paged_attention_torch(q, key_cache, value_cache, block_table, seq_lens,
                                               query_start_loc, scale=scale,
                                               sliding_window=sliding_window, out=out)
    dims = check_attention_args(q, key_cache, value_cache, block_table, seq_lens, query_start_loc,
                                scale, sliding_window, out)
    if max_query_len is None or max_seq_len is None:
        max_query_len, max_seq_len = check_lengths(dims, seq_lens, query_start_loc)
    out = torch.empty_like(q) if out is None else out
    args = (q, key_cache, value_cache, block_table, seq_lens, query_start_loc, out)
    return _attention_triton(args, scale, sliding_window, dims, max_query_len, max_seq_len, tiles)


def _attention_triton(args: tuple, scale: float, sliding_window: int | None, dims: AttentionDims,
                      max_query_len: int, max_seq_len: int,
                      tiles: AttentionTiles | None) -> torch.Tensor:
    """Pick split-KV decode or the unified kernel for checked arguments and launch it."""
    q = args[0]
    _, unified, decode = _triton_modules(q.device)
    all_decode = max_query_len == 1 and dims.num_tokens == dims.num_seqs
    if tiles is None and all_decode and not interpreting(q.device):
        num_splits = choose_num_splits(dims.num_seqs, dims.num_kv_heads, max_seq_len,
                                       num_sms(q.device))
        if num_splits > 1:
            block_h, block_n = decode_tiles(q.device, dims.num_queries_per_kv)
            return decode.decode_attention_triton(
                *args, scale=scale, sliding_window=sliding_window, dims=dims,
                num_splits=num_splits, block_h=block_h, block_n=block_n)
    tiles = tiles or attention_tiles(q.device, dims.num_queries_per_kv, max_query_len,
                                     max_seq_len, q.element_size())
    return unified.unified_attention_triton(*args, scale=scale, sliding_window=sliding_window,
                                            dims=dims, max_query_len=max_query_len, tiles=tiles)


def paged_attention_decode(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_table: torch.Tensor, seq_lens: torch.Tensor,
                           query_start_loc: torch.Tensor, *, scale: float,
                           sliding_window: int | None = None, out: torch.Tensor | None = None,
                           backend: str = "auto", num_splits: int | None = None,
                           max_seq_len: int | None = None,
                           block_n: int | None = None) -> torch.Tensor:
    """Split-KV (flash-decoding) paged attention for a batch where every query length is 1.

    Same arguments as ``paged_attention``; ``q`` holds exactly one token per sequence. Stage 1
    splits each context into ``num_splits`` key ranges (grid seqs x kv_heads x splits) and writes
    partial outputs with their log-sum-exp; stage 2 merges them (grid seqs x q_heads).

    Mirrors: vllm/v1/attention/ops/triton_unified_attention.py (3D launch + reduce_segments).

    Args:
        num_splits: key ranges per sequence, 1..256; default ``tiles.choose_num_splits``.
        max_seq_len: longest context (tokens); when given the lengths are not read back.
        block_n: keys per loop iteration (power of two >= 16); default ``tiles.decode_tiles``.
        (others): as in ``paged_attention``.

    Returns:
        [num_seqs, num_q_heads, head_dim] in q's dtype (``out`` when given).

    Raises:
        ValueError: a query length other than 1, a bad ``num_splits``/``block_n``, or anything
            ``paged_attention`` rejects.
        TypeError: bad dtypes.
        RuntimeError: backend="triton" without a usable Triton.
    """
    check_backend(backend)
    dims = check_attention_args(q, key_cache, value_cache, block_table, seq_lens, query_start_loc,
                                scale, sliding_window, out)
    max_seq_len = _check_decode_options(dims, seq_lens, query_start_loc, num_splits, block_n,
                                        max_seq_len)
    if not _use_triton(backend, q.device):
        return reference.paged_attention_torch(q, key_cache, value_cache, block_table, seq_lens,
                                               query_start_loc, scale=scale,
                                               sliding_window=sliding_window, out=out)
    _, _, decode = _triton_modules(q.device)
    block_h, default_n = decode_tiles(q.device, dims.num_queries_per_kv)
    if num_splits is None:
        num_splits = choose_num_splits(dims.num_seqs, dims.num_kv_heads, max_seq_len,
                                       num_sms(q.device))
    out = torch.empty_like(q) if out is None else out
    return decode.decode_attention_triton(
        q, key_cache, value_cache, block_table, seq_lens, query_start_loc, out, scale=scale,
        sliding_window=sliding_window, dims=dims, num_splits=num_splits, block_h=block_h,
        block_n=block_n or default_n)


def _check_decode_options(dims: AttentionDims, seq_lens: torch.Tensor,
                          query_start_loc: torch.Tensor, num_splits: int | None,
                          block_n: int | None, max_seq_len: int | None) -> int:
    """Raise ValueError unless this is a decode batch with valid options; return max_seq_len."""
    if dims.num_tokens != dims.num_seqs:
        raise ValueError(f"decode needs one query token per sequence: q has {dims.num_tokens} "
                         f"tokens for {dims.num_seqs} sequences")
    if num_splits is not None and not (isinstance(num_splits, int) and 1 <= num_splits <= 256):
        raise ValueError(f"num_splits must be an int in [1, 256], got {num_splits!r}")
    if block_n is not None and (block_n < 16 or block_n & (block_n - 1)):
        raise ValueError(f"block_n must be a power of two >= 16, got {block_n}")
    if max_seq_len is None:
        max_query_len, max_seq_len = check_lengths(dims, seq_lens, query_start_loc)
        if dims.num_seqs and max_query_len != 1:
            raise ValueError("decode needs every query length to be 1 (query_start_loc steps of 1)")
    return max_seq_len
