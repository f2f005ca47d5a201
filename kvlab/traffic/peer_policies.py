"""Other eviction policies (FIFO, S3-FIFO, SIEVE, ARC ...) from libCacheSim, on prefix traffic.

kvlab writes no eviction policy of its own beside the systems it mirrors: for "what would
S3-FIFO do on my trace" it drives libCacheSim's caches (its Python bindings, ``pip install
kvlab[policies]``; libCacheSim, Yang et al., maintained by the cacheMon group) with the trace's
blocks, one object of size 1 per full block (its ``key``), a cache of ``capacity //
block_size`` objects.

The prefix semantics, per request in trace order:

1. a request needing more blocks than the pool has is refused (as vLLM refuses it);
2. lookup: its first ``(num_tokens - 1) // block_size`` blocks are looked up in prompt order
   without touching the policy's state (``find(..., update_cache=False)``); the hit is the
   leading run found (a prefix cache can only use a cached *prefix*);
3. then every full block is requested (``get``: a hit updates the policy, a miss admits it),
   last block first, the order in which vLLM frees a request's blocks, so block 0 is the most
   recent; the partial last block is one object of its own that no later request asks for.

What differs from a paged engine: libCacheSim evicts per object as objects come in, so the
request's own blocks are not pinned while it runs, and admission is the policy's (S3-FIFO's
small queue, ARC's ghosts). With ``"lru"`` this matches vLLM's LRU except where a request
evicts its own earlier blocks (pools barely larger than one request); the benchmark compares
them side by side (``benchmarks/bench_traffic.py``).

Examples:
    >>> from kvlab.traffic import prepare_blocks, read_mooncake_lines
    >>> b = prepare_blocks(read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    ...     '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 5]}']),
    ...     512)
    >>> replay_policy(b, "s3fifo", 100 * 512).per_request_hit_tokens
    [0, 1024]
"""

from __future__ import annotations

from typing import Any

from kvlab.traffic.blocks import BlockedTraffic
from kvlab.traffic.replay import ReplayResult

__all__ = ["POLICIES", "replay_policy"]

POLICIES = {"fifo": "FIFO", "lru": "LRU", "s3fifo": "S3FIFO", "sieve": "Sieve", "arc": "ARC",
            "clock": "Clock", "lirs": "LIRS", "twoq": "TwoQ", "lfu": "LFU"}  # fmt: skip
"""kvlab's name -> libCacheSim's cache class."""


def replay_policy(blocked: BlockedTraffic, policy: str, capacity_tokens: int,
                  max_model_len: int | None = None) -> ReplayResult:  # fmt: skip
    """Replay ``blocked`` through libCacheSim's ``policy`` (see the module docstring).

    Args:
        blocked: The traffic at one block size.
        policy: A key of POLICIES.
        capacity_tokens: Pool size (tokens), at least one block.
        max_model_len: Prompts longer than this (tokens) are refused (None = no limit).

    Returns:
        A ReplayResult whose ``cache`` is ``policy``; its evicted_blocks is None (not
        counted: libCacheSim's composite policies such as S3-FIFO do not report their
        objects).

    Raises:
        ValueError: Unknown policy or a capacity below one block.
        ImportError: Without libcachesim, naming the extra that installs it.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")
    bs = blocked.block_size
    if capacity_tokens < bs:
        raise ValueError(f"capacity {capacity_tokens} tokens is below one block ({bs} tokens)")
    try:
        import libcachesim as lcs
    except ImportError:
        raise ImportError("libCacheSim's policies need libcachesim: pip install "
                          "'kvlab[policies]'") from None  # fmt: skip
    num_blocks = capacity_tokens // bs
    cache = _make(lcs, POLICIES[policy], num_blocks)
    request = lcs.Request
    res = ReplayResult(policy, capacity_tokens, bs, "sequence", evicted_blocks=None)
    res.prompt_tokens = blocked.num_prompt_tokens
    tail = -1  # NOTE: partial last blocks: negative ids, one per request, never asked again
    for keys, req in zip(blocked.keys, blocked.requests, strict=True):
        n = req.num_prompt_tokens
        if -(-n // bs) > num_blocks or n > (max_model_len or n):
            res.rejected += 1
            res.per_request_hit_tokens.append(0)
            continue
        hit = 0
        for k in keys[: (n - 1) // bs]:
            if cache.find(request(obj_id=k, obj_size=1), False) is None:
                break
            hit += 1
        objs = list(keys)
        if n % bs:
            objs.append(tail)
            tail -= 1
        for k in reversed(objs):
            cache.get(request(obj_id=k + (1 << 40) if k < 0 else k, obj_size=1))
        res.per_request_hit_tokens.append(hit * bs)
    res.hit_tokens = sum(res.per_request_hit_tokens)
    return res


def _make(lcs: Any, name: str, num_blocks: int) -> Any:
    cls = getattr(lcs, name)
    if name == "S3FIFO" and num_blocks < 10:
        # NOTE: its small queue (10 %) must hold at least one object
        return cls(cache_size=num_blocks, small_size_ratio=1 / num_blocks)
    return cls(cache_size=num_blocks)
