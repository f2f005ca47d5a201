"""Lab ``block_pool``: the learner writes BlockPool's get_new_blocks, touch, free_blocks,
cache_full_blocks and _maybe_evict_cached_block.

The learner's class is the pool kvlab's coordinator builds; whole scheduler-like workloads are
replayed on it and compared after every call with vLLM 0.22.1's recorded free-queue order,
ref_cnt, block_hash, cached map and BlockStored / BlockRemoved events.
"""

from __future__ import annotations

from typing import Any

from kvlab.i18n import N_
from kvlab.labs.common import accept_class, manager_scenarios, recorded
from kvlab.labs.patterns import field_is, queue_change
from kvlab.labs.plug import plugged
from kvlab.labs.registry import Accepted, Lab, Misconception, register
from kvlab.labs.sides import ManagerSide

__all__ = ["LAB"]

METHODS = ("get_new_blocks", "touch", "free_blocks", "cache_full_blocks", "_maybe_evict_cached_block",
           "get_cached_block", "get_num_free_blocks", "take_events")  # fmt: skip
NB2, NB3 = "02_blocks_and_the_block_pool", "03_the_lru_free_queue"
FAMILIES = ("full", "full+sw", "sw", "mixed:full8+sw4", "full+full(heads)")


def _accept(value: Any) -> Accepted:
    return accept_class(value, "BlockPool", METHODS)


def _scenarios(seed: int) -> list:
    out = recorded("manager", lambda rec: rec.config["family"] in FAMILIES, limit=7)
    out += manager_scenarios(["full", "full+sw", "sw"], seed, 3, 45, events=True)
    return out


def _learner_side(rec: Any, accepted: Accepted) -> Any:
    return ManagerSide(rec.config, plug=lambda: plugged(pool_cls=accepted.parts["BlockPool"]))


def _reference_side(rec: Any) -> Any:
    return ManagerSide(rec.config)


# ------------------------------------------------------------------ the catalogue's patterns
def _hashes(div: Any) -> tuple[list, list, list]:
    return (div.state_before.get("block_hash") or [], div.want_state.get("block_hash") or [],
            div.got_state.get("block_hash") or [])  # fmt: skip


def _eager_eviction(div: Any) -> bool:
    """Freed blocks lost their hash (or their map entry) although vLLM keeps them cached."""
    q = queue_change(div)
    _, want_h, got_h = _hashes(div)
    if q is None or not want_h or not got_h:
        return False
    _, want_q, _ = q
    return any(want_h[b] is not None and got_h[b] is None for b in want_q)


def _held_but_queued(div: Any) -> list[int]:
    """Blocks in the learner's free queue (not in vLLM's) that are held (ref_cnt >= 1)."""
    q = queue_change(div)
    if q is None:
        return []
    _, want, got = q
    ref = div.got_state.get("ref_cnt") or []
    return [b for b in got if b not in want and 0 < b < len(ref) and ref[b]]


def _touch_keeps_queued(div: Any) -> bool:
    before = div.state_before.get("ref_cnt") or []
    ref = div.got_state.get("ref_cnt") or []
    held = _held_but_queued(div)
    return bool(held) and all(ref[b] > before[b] for b in held)


def _free_appends_held(div: Any) -> bool:
    before = div.state_before.get("ref_cnt") or []
    ref = div.got_state.get("ref_cnt") or []
    held = _held_but_queued(div)
    return bool(held) and all(ref[b] < before[b] for b in held)


def _null_queued(div: Any) -> bool:
    if div.field == "exception":
        return "block 0 is already in the free queue" in (div.error or "")
    q = queue_change(div)
    return q is not None and 0 in q[2] and 0 not in q[1]


def _free_order(div: Any) -> bool:
    q = queue_change(div)
    if q is None:
        return False
    before, want, got = q
    joined = [x for x in want if x not in before]
    return len(joined) >= 2 and got != want and got == [x for x in want if x not in joined] + joined[::-1]


