"""The ceiling at a capacity: Belady's eviction (farthest next use) under vLLM's rules.

The infinite cache says how much of a trace could ever hit; it ignores the pool size. Belady's
rule (evict what is needed again farthest in the future; Belady 1966) is the classic bound for
a pool of a given size. Here it runs under the same rules as vLLM on the sequence clock
(``kvlab.traffic.lru``), so the three numbers of a capacity split cleanly::

    infinite - belady  = hits lost to capacity (no policy of this size could keep them)
    belady   - vllm    = hits lost to LRU (vLLM's choice of what to evict)

Rules kept from vLLM: a request larger than the pool is refused; a lookup stops at the first
block not cached and at ``(num_tokens - 1) // block_size`` blocks; the request's missing blocks
(all but its hits) need free blocks while it runs, and its full blocks are cached when it ends.
The only change is the choice of victims: among cached blocks not hit by the running request,
the one whose key is looked up again latest (never = last of all); ties go to the deeper block
(a child is never needed before its parent, so a parent is never evicted before its child and
the cache stays a set of whole prefixes). Nothing is evicted before a request needs room, and
nothing is refused entry (a running request's blocks hold its KV cache; vLLM cannot bypass).

``bypass=True`` answers another question, the one kvcache-simulator's "optimal" answers: the
pool as a pure cache, the running request's blocks held outside it (a CPU-offload tier, or an
engine that never needs the cache's room to run). Nothing is refused; after the hits, each new
block (first to last) is admitted if there is room, or over the cached block needed latest
when that one is needed later than the new block; otherwise the request's remaining blocks are
not cached (bypassed). The lookup and its ``num_tokens - 1`` cap are vLLM's.

Belady's rule is provably optimal for caches of equal-sized independent items; with prefix
dependencies it is the standard bound but not a proof of optimality, so "hits lost to LRU" can
in principle be slightly negative. It reads the future: an analysis tool, not a policy.

Examples:
    >>> from kvlab.traffic.mooncake import read_mooncake_lines
    >>> from kvlab.traffic.blocks import prepare_blocks

    A's two blocks are wanted again by D; B's never. At 4 blocks C needs room: LRU evicts A's
    blocks (freed before B's), Belady evicts B's:

    >>> b = prepare_blocks(read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    ...     '{"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [2, 3]}',
    ...     '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [6, 7]}',
    ...     '{"timestamp": 3, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 5]}']),
    ...     512)
    >>> belady(b, 4 * 512).per_request_hit_tokens
    [0, 0, 0, 1024]
    >>> from kvlab.traffic.stack import lru_curve
    >>> lru_curve(b, [4 * 512])[0].per_request_hit_tokens
    [0, 0, 0, 0]
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from kvlab.traffic.blocks import BlockedTraffic

__all__ = ["BeladyResult", "belady", "next_uses"]

NEVER = 1 << 62
"""Next use of a key that is never looked up again."""


@dataclass
class BeladyResult:
    """Belady's eviction at one capacity.

    Attributes:
        num_blocks: Pool size (blocks).
        per_request_hit_tokens: Hit of each request (tokens); 0 for a refused one.
        rejected: Requests refused (larger than the pool).
        evicted_blocks: Cached blocks evicted (blocks).
    """

    num_blocks: int
    per_request_hit_tokens: list[int] = field(default_factory=list, repr=False)
    rejected: int = 0
    evicted_blocks: int = 0


def next_uses(blocked: BlockedTraffic, num_blocks: int | None = None,
              max_model_len: int | None = None) -> list[list[int]]:
    """Per request and full block: the index of the next request that looks its key up.

    A request looks up its first ``(num_tokens - 1) // block_size`` blocks (vLLM's cap); one
    larger than ``num_blocks`` (refused by that pool) or than ``max_model_len`` looks up
    nothing. NEVER when no later request looks the key up.
    """
    bs = blocked.block_size
    nxt: dict[int, int] = {}
    out: list[list[int]] = [[] for _ in blocked.keys]
    for i in range(len(blocked.keys) - 1, -1, -1):
        keys = blocked.keys[i]
        out[i] = [nxt.get(k, NEVER) for k in keys]
        n = blocked.requests[i].num_prompt_tokens
        if (num_blocks is not None and -(-n // bs) > num_blocks) or n > (max_model_len or n):
            continue
        for k in keys[: min((n - 1) // bs, len(keys))]:
            nxt[k] = i
    return out


def belady(blocked: BlockedTraffic, capacity_tokens: int, uses: list[list[int]] | None = None,
           stop_after: int | None = None, max_model_len: int | None = None,
           bypass: bool = False) -> BeladyResult:  # fmt: skip
    """Replay with Belady's eviction at one capacity (see the module docstring).

    Args:
        blocked: The traffic at one block size.
        capacity_tokens: Pool size (tokens), at least one block.
        uses: ``next_uses(blocked, capacity_tokens // block_size)`` (computed if None).
        stop_after: Replay only the first ``stop_after`` requests (None = all).
        max_model_len: Prompts longer than this (tokens) are refused (None = no limit).
        bypass: The pool as a pure cache with admission (see the module docstring).

    Returns:
        The BeladyResult.

    Raises:
        ValueError: If the capacity is below one block.
    """
    bs = blocked.block_size
    if capacity_tokens < bs:
        raise ValueError(f"capacity {capacity_tokens} tokens is below one block ({bs} tokens)")
    num_blocks = capacity_tokens // bs
    if uses is None:
        uses = next_uses(blocked, None if bypass else num_blocks, max_model_len)
    n_req = len(blocked) if stop_after is None else min(stop_after, len(blocked))
    res = BeladyResult(num_blocks)
    cached: dict[int, tuple[int, int]] = {}  # key -> (next use, depth): its heap entry
    heap: list[tuple[int, int, int]] = []  # (-next use, -depth, key): farthest, deepest first
    for i in range(n_req):
        keys, n = blocked.keys[i], blocked.requests[i].num_prompt_tokens
        nb = -(-n // bs)
        if (nb > num_blocks and not bypass) or n > (max_model_len or n):
            res.rejected += 1
            res.per_request_hit_tokens.append(0)
            continue
        limit = min((n - 1) // bs, len(keys))
        hit = 0
        while hit < limit and keys[hit] in cached:
            hit += 1
        if bypass:
            res.evicted_blocks += _admit(heap, cached, keys, uses[i], hit, num_blocks)
            res.per_request_hit_tokens.append(hit * bs)
            continue
        room = (num_blocks - len(cached)) - (nb - hit)
        if room < 0:
            _evict(heap, cached, set(keys[:hit]), -room)
            res.evicted_blocks += -room
        for j, (k, u) in enumerate(zip(keys, uses[i], strict=True)):
            if cached.get(k) != (u, j):
                cached[k] = (u, j)
                heapq.heappush(heap, (-u, -j, k))
        res.per_request_hit_tokens.append(hit * bs)
    return res


def _admit(heap: list, cached: dict, keys: list[int], uses: list[int], hit: int,
           num_blocks: int) -> int:  # fmt: skip
    """Bypass mode: refresh the hits, admit new blocks in order while each beats the victim
    (needed sooner than the cached block needed latest); returns the blocks evicted."""
    evicted = 0
    for j in range(len(keys)):
        k, u = keys[j], uses[j]
        if k in cached or j < hit:
            if cached.get(k) != (u, j):
                cached[k] = (u, j)
                heapq.heappush(heap, (-u, -j, k))
            continue
        if len(cached) >= num_blocks:
            victim = _peek(heap, cached, set(keys[:j]))
            if victim is None or victim[0] <= u:
                break  # NOTE: the rest of the request is not cached
            del cached[victim[1]]
            evicted += 1
        cached[k] = (u, j)
        heapq.heappush(heap, (-u, -j, k))
    return evicted


def _peek(heap: list, cached: dict, pinned: set[int]) -> tuple[int, int] | None:
    """(next use, key) of the cached block needed latest, not pinned; None if none."""
    held, found = [], None
    while heap:
        neg_u, neg_d, k = heap[0]
        if cached.get(k) != (-neg_u, -neg_d):
            heapq.heappop(heap)
            continue
        if k in pinned:
            held.append(heapq.heappop(heap))
            continue
        found = (-neg_u, k)
        break
    for entry in held:
        heapq.heappush(heap, entry)
    return found


def _evict(heap: list, cached: dict, pinned: set[int], count: int) -> None:
    """Evict ``count`` cached keys, farthest next use first, never one in ``pinned``."""
    held = []
    while count:
        neg_u, neg_d, k = heapq.heappop(heap)
        if cached.get(k) != (-neg_u, -neg_d):
            continue  # NOTE: a stale entry (the key was used since, or evicted)
        if k in pinned:
            held.append((neg_u, neg_d, k))
            continue
        del cached[k]
        count -= 1
    for entry in held:
        heapq.heappush(heap, entry)
