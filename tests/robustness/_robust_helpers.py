"""Builders and the full state snapshot shared by the robustness campaign (not a test module).

``snapshot(target)`` captures everything a bad input could change: the free-queue order and
every block's free-list links, the queue's own counter, ``ref_cnt`` and ``block_hash`` of every
block, the cached map (key -> block ids, in order), each manager's ``req_to_blocks`` and
``num_cached_block``, and (with a recorder) the number of recorded events and the replayed
final state. Two snapshots compare equal iff nothing changed.
"""

from __future__ import annotations

from typing import Any

from kvlab.core.block_pool import BlockPool
from kvlab.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from kvlab.core.kv_cache_interface import SlidingWindowSpec
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.request import Request, SamplingParams
from kvlab.trace import KVState, Recorder

BLOCK_SIZE = 4


def make_manager(num_blocks: int = 16, hybrid: bool = False) -> KVCacheManager:
    """One full-attention group (plus a sliding-window group when ``hybrid``), caching on."""
    spec = dict(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype="float32")
    specs: list[Any] = [FullAttentionSpec(**spec)]
    if hybrid:
        specs.append(SlidingWindowSpec(**spec, sliding_window=8))
    groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(specs)]
    cfg = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    return KVCacheManager(cfg, max_model_len=4096, hash_block_size=BLOCK_SIZE)


_HASHER = get_request_block_hasher(BLOCK_SIZE, sha256)


def make_request(request_id: str, tokens: list[int]) -> Request:
    """A request hashed at BLOCK_SIZE (NONE_HASH is set once, on first use)."""
    if not _NONE_HASH_SET:
        init_none_hash(sha256)
        _NONE_HASH_SET.append(True)
    return Request(request_id, list(tokens), SamplingParams(max_tokens=100), None,
                   block_hasher=_HASHER)  # fmt: skip


_NONE_HASH_SET: list[bool] = []


def busy_manager(hybrid: bool = False) -> tuple[KVCacheManager, Recorder, list[Request]]:
    """A recorded manager mid-run: "live" holds blocks (two shared with the finished "done"),
    "gone" finished and left cached free blocks; the free queue is no longer in id order."""
    m = make_manager(24 if hybrid else 16, hybrid)
    rec = Recorder(chunk_size=4).attach(m)
    done = make_request("done", list(range(9)))
    live = make_request("live", list(range(8)) + [90, 91, 92])
    gone = make_request("gone", list(range(100, 113)))
    for req in (done, live, gone):
        blocks, hit = m.get_computed_blocks(req)
        assert m.allocate_slots(req, req.num_tokens - hit, hit, blocks) is not None
        req.num_computed_tokens = req.num_tokens
    m.free(done)
    m.free(gone)  # its 3 full blocks stay cached, free (eviction candidates)
    return m, rec, [done, live]


def busy_pool() -> BlockPool:
    """A BlockPool with blocks in use, cached free blocks and a shuffled free queue."""
    m, _, _ = busy_manager()
    m.set_recorder(None)
    return m.block_pool


def snapshot(target: Any, rec: Recorder | None = None) -> dict[str, Any]:
    """Everything observable about a KVCacheManager or BlockPool (and its recorder)."""
    pool = getattr(target, "block_pool", target)
    queue = pool.free_block_queue
    snap: dict[str, Any] = {
        "state": KVState.from_manager(target).canonical(),
        "num_free_blocks": queue.num_free_blocks,
        "links": [
            (
                None if b.prev_free_block is None else b.prev_free_block.block_id,
                None if b.next_free_block is None else b.next_free_block.block_id,
            )
            for b in pool.blocks
        ],
        "block_hash": [b.block_hash for b in pool.blocks],
        "cached": {
            k: tuple(v) if isinstance(v, dict) else (v.block_id,)
            for k, v in pool.cached_block_hash_to_block._cache.items()
        },
        "events": list(pool.kv_event_queue),
    }
    coordinator = getattr(target, "coordinator", None)
    if coordinator is not None:
        snap["managers"] = [
            (
                {r: [b.block_id for b in bl] for r, bl in mgr.req_to_blocks.items()},
                dict(mgr.num_cached_block),
            )
            for mgr in coordinator.single_type_managers
        ]
    if rec is not None:
        trace = rec.trace()
        snap["num_recorded"] = len(trace)
        snap["replay_equals_live"] = trace.final_state() == KVState.from_manager(target)
        assert snap["replay_equals_live"], trace.final_state().diff(KVState.from_manager(target))
    return snap
