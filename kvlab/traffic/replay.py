"""Replay real traffic through one cache on the "sequence" clock: one request after another.

The clock of capacity studies: each request, in arrival order, is looked up, allocated and
freed before the next one starts, so nothing but the cache's content carries over::

    for each request:   hit = lookup(prompt)            # capped at num_tokens - 1
                        allocate(prompt)                # evicts what the policy evicts
                        free(request)                   # its full blocks stay cached

Only prompts are replayed (outputs never enter the cache on this clock). A request larger
than the whole cache cannot be allocated: it is counted ``rejected`` (0 hit tokens; its prompt
tokens still count). The caches:

==========  ==========================================================================
``vllm``    kvlab.core's KVCacheManager (vLLM 0.22.1 exactly): get_computed_blocks,
            allocate_slots, free; evictions counted as the pool evicts cached blocks.
``nano``    nano-vllm's BlockManager (kvlab.nanovllm) on the synthesized token ids:
            can_allocate, allocate, deallocate; its hit is capped at num_tokens - 1 as the
            compare driver does (nano-vllm PR #199).
``radix``   SGLang's radix tree (kvlab.sglang.RadixCache) with ``page_size = block_size``:
            one tree element per full block (its prefix key), matched up to
            (num_tokens - 1) // block_size pages, the partial tail page allocated and freed;
            SGLang 0.5.23's life cycle: evict only the shortfall (leaf LRU), finish through
            checkpoint. Token-granular SGLang (page_size 1) would also hit shared partial
            tails; kvlab keeps pages so a sweep over 145 M tokens stays fast. Replayed by
            the lean tree of kvlab.traffic.radix (the same decisions, request by request);
            ``faithful=True`` replays kvlab.sglang's RadixCache itself.
``infinite``every block ever seen stays cached: the theoretical maximum at this block size.
==========  ==========================================================================

Pool: ``capacity_tokens // block_size`` blocks for every cache (vLLM adds its null block).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvlab.traffic.blocks import BlockedTraffic, ensure_none_hash, progress_iter
from kvlab.traffic.mooncake import synthesize_tokens

__all__ = ["CACHES", "ReplayResult", "replay_sequence"]

CACHES = ("vllm", "nano", "radix", "infinite")
"""Cache names every replay accepts."""


@dataclass
class ReplayResult:
    """One trace through one cache at one capacity.

    Attributes:
        cache: A name of CACHES.
        capacity_tokens: Pool size (tokens).
        block_size: Block size (tokens).
        clock: "sequence" or "timed".
        prompt_tokens: Prompt tokens of every request (tokens).
        hit_tokens: Prompt tokens served from the prefix cache (tokens).
        evicted_blocks: Cached blocks evicted (blocks; radix: evicted tokens / block_size);
            None where it is not counted (libCacheSim's policies).
        preemptions: Requests preempted (0 on the sequence clock).
        rejected: Requests that never fit in the pool.
        per_request_hit_tokens: Hit of each request's first admission (tokens), trace order.
        trace: The recording (kvlab Trace) when one was asked for, else None.
        warmup_requests: hit_tokens and prompt_tokens sum the requests from this index on
            (``--warmup``; the peers measure the second half).
        sizing: The ``sizing.KVCacheSizing`` of a replay sized in bytes, else None.
    """

    cache: str
    capacity_tokens: int
    block_size: int
    clock: str
    prompt_tokens: int = 0
    hit_tokens: int = 0
    evicted_blocks: int | None = 0
    preemptions: int = 0
    rejected: int = 0
    per_request_hit_tokens: list[int] = field(default_factory=list, repr=False)
    trace: Any = field(default=None, repr=False)
    warmup_requests: int = 0
    sizing: Any = field(default=None, repr=False)

    @property
    def hit_rate(self) -> float:
        """hit_tokens / prompt_tokens (0.0 for no prompt tokens)."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON row of ``kvlab whatif`` (no per-request data)."""
        return {
            "cache": self.cache, "capacity_tokens": self.capacity_tokens,
            "block_size": self.block_size, "clock": self.clock, "hit_rate": self.hit_rate,
            "hit_tokens": self.hit_tokens, "prompt_tokens": self.prompt_tokens,
            "evicted_blocks": self.evicted_blocks, "preemptions": self.preemptions,
            "rejected": self.rejected, "warmup_requests": self.warmup_requests,
        } | (self.sizing_dict() if self.sizing is not None else {})  # fmt: skip

    def sizing_dict(self) -> dict[str, Any]:
        """The model and its pool when sized in bytes (``sizing.KVCacheSizing``)."""
        s = self.sizing
        return {"model": s.model, "kv_cache_memory_bytes": s.kv_cache_memory_bytes,
                "num_gpu_blocks": s.num_gpu_blocks, "kv_cache_groups": len(s.groups),
                "page_size_bytes": s.page_size_bytes, "max_model_len": s.max_model_len}


class EvictionCounter:
    """A block-pool metrics collector that only counts evicted cached blocks.

    Mirrors the hooks of kvlab.core.kv_cache_metrics.KVCacheMetricsCollector that the
    BlockPool calls (on_block_allocated / on_block_accessed / on_block_evicted / reset).
    """

    def __init__(self) -> None:
        self.num_evicted_blocks = 0

    def on_block_allocated(self, block: Any) -> None:
        pass

    def on_block_accessed(self, block: Any) -> None:
        pass

    def on_block_evicted(self, block: Any) -> None:
        if block.block_hash is not None:
            self.num_evicted_blocks += 1

    def reset(self) -> None:
        pass


def make_vllm_manager(num_blocks: int, block_size: int, counter: EvictionCounter) -> Any:
    """A one-group full-attention KVCacheManager with ``num_blocks`` usable blocks."""
    from kvlab.core import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager

    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype="float32")
    cfg = KVCacheConfig(num_blocks + 1, [], [KVCacheGroupSpec(["layer0"], spec)])
    return KVCacheManager(cfg, max_model_len=1 << 30, hash_block_size=block_size,
                          metrics_collector=counter)  # fmt: skip


