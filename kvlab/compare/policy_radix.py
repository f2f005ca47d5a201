"""The radix cache as a CachePolicy: SGLang's request life cycle around a RadixCache.

Mirrors the RadixCache calls of SGLang's scheduler (page size 1), per request::

    admit      prefix, last_node = match_prefix(tokens[:-1])     # hit <= num_tokens - 1
               inc_lock_ref(last_node)                            # the hit cannot be evicted
               alloc(num_tokens - hit) slots; if too few are free: evict(num_tokens - hit)
    prefill    cache_unfinished_req: insert(tokens, slots), free the duplicate slots,
    done       match again, move the lock to the new last node    # the prompt is now shared
    decode     alloc(1) (evict(1) first when the pool is empty)
    finish     cache_finished_req: insert(tokens with KV, slots), free duplicates, unlock
    preempt    retract: free the slots past the cached prefix, unlock (the prefix stays cached)

Decode tokens enter the tree only when the request finishes (as in SGLang): until then they are
private to the request. Eviction amounts follow SGLang's ``evict_from_tree_cache``: when fewer
slots are free than needed, it asks the tree for the *whole* amount, not the shortfall.
A refused admission still leaves its match's effects (a split edge, fresher access times), as
SGLang's scheduler also matches waiting requests it does not admit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvlab.compare.policies import CachePolicy, Usage
from kvlab.compare.radix_cache import RadixCache, TreeNode
from kvlab.compare.radix_events import RadixRecorder
from kvlab.compare.radix_pool import TokenToKVPoolAllocator

__all__ = ["RadixPolicy", "RadixRequest"]


@dataclass
class RadixRequest:
    """What SGLang's Req holds for the cache (kvlab's reduced form).

    Attributes:
        request_id: The request.
        token_ids: Prompt + outputs so far (its own copy).
        kv_indices: Slot of each token whose KV exists (req_to_token row), tokens 0..n-1.
        num_prefix_tokens: len(prefix_indices): tokens shared with the tree (locked).
        last_node: The locked node (the root when nothing is locked).
    """

    request_id: str
    token_ids: list[int]
    kv_indices: list[int] = field(default_factory=list)
    num_prefix_tokens: int = 0
    last_node: TreeNode | None = None


class RadixPolicy(CachePolicy):
    """SGLang-style radix cache, token-granular (``block_size`` is ignored).

    Attributes:
        cache: The RadixCache.
        pool: Its TokenToKVPoolAllocator (``pool_tokens`` slots).
        recorder: A RadixRecorder when recording, else None.
    """

    name = "radix"

    def __init__(self, pool_tokens: int, block_size: int = 1, record: bool = False) -> None:
        super().__init__(pool_tokens, block_size, record)
        self.pool = TokenToKVPoolAllocator(pool_tokens)
        self.cache = RadixCache(self.pool)
        self.recorder = RadixRecorder.attach(self.cache) if record else None
        self.requests: dict[str, RadixRequest] = {}

    def _alloc(self, num_tokens: int) -> list[int] | None:
        if self.pool.available_size() < num_tokens:
            self.num_evicted_tokens += self.cache.evict(num_tokens)
        return self.pool.alloc(num_tokens)

    def admit(self, req: Any) -> int | None:
        tokens = list(req.token_ids)
        prefix, last_node = self.cache.match_prefix(tokens[:-1], req.request_id)
        need = len(tokens) - len(prefix)
        self.cache.inc_lock_ref(last_node)
        if self.pool.available_size() + self.cache.evictable_size() < need:
            self.cache.dec_lock_ref(last_node)
            return None
        slots = self._alloc(need)
        assert slots is not None  # NOTE: evictable + free covered it
        self.requests[req.request_id] = RadixRequest(
            req.request_id, tokens, list(prefix) + slots, len(prefix), last_node
        )
        self.raw_hit_tokens[req.request_id] = len(prefix)
        return len(prefix)

    def after_prefill(self, req: Any) -> None:
        """cache_unfinished_req: share the computed prompt through the tree."""
        r = self.requests[req.request_id]
        n = len(r.kv_indices)
        self._insert_and_dedupe(r, r.token_ids[:n])
        value, new_last = self.cache.match_prefix(r.token_ids[:n], req.request_id)
        r.kv_indices[: len(value)] = value
        self.cache.dec_lock_ref(r.last_node)
        self.cache.inc_lock_ref(new_last)
        r.num_prefix_tokens, r.last_node = len(value), new_last

    def _insert_and_dedupe(self, r: RadixRequest, key: list[int]) -> None:
        new_prefix_len = self.cache.insert(key, r.kv_indices[: len(key)])
        if new_prefix_len > r.num_prefix_tokens:
            # NOTE: another request cached these tokens meanwhile: the tree keeps its slots.
            self.pool.free(r.kv_indices[r.num_prefix_tokens : new_prefix_len])

    def on_token(self, req: Any, token_id: int) -> None:
        self.requests[req.request_id].token_ids.append(token_id)

    def decode(self, req: Any) -> bool:
        r = self.requests[req.request_id]
        if self.pool.available_size() + self.cache.evictable_size() < 1:
            return False
        slots = self._alloc(1)
        assert slots is not None
        r.kv_indices.extend(slots)
        return True

    def finish(self, req: Any) -> None:
        """cache_finished_req: insert every token with KV, free duplicates, unlock."""
        r = self.requests.pop(req.request_id)
        self._insert_and_dedupe(r, r.token_ids[: len(r.kv_indices)])
        self.cache.dec_lock_ref(r.last_node)

    def preempt(self, req: Any) -> None:
        """Retract: free the slots past the cached prefix and unlock; the prefix stays cached."""
        r = self.requests.pop(req.request_id)
        self.pool.free(r.kv_indices[r.num_prefix_tokens :])
        self.cache.dec_lock_ref(r.last_node)

    def usage(self) -> Usage:
        evictable = self.cache.evictable_size()
        return Usage(
            self.pool.num_used_tokens - evictable,
            self.cache.evictable_size() + self.cache.protected_size(),
            evictable,
            self.pool.size,
        )

    def mark_step(self, step: int) -> None:
        if self.recorder is not None:
            self.recorder.mark_step(step)

    def trace(self) -> Any:
        return self.recorder
