"""Start-up and admission checks of kvlab's engine: nothing that can never run gets in.

Mirrors the idea of vllm/v1/core/kv_cache_utils.py::check_enough_kv_cache_memory and
estimate_max_model_len, counted in blocks instead of bytes (kvlab's pool size is given in
blocks): at start-up the pool must hold one request of ``max_model_len`` tokens, and when the
user did not choose ``max_model_len`` the longest one that fits is used. With that, every
admitted prompt (at most ``max_model_len - 1`` tokens, as vLLM's input processor: one output
token must fit) can run once it is alone in the pool, so the engine never waits for blocks that
cannot come.

Examples:
    >>> from kvlab.core.kv_cache_interface import FullAttentionSpec
    >>> spec = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=1, dtype="float32")
    >>> blocks_for_max_model_len([spec], 100, 512)           # cdiv(100, 16)
    7
    >>> fit_max_model_len([spec], usable_blocks=63, limit=4096, max_num_batched_tokens=512)
    1008
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from kvlab.core.config import VllmConfig
from kvlab.core.dtypes import cdiv
from kvlab.core.kv_cache_interface import KVCacheSpec

__all__ = [
    "blocks_for_max_model_len",
    "check_positive_int",
    "check_prompt_token_ids",
    "fit_max_model_len",
    "pool_too_small_message",
    "prompt_too_long_message",
    "resolve_max_model_len",
    "stall_message",
]


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` if it is an int >= ``minimum`` (bool excluded).

    Raises:
        ValueError: Anything else (the message names ``name`` and the allowed range).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def blocks_for_max_model_len(specs: Sequence[KVCacheSpec], max_model_len: int,
                             max_num_batched_tokens: int) -> int:
    """Blocks one request of ``max_model_len`` tokens can hold at once, summed over the groups.

    Mirrors: the per-group ``cdiv(spec.max_memory_usage_bytes(...), page_size)`` of vLLM's
    ``_max_memory_usage_bytes_from_groups`` (a sliding window caps its group's share).

    Args:
        specs: One KVCacheSpec per KV-cache group.
        max_model_len: Longest prompt + output (tokens).
        max_num_batched_tokens: Token budget of one step (tokens; sliding windows read it).

    Returns:
        The number of blocks (blocks).
    """
    cfg = VllmConfig(max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens,
                     block_size=specs[0].block_size)
    return sum(cdiv(s.max_memory_usage_bytes(cfg), s.page_size_bytes) for s in specs)


def fit_max_model_len(specs: Sequence[KVCacheSpec], usable_blocks: int, limit: int,
                      max_num_batched_tokens: int) -> int:
    """Longest max_model_len (<= ``limit``) whose one request fits ``usable_blocks`` (tokens).

    Mirrors: vllm/v1/core/kv_cache_utils.py::estimate_max_model_len (binary search), in blocks.

    Returns:
        The length in tokens, 0 when not even one token fits.
    """
    def fits(n: int) -> bool:
        return blocks_for_max_model_len(specs, n, max_num_batched_tokens) <= usable_blocks

    if not fits(1):
        return 0
    left, right, best = 1, limit, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            best, left = mid, mid + 1
        else:
            right = mid - 1
    return best


def pool_too_small_message(needed: int, max_model_len: int, num_gpu_blocks: int,
                           fitting_len: int) -> str:
    """vLLM-style refusal: ``needs N blocks for max_model_len M, the pool has K``."""
    usable = num_gpu_blocks - 1
    hint = (f"lower max_model_len to <= {fitting_len} or raise num_gpu_blocks to >= {needed + 1}"
            if fitting_len > 0 else f"raise num_gpu_blocks to >= {needed + 1}")
    return (f"the KV cache cannot hold one request: it needs {needed} blocks for max_model_len "
            f"{max_model_len}, the pool has {usable} (num_gpu_blocks={num_gpu_blocks}, one is the "
            f"null block); {hint}")


def prompt_too_long_message(num_tokens: int, max_model_len: int, num_gpu_blocks: int,
                            block_size: int) -> str:
    """Why a prompt of ``num_tokens >= max_model_len`` is refused at add_request.

    Mirrors: vllm/v1/engine/input_processor.py (``_validate_prompt_len``): a generation prompt
    must leave room for at least one output token, so it holds at most max_model_len - 1
    tokens. (A prompt of exactly max_model_len would also stall: the scheduler computes at
    most max_model_len - 1 tokens of a running request.)
    """
    allowed = (f"allowed 1..{max_model_len - 1} prompt tokens" if max_model_len > 1 else
               "no prompt fits: max_model_len 1 leaves no room for an output token")
    return (f"the prompt has {num_tokens} tokens; with at least 1 output token that is more than "
            f"max_model_len {max_model_len} ({allowed}, as in vLLM; the pool of {num_gpu_blocks} "
            f"blocks of {block_size} tokens caps max_model_len): shorten the prompt or give a "
            "larger pool")


def resolve_max_model_len(specs: Sequence[KVCacheSpec], num_gpu_blocks: int,
                          requested: int | None, context: int, max_num_batched_tokens: int) -> int:
    """The engine's max_model_len: checked against the pool, or derived from it (tokens).

    Mirrors: vLLM's start-up check_enough_kv_cache_memory and its auto-fit of max_model_len
    (estimate_max_model_len), counted in blocks.

    Args:
        specs: One KVCacheSpec per KV-cache group.
        num_gpu_blocks: Blocks in the pool, null block included (blocks).
        requested: The user's max_model_len, or None to derive one.
        context: The model's max_position_embeddings (tokens).
        max_num_batched_tokens: Token budget of one step (tokens).

    Returns:
        ``requested`` if the pool holds one such request; without one, the longest length
        the pool holds, at most ``min(context, 4096)``.

    Raises:
        ValueError: ``requested`` exceeds ``context``, or the pool cannot hold one request of
            ``requested`` tokens (or, when deriving, of one token).
    """
    usable = num_gpu_blocks - 1
    if requested is not None and requested > context:
        raise ValueError(f"max_model_len {requested} exceeds the model's context length "
                         f"(max_position_embeddings {context}): allowed 1..{context}")
    limit = requested if requested is not None else min(context, 4096)
    fitting = fit_max_model_len(specs, usable, limit, max_num_batched_tokens)
    if requested is None:
        if fitting > 0:
            return fitting
        limit = 1  # not even one token fits: say what the smallest request needs
    needed = blocks_for_max_model_len(specs, limit, max_num_batched_tokens)
    if needed > usable:
        raise ValueError(pool_too_small_message(needed, limit, num_gpu_blocks, fitting))
    return limit


def stall_message(request_id: str, num_tokens: int, block_size: int, num_free_blocks: int,
                  num_waiting: int, token_budget: int, aborted: list[str]) -> str:
    """Why a step scheduled nothing while requests wait and none runs (the engine's guard)."""
    return (f"the scheduler scheduled nothing while {num_waiting} request(s) wait and none runs: "
            f"{request_id!r} ({num_tokens} tokens, {-(-num_tokens // block_size)} blocks of "
            f"{block_size}) cannot be admitted with {num_free_blocks} free blocks "
            f"(max_num_batched_tokens {token_budget}); aborted {aborted}")


def check_prompt_token_ids(prompt: Any, vocab_size: int) -> list[int]:
    """The prompt's token ids as plain ints, each checked against the vocabulary.

    Args:
        prompt: A sequence of token ids (ints, numpy ints included).
        vocab_size: Rows of the model's embedding (tokens).

    Returns:
        A new list of ints.

    Raises:
        TypeError: ``prompt`` is not a sequence of ints (None, a float, a str id, a bool ...).
        ValueError: An id outside ``0..vocab_size - 1``.
    """
    if prompt is None or isinstance(prompt, (bytes, dict, set)) or not hasattr(prompt, "__iter__"):
        hint = (" (one token-id prompt goes in a list of its own: generate([[1, 2, 3]]))"
                if isinstance(prompt, numbers.Integral) else "")
        raise TypeError(f"a prompt must be a str or a sequence of int token ids, got "
                        f"{type(prompt).__name__}{hint}")
    ids = list(prompt)
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            raise TypeError(f"prompt token id {i} must be an int in 0..{vocab_size - 1}, got "
                            f"{t!r} ({type(t).__name__})")
        if not 0 <= t < vocab_size:
            raise ValueError(f"prompt token id {i} is {int(t)}, outside the vocabulary: allowed "
                             f"0..{vocab_size - 1}")
    return [int(t) for t in ids]