def vllm_request(req: Any, hashes: list, max_tokens: int = 1) -> Any:
    """A kvlab.core Request whose block_hashes are the precomputed ``hashes``."""
    from kvlab.core import Request
    from kvlab.core.request import SamplingParams

    r = Request(req.request_id, [0] * req.num_prompt_tokens,
                SamplingParams(max_tokens=max_tokens), None)  # fmt: skip
    r.block_hashes = list(hashes)  # NOTE: equal to hashing synthesize_tokens(req) (blocks.py)
    return r


def serve_vllm_one(mgr: Any, req: Any, hashes: list) -> int | None:
    """One request through a vLLM manager on the sequence clock: get_computed_blocks,
    allocate_slots, free. Returns its hit (tokens), or None when it does not fit the pool."""
    from kvlab.core.request import RequestStatus

    r = vllm_request(req, hashes)
    blocks, hit = mgr.get_computed_blocks(r)
    if mgr.allocate_slots(r, r.num_tokens - hit, hit, blocks) is None:
        return None
    r.status = RequestStatus.FINISHED_LENGTH_CAPPED
    mgr.free(r)
    return hit


def _serve_vllm(b: BlockedTraffic, num_blocks: int, res: ReplayResult, it: Any, rec: Any):
    counter = EvictionCounter()
    mgr = make_vllm_manager(num_blocks, b.block_size, counter)
    for i in it:
        if rec is not None:
            rec.at(i, mgr)
        hit = serve_vllm_one(mgr, b.requests[i], b.block_hashes[i])
        if hit is None:
            res.rejected += 1
        res.per_request_hit_tokens.append(hit or 0)
    res.evicted_blocks = counter.num_evicted_blocks


def _synth_sequence_class() -> type:
    from kvlab.nanovllm import NanoSequence

    class _SynthSequence(NanoSequence):
        """A NanoSequence over synthesized token ids (ints by construction: no per-token check,
        which would cost more than the whole replay)."""

        def __init__(self, request_id: str, token_ids: list[int], block_size: int) -> None:
            self.request_id = request_id
            self.block_size = block_size
            self.token_ids = token_ids
            self.num_prompt_tokens = len(token_ids)
            self.num_cached_tokens = 0
            self.block_table = []

    return _SynthSequence


