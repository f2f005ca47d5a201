"""A fleet: one trace routed across N vLLM replicas, each with its own prefix cache.

Each replica is one vLLM pool of ``capacity_tokens`` (``LRUPrefixCache``, exact to kvlab.core)
on the sequence clock: the requests a replica receives run one after another in trace order.
The router decides, per request, which replica serves it:

================  ===========================================================================
``round-robin``   request i goes to replica i mod N
``random``        a uniformly random replica (``random.Random(seed)``, reproducible)
``session``       sticky: Mooncake has no session ids, but the turns of one conversation share
                  its first blocks; the session is the request's first block past the prefix
                  every request of the trace shares (the conversation trace's one-block system
                  prompt), and goes to replica ``key mod N`` of that block's key; a request
                  with no such block goes round-robin
``prefix-aware``  the replica holding the longest cached prefix of the request when it covers
                  more than half of the prompt's full blocks (ties to the least loaded, then
                  the lowest index), else the least loaded: the cache-aware rule of SGLang's
                  router (``cache_threshold`` 0.5) without its queue-length guard (no queues
                  on this clock); pure longest-prefix routing would send every request of the
                  conversation trace to one replica (they all share its first block)
``least-loaded``  the replica with the fewest prompt tokens routed so far, ties to the lowest
                  index (the sequence clock has no queues: load = work sent)
================  ===========================================================================

What the prefix-aware scorer sees: every replica's exact set of cached block hashes at the
moment the request arrives (what a KV-aware router rebuilds from each replica's KV events
with no lag: ``BlockStored`` / ``BlockRemoved``), at the replicas' block size; it scores the
number of leading full blocks of the prompt found there (no ``num_tokens - 1`` cap: a router
does not apply vLLM's lookup cap). It does not see queue lengths or running requests (none
on this clock) nor predict evictions.

Hits lost to routing: the hits of one pooled cache of ``N x capacity_tokens`` (the same
requests, one pool: nothing is ever on the wrong replica) minus the fleet's hits.

Examples:
    >>> from kvlab.traffic import prepare_blocks, read_mooncake_lines
    >>> b = prepare_blocks(read_mooncake_lines([
    ...     '{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    ...     '{"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": [3, 4]}',
    ...     '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [6, 7]}',
    ...     '{"timestamp": 3, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 5]}']),
    ...     512)
    >>> [replay_fleet(b, 2, r, 8 * 512).per_request_replica for r in ("round-robin",
    ...                                                                 "prefix-aware")]
    [[0, 1, 0, 1], [0, 1, 1, 0]]
    >>> [replay_fleet(b, 2, r, 8 * 512).hit_tokens for r in ("round-robin", "prefix-aware")]
    [0, 1024]
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kvlab.traffic.blocks import BlockedTraffic
from kvlab.traffic.lru import LRUPrefixCache
from kvlab.traffic.stack import lru_curve

__all__ = ["ROUTINGS", "FleetResult", "replay_fleet"]

ROUTINGS = ("round-robin", "random", "session", "prefix-aware", "least-loaded")
"""Routing policies ``replay_fleet`` accepts."""


@dataclass
class FleetResult:
    """One trace across a fleet.

    Attributes:
        routing: A name of ROUTINGS.
        num_replicas: Replicas (N).
        capacity_tokens: Pool of each replica (tokens).
        block_size: Block size (tokens).
        prompt_tokens: Prompt tokens of every request (tokens).
        per_request_replica: Replica of each request, trace order.
        per_request_hit_tokens: Hit of each request (tokens), trace order.
        replica_requests: Requests per replica.
        replica_prompt_tokens: Prompt tokens per replica (tokens).
        replica_hit_tokens: Hit tokens per replica (tokens).
        rejected: Requests larger than a replica's pool.
        pooled_hit_tokens: Hits of one pool of N x capacity_tokens (tokens).
        warmup_requests: prompt_tokens, hit_tokens and pooled_hit_tokens sum the requests from
            this index on (the replica lists count every request).
    """

    routing: str
    num_replicas: int
    capacity_tokens: int
    block_size: int
    prompt_tokens: int = 0
    per_request_replica: list[int] = field(default_factory=list, repr=False)
    per_request_hit_tokens: list[int] = field(default_factory=list, repr=False)
    replica_requests: list[int] = field(default_factory=list)
    replica_prompt_tokens: list[int] = field(default_factory=list)
    replica_hit_tokens: list[int] = field(default_factory=list)
    rejected: int = 0
    pooled_hit_tokens: int = 0
    warmup_requests: int = 0

    @property
    def hit_tokens(self) -> int:
        """Prompt tokens served from a replica's prefix cache (tokens), from warmup_requests."""
        return sum(self.per_request_hit_tokens[self.warmup_requests :])

    @property
    def hit_rate(self) -> float:
        """hit_tokens / prompt_tokens."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def load_imbalance(self) -> float:
        """Busiest replica's prompt tokens over the mean (1.0 = perfectly even)."""
        mean = sum(self.replica_prompt_tokens) / max(1, self.num_replicas)
        return max(self.replica_prompt_tokens) / mean if mean else 1.0

    @property
    def hits_lost_to_routing(self) -> int:
        """pooled_hit_tokens - hit_tokens (tokens)."""
        return self.pooled_hit_tokens - self.hit_tokens

    def to_dict(self) -> dict[str, Any]:
        """The JSON row of ``kvlab whatif --replicas``."""
        return {
            "cache": "vllm", "routing": self.routing, "replicas": self.num_replicas,
            "capacity_tokens": self.capacity_tokens, "block_size": self.block_size,
            "clock": "sequence", "hit_rate": self.hit_rate, "hit_tokens": self.hit_tokens,
            "prompt_tokens": self.prompt_tokens, "rejected": self.rejected,
            "pooled_hit_tokens": self.pooled_hit_tokens,
            "hits_lost_to_routing": self.hits_lost_to_routing,
            "load_imbalance": self.load_imbalance,
            "replica_requests": self.replica_requests,
            "replica_prompt_tokens": self.replica_prompt_tokens,
            "replica_hit_tokens": self.replica_hit_tokens,
            "warmup_requests": self.warmup_requests,
        }  # fmt: skip


