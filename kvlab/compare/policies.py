"""Three prefix caches behind one interface, so one driver can run the same workload on each.

A ``CachePolicy`` owns one cache and answers the driver's questions about a request (an object
with ``request_id``, ``token_ids`` and ``num_prompt_tokens``)::

    admit(req)      room for a prefill of req.token_ids?  -> tokens served from the cache, or None
    after_prefill   the prefill was computed (the radix cache publishes it in its tree)
    on_token(req)   a token was sampled and appended to req.token_ids
    decode(req)     room for the KV of req.token_ids[-1]? -> True, or False (nothing changed)
    finish(req) / preempt(req)

and reports ``usage()`` (in tokens, so block- and token-granular caches compare) and
``num_evicted_tokens`` (cached tokens lost to make room, cumulative).

Pool size: every policy gets ``pool_tokens`` usable tokens: vLLM ``pool_tokens // block_size``
blocks plus its null block, nano-vllm ``pool_tokens // block_size`` blocks, the radix cache
``pool_tokens`` slots.

Hit tokens (what admit returns: KV not computed again) follow each engine's own rule for the
last prompt token, which must be computed to get logits: vLLM caps its lookup at
``num_tokens - 1`` and rounds down to a block (a fully cached prompt recomputes its last block);
SGLang matches at most ``num_tokens - 1`` tokens; nano-vllm (seed 004) counts every hit block,
so a fully cached prompt would leave nothing to compute and crash its model runner (nano-vllm
issues #114, #144): the driver recomputes just the last token (the "L-1" fallback of nano-vllm
PR #199) and reports nano's own count as ``raw_hit_tokens``.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from kvlab.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.kv_events import BlockRemoved
from kvlab.core.request import Request, RequestStatus, SamplingParams
from kvlab.nanovllm import NanoBlockManager, NanoSequence, record_nano
from kvlab.sglang import (
    RadixCache,
    RadixRecorder,
    Req,
    TokenToKVPoolAllocator,
    checkpoint_kv_cache,
    evict_from_tree_cache,
    release_kv_cache,
)

__all__ = ["CachePolicy", "NanoPolicy", "RadixPolicy", "Usage", "VllmPolicy"]


@dataclass(frozen=True)
class Usage:
    """One cache's pool at one moment (tokens).

    Attributes:
        num_used_tokens: Capacity held by running requests (not reclaimable by eviction).
        num_cached_tokens: Reusable cached content resident in the pool (held or not).
        num_evictable_tokens: Cached content nobody holds (eviction takes it first).
        pool_tokens: Usable capacity.
    """

    num_used_tokens: int
    num_cached_tokens: int
    num_evictable_tokens: int
    pool_tokens: int


class CachePolicy(ABC):
    """One prefix cache as the driver sees it (see the module docstring).

    Args:
        pool_tokens: Usable KV capacity (tokens).
        block_size: Tokens per block (tokens); the radix cache ignores it.
        record: Record a trace (``trace()``).

    Raises:
        ValueError: If pool_tokens or block_size is not a positive int.
    """

    name = "?"

    def __init__(self, pool_tokens: int, block_size: int, record: bool = False) -> None:
        for label, v in (("pool_tokens", pool_tokens), ("block_size", block_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{label} must be an int >= 1 (tokens), got {v!r}")
        self.pool_tokens = pool_tokens
        self.block_size = block_size
        self.record = record
        self.num_evicted_tokens = 0
        self.raw_hit_tokens: dict[str, int] = {}

    @abstractmethod
    def admit(self, req: Any) -> int | None:
        """Allocate for the prefill of ``req.token_ids``; the hit (tokens) or None (no room)."""

    def after_prefill(self, req: Any) -> None:
        """The prefill of ``req`` was computed (the radix cache inserts it now)."""

    @abstractmethod
    def on_token(self, req: Any, token_id: int) -> None:
        """``token_id`` was sampled and appended to ``req.token_ids``."""

    @abstractmethod
    def decode(self, req: Any) -> bool:
        """Make room for the KV of ``req.token_ids[-1]``; False (nothing changed) if none."""

    @abstractmethod
    def finish(self, req: Any) -> None:
        """``req`` finished: release it (its content stays cached)."""

    @abstractmethod
    def preempt(self, req: Any) -> None:
        """``req`` is preempted (recomputed later): release it."""

    @abstractmethod
    def usage(self) -> Usage:
        """The pool now."""

    def mark_step(self, step: int) -> None:
        """A driver step starts (recorders stamp it)."""

    def trace(self) -> Any:
        """The recording (a kvlab Trace, or a RadixRecorder), or None when not recording."""
        return None


def _ensure_none_hash() -> None:
    # NOTE: NONE_HASH is process-wide; set it only if nobody has (re-setting it would change
    # the hashes of requests other code already holds).
    if not hasattr(sys.modules["kvlab.core.kv_cache_utils"], "NONE_HASH"):
        init_none_hash(sha256)


class VllmPolicy(CachePolicy):
    """vLLM V1: kvlab.core's KVCacheManager, one full-attention group, prefix caching on.

    Evictions are counted from its own KV events (BlockRemoved), as a vLLM deployment reports
    them. With ``record``, a kvlab Recorder is attached (``trace()``).
    """

    name = "vllm"

    def __init__(self, pool_tokens: int, block_size: int, record: bool = False) -> None:
        super().__init__(pool_tokens, block_size, record)
        _ensure_none_hash()
        spec = FullAttentionSpec(
            block_size=block_size, num_kv_heads=1, head_size=1, dtype="float32"
        )
        num_blocks = pool_tokens // block_size + 1  # NOTE: + the null block, never usable
        cfg = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec(["layer0"], spec)])
        self.manager = KVCacheManager(
            cfg, max_model_len=1 << 30, hash_block_size=block_size, enable_kv_cache_events=True
        )
        self._hasher = get_request_block_hasher(block_size, sha256)
        self.requests: dict[str, Request] = {}
        self.recorder = None
        if record:
            from kvlab.trace import Recorder

            self.recorder = Recorder().attach(self.manager)

    def _drain_events(self) -> None:
        for event in self.manager.take_events():
            if isinstance(event, BlockRemoved):
                self.num_evicted_tokens += len(event.block_hashes) * self.block_size

    def admit(self, req: Any) -> int | None:
        r = self.requests.get(req.request_id)
        if r is None:
            r = Request(req.request_id, list(req.token_ids), SamplingParams(max_tokens=1 << 30),
                        None, block_hasher=self._hasher)  # fmt: skip
            self.requests[req.request_id] = r
        blocks, hit = self.manager.get_computed_blocks(r)
        new = self.manager.allocate_slots(r, r.num_tokens - hit, hit, blocks)
        self._drain_events()
        if new is None:
            return None
        r.status = RequestStatus.RUNNING
        r.num_computed_tokens = r.num_tokens
        self.raw_hit_tokens[req.request_id] = hit
        return hit

    def on_token(self, req: Any, token_id: int) -> None:
        self.requests[req.request_id].append_output_token_ids(token_id)

    def decode(self, req: Any) -> bool:
        r = self.requests[req.request_id]
        new = self.manager.allocate_slots(r, r.num_tokens - r.num_computed_tokens)
        self._drain_events()
        if new is None:
            return False
        r.num_computed_tokens = r.num_tokens
        return True

    def finish(self, req: Any) -> None:
        r = self.requests.pop(req.request_id)
        r.status = RequestStatus.FINISHED_LENGTH_CAPPED
        self.manager.free(r)

    def preempt(self, req: Any) -> None:
        r = self.requests[req.request_id]
        self.manager.free(r)
        r.status = RequestStatus.PREEMPTED
        r.num_computed_tokens = 0
        r.num_preemptions += 1

    def usage(self) -> Usage:
        pool, bs = self.manager.block_pool, self.block_size
        usable = [b for b in pool.blocks if not b.is_null]
        used = sum(1 for b in usable if b.ref_cnt > 0)
        cached = sum(1 for b in usable if b.block_hash is not None)
        evictable = sum(1 for b in usable if b.block_hash is not None and b.ref_cnt == 0)
        return Usage(used * bs, cached * bs, evictable * bs, len(usable) * bs)

    def mark_step(self, step: int) -> None:
        if self.recorder is not None:
            self.recorder.mark_step(step)

    def trace(self) -> Any:
        return None if self.recorder is None else self.recorder.trace()


class NanoPolicy(CachePolicy):
    """nano-vllm's BlockManager (kvlab.nanovllm); see the module docstring."""

    name = "nano-vllm"

    def __init__(self, pool_tokens: int, block_size: int, record: bool = False) -> None:
        super().__init__(pool_tokens, block_size, record)
        self.manager = NanoBlockManager(pool_tokens // block_size, block_size)
        self.seqs: dict[str, NanoSequence] = {}
        self.recorder = record_nano(self.manager) if record else None

    def admit(self, req: Any) -> int | None:
        seq = NanoSequence(req.request_id, list(req.token_ids), self.block_size)
        if not self.manager.can_allocate(seq):
            return None
        self.manager.allocate(seq)
        self._count_evictions()
        self.seqs[req.request_id] = seq
        self.raw_hit_tokens[req.request_id] = seq.num_cached_tokens
        return min(seq.num_cached_tokens, seq.num_tokens - 1)

    def on_token(self, req: Any, token_id: int) -> None:
        self.seqs[req.request_id].append_token(token_id)

    def decode(self, req: Any) -> bool:
        seq = self.seqs[req.request_id]
        if not self.manager.can_append(seq):
            return False
        self.manager.may_append(seq)
        self._count_evictions()
        return True

    def _release(self, req: Any) -> None:
        # NOTE: deallocate never evicts (freed blocks keep their hashes).
        self.manager.deallocate(self.seqs.pop(req.request_id))

    finish = _release
    preempt = _release

    def _count_evictions(self) -> None:
        # Blocks that left the valid map (hash reset by reuse, or map entry overwritten).
        self.num_evicted_tokens = self.manager.stats.num_evicted_blocks * self.block_size

    def usage(self) -> Usage:
        m, bs = self.manager, self.block_size
        cached = list(m.cached_hashes().values())
        evictable = sum(1 for b in cached if m.blocks[b].ref_count == 0)
        return Usage(
            len(m.used_block_ids) * bs, len(cached) * bs, evictable * bs, m.num_blocks * bs
        )

    def mark_step(self, step: int) -> None:
        if self.recorder is not None:
            self.recorder.mark_step(step)

    def trace(self) -> Any:
        return None if self.recorder is None else self.recorder.trace()


class RadixPolicy(CachePolicy):
    """SGLang's radix cache (kvlab.sglang) on SGLang 0.5.23's request life cycle, token-granular.

    ``block_size`` is ignored: every token is its own unit (page size 1). Per request, the calls
    SGLang 0.5.23's scheduler makes (``kvlab.sglang.mem_cache.common``)::

        admit          match_prefix(tokens[:-1]) (hit <= num_tokens - 1), lock its last node;
                       free + evictable < need: unlock, no room; else evict the *shortfall*
                       (evict_from_tree_cache) and alloc(need) slots
        after_prefill  checkpoint_kv_cache: insert, free duplicates, match again, move the lock
        decode         free + evictable < 1: no room; else evict the shortfall, alloc(1)
        finish         release_kv_cache(checkpoint=True): checkpoint every token with KV (the
                       leaf split at the prompt's end), free the rest, unlock
        preempt        release_kv_cache(checkpoint=False): free the slots past the tree-owned
                       prefix, unlock (the prefix stays cached)

    Decode tokens enter the tree only when the request finishes, as in SGLang: until then they
    are the request's own. A refused admission still leaves its match's effects (a split edge,
    fresher access times), as SGLang's scheduler also matches waiting requests it does not
    admit. Differs: decode slots are allocated per request, not per batch.

    Attributes:
        cache: The RadixCache.
        pool: Its TokenToKVPoolAllocator (``pool_tokens`` slots).
        recorder: A RadixRecorder when recording, else None.
        requests: request_id -> its ``kvlab.sglang.Req`` while it holds slots.
    """

    name = "radix"

    def __init__(self, pool_tokens: int, block_size: int = 1, record: bool = False) -> None:
        super().__init__(pool_tokens, block_size, record)
        self.pool = TokenToKVPoolAllocator(pool_tokens)
        self.cache = RadixCache(self.pool)
        self.recorder = RadixRecorder.attach(self.cache) if record else None
        self.requests: dict[str, Req] = {}

    def _alloc(self, num_tokens: int) -> list[int]:
        self.num_evicted_tokens += evict_from_tree_cache(self.cache, num_tokens)
        slots = self.pool.alloc(num_tokens)
        assert slots is not None  # NOTE: callers checked free + evictable first
        return slots

    def _has_room(self, num_tokens: int) -> bool:
        return self.pool.available_size() + self.cache.evictable_size() >= num_tokens

    def admit(self, req: Any) -> int | None:
        tokens = list(req.token_ids)
        prefix, last_node = self.cache.match_prefix(tokens[:-1], req.request_id)
        need = len(tokens) - len(prefix)
        self.cache.inc_lock_ref(last_node)
        if not self._has_room(need):
            self.cache.dec_lock_ref(last_node)
            return None
        n = req.num_prompt_tokens
        self.requests[req.request_id] = Req(
            req.request_id, tokens[:n], tokens[n:], list(prefix) + self._alloc(need),
            len(prefix), last_node,
        )  # fmt: skip
        self.raw_hit_tokens[req.request_id] = len(prefix)
        return len(prefix)

    def after_prefill(self, req: Any) -> None:
        r = self.requests[req.request_id]
        checkpoint_kv_cache(r, self.cache, up_to=len(r.kv_indices))

    def on_token(self, req: Any, token_id: int) -> None:
        self.requests[req.request_id].output_ids.append(token_id)

    def decode(self, req: Any) -> bool:
        if not self._has_room(1):
            return False
        self.requests[req.request_id].kv_indices.extend(self._alloc(1))
        return True

    def finish(self, req: Any) -> None:
        release_kv_cache(self.requests.pop(req.request_id), self.cache, checkpoint=True)

    def preempt(self, req: Any) -> None:
        release_kv_cache(self.requests.pop(req.request_id), self.cache, checkpoint=False)

    def usage(self) -> Usage:
        evictable = self.cache.evictable_size()
        return Usage(
            self.pool.num_used_tokens - evictable,
            evictable + self.cache.protected_size(),
            evictable,
            self.pool.size,
        )

    def mark_step(self, step: int) -> None:
        if self.recorder is not None:
            self.recorder.mark_step(step)

    def trace(self) -> Any:
        return self.recorder