def _serve_nano(b: BlockedTraffic, num_blocks: int, res: ReplayResult, it: Any, rec: Any):
    from kvlab.nanovllm import NanoBlockManager

    _SynthSequence = _synth_sequence_class()
    mgr = NanoBlockManager(num_blocks, b.block_size)
    for i in it:
        if rec is not None:
            rec.at(i, mgr)
        req = b.requests[i]
        seq = _SynthSequence(req.request_id, synthesize_tokens(req), b.block_size)
        hit = 0
        if mgr.can_allocate(seq):
            mgr.allocate(seq)
            hit = min(seq.num_cached_tokens, seq.num_tokens - 1)
            mgr.deallocate(seq)
        else:
            res.rejected += 1
        res.per_request_hit_tokens.append(hit)
    res.evicted_blocks = mgr.stats.num_evicted_blocks


def make_radix_cache(num_blocks: int) -> tuple[Any, Any]:
    """An SGLang RadixCache over a pool of ``num_blocks`` pages: (cache, pool)."""
    from kvlab.sglang import RadixCache, TokenToKVPoolAllocator

    pool = TokenToKVPoolAllocator(num_blocks)
    return RadixCache(pool), pool


def serve_radix_one(cache: Any, pool: Any, req: Any, keys: list[int],
                    block_size: int) -> tuple[int, int] | None:  # fmt: skip
    """One request through the radix tree on SGLang 0.5.23's life cycle (match, lock, evict
    the shortfall, allocate, release with checkpoint). Returns (hit tokens, evicted pages),
    or None when it does not fit the pool."""
    from kvlab.sglang import Req, evict_from_tree_cache, release_kv_cache

    bs, n = block_size, req.num_prompt_tokens
    num_pages = -(-n // bs)
    prefix, last = cache.match_prefix(keys[: (n - 1) // bs])
    need = num_pages - len(prefix)
    cache.inc_lock_ref(last)
    if pool.available_size() + cache.evictable_size() < need:
        cache.dec_lock_ref(last)
        return None
    evicted = evict_from_tree_cache(cache, need)  # NOTE: the shortfall only (SGLang 0.5.23)
    slots = pool.alloc(need)
    assert slots is not None
    # NOTE: the row holds the partial tail page too; the tree keys full pages only, so
    # release frees the tail (and the duplicates the checkpoint found).
    r = Req(req.request_id, list(keys), [], list(prefix) + slots, len(prefix), last)
    release_kv_cache(r, cache, checkpoint=True)
    return len(prefix) * bs, evicted


def _serve_radix(b: BlockedTraffic, num_blocks: int, res: ReplayResult, it: Any, rec: Any):
    from kvlab.traffic.radix import RadixPrefixCache

    sim = RadixPrefixCache(num_blocks, b.block_size)
    serve, keys, reqs, hits = sim.serve, b.keys, b.requests, res.per_request_hit_tokens
    for i in it:
        hit = serve(keys[i], reqs[i].num_prompt_tokens)
        if hit < 0:
            res.rejected += 1
            hit = 0
        hits.append(hit)
    res.evicted_blocks = sim.num_evicted_blocks


def _serve_radix_faithful(b: BlockedTraffic, num_blocks: int, res: ReplayResult, it: Any,
                          rec: Any):  # fmt: skip
    cache, pool = make_radix_cache(num_blocks)
    evicted = 0
    for i in it:
        got = serve_radix_one(cache, pool, b.requests[i], b.keys[i], b.block_size)
        if got is None:
            res.rejected += 1
            res.per_request_hit_tokens.append(0)
            continue
        res.per_request_hit_tokens.append(got[0])
        evicted += got[1]
    res.evicted_blocks = evicted


def infinite_hits(b: BlockedTraffic, max_model_len: int | None = None) -> list[int]:
    """Per request, the hit (tokens) if every block ever seen stayed cached.

    The hit of request i is the longest prefix of its keys seen in requests 0..i-1, capped at
    (num_tokens - 1) // block_size blocks (vLLM's cap), in tokens. A prompt longer than
    ``max_model_len`` (tokens; None = no limit) is refused: 0, and its blocks are not seen.
    """
    seen: set[int] = set()
    out = []
    for keys, req in zip(b.keys, b.requests, strict=True):
        if max_model_len is not None and req.num_prompt_tokens > max_model_len:
            out.append(0)
            continue
        cap = (req.num_prompt_tokens - 1) // b.block_size
        n = 0
        while n < cap and keys[n] in seen:
            n += 1
        out.append(n * b.block_size)
        seen.update(keys)
    return out


_SERVE = {"vllm": _serve_vllm, "nano": _serve_nano, "radix": _serve_radix}


def check_capacity(capacity_tokens: Any, block_size: int) -> int:
    """Validate a capacity (tokens); floats that are whole numbers (1e6) are accepted.

    Raises:
        ValueError: If it is not a whole number or below one block.
    """
    if isinstance(capacity_tokens, bool) or not isinstance(capacity_tokens, (int, float)):
        raise ValueError(f"capacity must be a number of tokens, got {capacity_tokens!r}")
    if capacity_tokens != int(capacity_tokens):
        raise ValueError(f"capacity must be a whole number of tokens, got {capacity_tokens!r}")
    if capacity_tokens < block_size:
        raise ValueError(
            f"capacity {capacity_tokens:g} tokens is below one block ({block_size} tokens); "
            f"allowed: >= {block_size}"
        )
    return int(capacity_tokens)


def replay_sequence(
    blocked: BlockedTraffic,
    cache: str,
    capacity_tokens: int,
    record: bool = False,
    progress: bool | None = False,
    stop_after: int | None = None,
    record_from: int = 0,
    faithful: bool = False,
) -> ReplayResult:
    """Replay ``blocked`` on the sequence clock (see the module docstring).

    Args:
        blocked: The traffic at one block size (``prepare_blocks``).
        cache: "vllm", "nano", "radix" or "infinite".
        capacity_tokens: Pool size (tokens), at least one block; ignored by "infinite".
        record: Record a kvlab Trace (vllm and nano only; ``ReplayResult.trace``); one
            scheduler step per request (step = request index).
        progress: A tqdm progress bar: True shows it, None only on a terminal, False not.
        stop_after: Replay only the first ``stop_after`` requests (None = all).
        record_from: Start recording at this request index (the trace starts from the
            cache's state then; earlier requests run unrecorded).
        faithful: radix only: replay kvlab.sglang's RadixCache (``serve_radix_one``), the
            reference the lean tree (``kvlab.traffic.radix``) is tested against, instead of
            that lean tree: the same results, 7-70x slower. vllm and nano always
            replay their faithful mirrors.

    Returns:
        The ReplayResult.

    Raises:
        ValueError: Unknown cache, capacity below one block, or record for radix/infinite.
    """
    if cache not in CACHES:
        raise ValueError(f"unknown cache {cache!r}; allowed: {', '.join(CACHES)}")
    bs = blocked.block_size
    capacity = check_capacity(capacity_tokens, bs)
    if record and cache not in ("vllm", "nano"):
        raise ValueError(f"recording needs cache 'vllm' or 'nano', got {cache!r}")
    n = len(blocked) if stop_after is None else min(stop_after, len(blocked))
    res = ReplayResult(cache, capacity, bs, "sequence")
    res.prompt_tokens = sum(r.num_prompt_tokens for r in blocked.requests[:n])
    if cache == "infinite":
        res.per_request_hit_tokens = infinite_hits(blocked)[:n]
    else:
        ensure_none_hash()
        it = progress_iter(range(n), progress, desc=f"{cache} @ {capacity:,} tokens (bs {bs})",
                           unit="req", leave=False)  # fmt: skip
        rec = _Recording(cache, record_from) if record else None
        serve = _serve_radix_faithful if faithful and cache == "radix" else _SERVE[cache]
        serve(blocked, capacity // bs, res, it, rec)
        if rec is not None and rec.recorder is not None:
            res.trace = rec.recorder.trace()
    res.hit_tokens = sum(res.per_request_hit_tokens)
    return res


class _Recording:
    """Attaches a recorder when request ``start`` is reached; one step per request."""

    def __init__(self, cache: str, start: int) -> None:
        self.cache, self.start, self.recorder = cache, start, None

    def at(self, i: int, manager: Any) -> None:
        if self.recorder is None and i >= self.start:
            if self.cache == "nano":
                from kvlab.nanovllm import record_nano

                self.recorder = record_nano(manager)
            else:
                from kvlab.trace import Recorder

                self.recorder = Recorder().attach(manager)
        if self.recorder is not None:
            self.recorder.mark_step(i)