def _cached_prefix(sim: LRUPrefixCache, keys: list[int]) -> int:
    cached, n = sim.cached, 0
    for k in keys:
        if k not in cached:
            break
        n += 1
    return n


def _common_prefix(all_keys: list[list[int]]) -> int:
    """Blocks every request starts with (the trace-wide shared prefix)."""
    if not all_keys:
        return 0
    first, n = all_keys[0], len(all_keys[0])
    for keys in all_keys[1:]:
        m = 0
        while m < n and m < len(keys) and keys[m] == first[m]:
            m += 1
        n = m
    return n


def replay_fleet(blocked: BlockedTraffic, num_replicas: int, routing: str, capacity_tokens: int,
                 seed: int = 0, max_model_len: int | None = None,
                 warmup_requests: int = 0) -> FleetResult:  # fmt: skip
    """Route ``blocked`` across ``num_replicas`` vLLM caches (see the module docstring).

    Args:
        blocked: The traffic at one block size.
        num_replicas: N >= 1.
        routing: One of ROUTINGS.
        capacity_tokens: Each replica's pool (tokens), at least one block.
        seed: Seed of the ``random`` routing.
        max_model_len: Prompts longer than this (tokens) are refused (None = no limit).
        warmup_requests: Requests before this index count in no sum (still replayed).

    Returns:
        The FleetResult.

    Raises:
        ValueError: Unknown routing, N < 1, or a capacity below one block.
    """
    if routing not in ROUTINGS:
        raise ValueError(f"unknown routing {routing!r}; allowed: {', '.join(ROUTINGS)}")
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ValueError(f"replicas must be an int >= 1, got {num_replicas!r}")
    bs = blocked.block_size
    if capacity_tokens < bs:
        raise ValueError(f"capacity {capacity_tokens} tokens is below one block ({bs} tokens)")
    n = num_replicas
    sims = [LRUPrefixCache(capacity_tokens // bs, bs, max_model_len=max_model_len)
            for _ in range(n)]  # fmt: skip
    res = FleetResult(routing, n, capacity_tokens, bs, replica_requests=[0] * n,
                      replica_prompt_tokens=[0] * n, replica_hit_tokens=[0] * n)  # fmt: skip
    rng = random.Random(seed)
    load = res.replica_prompt_tokens
    common = _common_prefix(blocked.keys)
    for i, (req, keys) in enumerate(zip(blocked.requests, blocked.keys, strict=True)):
        if routing == "round-robin":
            r = i % n
        elif routing == "random":
            r = rng.randrange(n)
        elif routing == "session":
            r = keys[common] % n if len(keys) > common else i % n
        elif routing == "least-loaded":
            r = min(range(n), key=lambda j: (load[j], j))
        else:
            best = min(range(n), key=lambda j: (-_cached_prefix(sims[j], keys), load[j], j))
            if _cached_prefix(sims[best], keys) * 2 > len(keys):
                r = best
            else:
                r = min(range(n), key=lambda j: (load[j], j))
        hit = sims[r].serve(keys, req.num_prompt_tokens)
        if hit < 0:
            res.rejected += 1
            hit = 0
        res.per_request_replica.append(r)
        res.per_request_hit_tokens.append(hit)
        res.replica_requests[r] += 1
        load[r] += req.num_prompt_tokens
        res.replica_hit_tokens[r] += hit
    w = res.warmup_requests = warmup_requests
    res.prompt_tokens = sum(r.num_prompt_tokens for r in blocked.requests[w:])
    pooled = lru_curve(blocked, [n * (capacity_tokens // bs) * bs], max_model_len=max_model_len,
                       warmup_requests=w)  # fmt: skip
    res.pooled_hit_tokens = pooled[0].hit_tokens
    return res