def _no_lazy_eviction(div: Any) -> bool:
    if div.field == "exception":
        return "already has a block_hash" in (div.error or "") and div.op in ("allocate_slots", "cache_blocks")
    before_h, want_h, got_h = _hashes(div)
    if before_h and want_h and got_h and any(
            before_h[b] is not None and want_h[b] is None and got_h[b] == before_h[b] for b in range(len(want_h))):
        return True  # a reused block kept its old hash
    cached_got = div.got_state.get("cached map") or {}
    # a map entry whose block no longer carries that key (its hash was forgotten, the entry kept)
    return bool(got_h) and any(got_h[b] != key for key, ids in cached_got.items() for b in ids if b < len(got_h))


def _dedupes(div: Any) -> bool:
    want = div.want_state.get("cached map") or {}
    got = div.got_state.get("cached map") or {}
    return any(len(ids) > 1 and len(got.get(k, [])) == 1 for k, ids in want.items())


def _recaches(div: Any) -> bool:
    return div.field == "exception" and "already has a block_hash" in (div.error or "")


def _events(div: Any) -> bool:
    return div.field == "events"


CATALOGUE = (
    Misconception("block_pool.null_block_queued", N_("the null block is never free"),
                  N_("block 0 is popped once, when the pool is built, and stands in for skipped blocks; it never goes back to the free queue, whatever its ref_cnt"),
                  NB2, N_("The null block"), _null_queued),
    Misconception("block_pool.eager_eviction", N_("lazy eviction: a freed block stays cached"),
                  N_("free_blocks only lowers ref_cnt and queues the blocks that reach 0; they keep their block_hash and stay in cached_block_hash_to_block until get_new_blocks pops them for reuse"),
                  NB3, N_("Lazy eviction"), _eager_eviction),
    Misconception("block_pool.touch_keeps_queued", N_("a hit takes a free block out of the free queue"),
                  N_("touch raises ref_cnt; a block that had ref_cnt 0 sits in the free queue as an eviction candidate and must leave it, or get_new_blocks could hand it to another request"),
                  NB3, N_("remove: a hit takes blocks out of the middle"), _touch_keeps_queued),
    Misconception("block_pool.free_appends_held", N_("only blocks that reach ref_cnt 0 are free"),
                  N_("a block shared by several requests is freed by each of them; it joins the free queue once, when its ref_cnt reaches 0"),
                  NB2, N_("Free: free_blocks"), _free_appends_held),
    Misconception("block_pool.free_order", N_("free_blocks keeps the order it is given"),
                  N_("the manager already passes a request's blocks tail first; free_blocks appends them in that order"),
                  NB3, N_("append_n in reverse: the tail of a request is evicted first"), _free_order),
    Misconception("block_pool.recaches", N_("only the new full blocks are cached"),
                  N_("cache_full_blocks handles blocks[num_cached_blocks:num_full_blocks]; the blocks before num_cached_blocks already carry their hash"),
                  NB2, N_("Cache full blocks: cache_full_blocks"), _recaches),
    Misconception("block_pool.no_lazy_eviction", N_("a reused block is evicted when it is popped"),
                  N_("a block popped by get_new_blocks may still be cached from its previous use: _maybe_evict_cached_block must drop it from cached_block_hash_to_block and forget its hash before it gets new tokens"),
                  NB3, N_("Lazy eviction"), _no_lazy_eviction),
    Misconception("block_pool.dedupes", N_("identical full blocks are not merged"),
                  N_("two requests may fill blocks with the same hash at the same time; both are cached under that key (BlockHashToBlockMap holds several blocks per key) and a block's id never changes"),
                  NB3, N_("Duplicated blocks"), _dedupes),
    Misconception("block_pool.events", N_("vLLM's KV events"),
                  N_("compare your BlockStored / BlockRemoved with vLLM's: one BlockRemoved per evicted block (its hash without the group id, its group), when the eviction happens"),
                  NB2, N_("vLLM's KV events"), _events),
)  # fmt: skip

LAB = register(Lab(
    name="block_pool",
    title=N_("vLLM's BlockPool: ref_cnt, lazy eviction and the prefix-cache map"),
    notebook="lab02_block_pool",
    accept=_accept,
    scenarios=_scenarios,
    learner_side=_learner_side,
    reference_side=_reference_side,
    catalogue=CATALOGUE,
    after=("02_blocks_and_the_block_pool", "03_the_lru_free_queue", "04_block_hashes_and_prefix_caching"),
))  # fmt: skip
