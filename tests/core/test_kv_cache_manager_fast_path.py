"""KVCacheManager's API boundary: wrong request types, and the fast paths.

The allocate_slots fast path (a call without hits / external / encoder tokens) and the hit
scans' direct map lookups must decide exactly as the general paths do: the same workloads run
through two managers, one with both switched off, and every observable state (and every
recorder event) is compared after every call. Bad input
that could reach the fast path (bool, float, negative counts, a wrong request) must still get
the general path's clear errors with nothing changed.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from _core_top_helpers import (  # noqa: F401 (none_hash is an autouse fixture)
    ListRecorder,
    chunked_spec,
    config,
    full_spec,
    make_request,
    none_hash,
    sw_spec,
)

from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.request import Request
from kvlab.core.request_params import SamplingParams


def _state(mgr: KVCacheManager) -> tuple:
    pool = mgr.block_pool
    return (
        tuple(b.block_id for b in pool.free_block_queue.get_all_free_blocks()),
        tuple((b.ref_cnt, b.block_hash) for b in pool.blocks),
        {k: tuple(v) if isinstance(v, dict) else (v.block_id,)
         for k, v in pool.cached_block_hash_to_block._cache.items()},  # fmt: skip
        tuple(
            (
                {r: [b.block_id for b in bl] for r, bl in m.req_to_blocks.items()},
                dict(m.num_cached_block),
                list(m.new_block_ids),
            )
            for m in mgr.coordinator.single_type_managers
        ),
    )


CONFIGS = {
    "full": dict(specs=(full_spec(4),), hash_block_size=4),
    "full+sw": dict(specs=(full_spec(4), sw_spec(4, 10)), hash_block_size=4),
    "full8+sw4": dict(specs=(full_spec(8), sw_spec(4, 9)), hash_block_size=4),
    "chunked": dict(specs=(chunked_spec(4, 8),), hash_block_size=4),
    "full,no-caching": dict(specs=(full_spec(4),), hash_block_size=4, enable_caching=False),
}


def _managers(name: str, num_blocks: int) -> tuple[KVCacheManager, KVCacheManager]:
    kw = dict(CONFIGS[name])
    specs = kw.pop("specs")
    made = [KVCacheManager(config(num_blocks, *specs), max_model_len=96, **kw) for _ in "ab"]
    assert made[0]._fast_groups is not None  # the config is one the fast path serves
    made[1]._fast_groups = None  # general path only
    # An instance attribute turns off the hit scans' direct map lookups (direct_lookup).
    made[1].block_pool.get_cached_block = made[1].block_pool.get_cached_block
    return made[0], made[1]


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("recording", [False, True])
def test_fast_path_decides_like_the_general_path(name: str, seed: int, recording: bool) -> None:
    rng = random.Random(seed)
    fast, general = _managers(name, rng.randint(8, 24))
    recorders = (ListRecorder(), ListRecorder())
    if recording:  # the fast path must report exactly the general path's events
        fast.set_recorder(recorders[0])
        general.set_recorder(recorders[1])
    prompts = [[rng.randrange(5) for _ in range(rng.randint(1, 30))] for _ in range(12)]
    reqs = {m: [make_request(f"r{i}", p, 4) for i, p in enumerate(prompts)]
            for m in (fast, general)}  # fmt: skip
    running: list[int] = []
    for _ in range(120):
        i = rng.randrange(len(prompts))
        lookahead = rng.choice([0, 0, 0, 1, 3])
        do_free, token, chunk = rng.random() < 0.1, rng.randrange(5), rng.randint(1, 12)
        results = []
        for m in (fast, general):
            req = reqs[m][i]
            if i in running:
                if do_free:
                    m.free(req)
                    req.num_computed_tokens = 0
                    results.append("freed")
                    continue
                if req.num_computed_tokens >= req.num_tokens:
                    req.append_output_token_ids(token)
                n = min(req.num_tokens - req.num_computed_tokens, chunk)
                out = m.allocate_slots(req, n, num_lookahead_tokens=lookahead)
            else:
                blocks, hit = m.get_computed_blocks(req)
                req.num_computed_tokens = 0
                n = min(req.num_tokens - hit, chunk)
                if hit:
                    out = m.allocate_slots(req, n, hit, blocks, num_lookahead_tokens=lookahead)
                else:  # the shared empty KVCacheBlocks, as the scheduler passes it
                    out = m.allocate_slots(req, n, 0, blocks, num_lookahead_tokens=lookahead)
                if out is not None:
                    req.num_computed_tokens = hit
            if out is not None:
                req.num_computed_tokens += n
            results.append(None if out is None else out.get_block_ids())
        assert results[0] == results[1]
        assert _state(fast) == _state(general)
        assert recorders[0].calls == recorders[1].calls
        if results[0] == "freed":
            running.remove(i)
        elif results[0] is not None and i not in running:
            running.append(i)
    assert fast.take_new_block_ids() == general.take_new_block_ids()


def _running(name: str = "full+sw"):
    mgr, _ = _managers(name, 16)
    req = make_request("live", list(range(9)), 4)
    assert mgr.allocate_slots(req, 9) is not None
    req.num_computed_tokens = 9
    req.append_output_token_ids(7)
    return mgr, req


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((True,), {}, TypeError, "num_new_tokens must be an int"),
        ((1.0,), {}, TypeError, "num_new_tokens must be an int"),
        ((Fraction(1),), {}, TypeError, "num_new_tokens must be an int"),
        (("1",), {}, TypeError, "num_new_tokens must be an int"),
        ((None,), {}, TypeError, "num_new_tokens must be an int"),
        ((-1,), {}, ValueError, "num_new_tokens must be >= 0"),
        ((0,), {}, ValueError, "num_new_tokens must be > 0"),
        ((1,), {"num_lookahead_tokens": -1}, ValueError, "num_lookahead_tokens must be >= 0"),
        ((1,), {"num_lookahead_tokens": False}, TypeError, "num_lookahead_tokens must be an int"),
        ((1,), {"num_new_computed_tokens": 0.0}, TypeError, "num_new_computed_tokens"),
        ((1,), {"num_external_computed_tokens": -3}, ValueError, "num_external_computed_tokens"),
        ((1,), {"num_encoder_tokens": "0"}, TypeError, "num_encoder_tokens"),
        ((1,), {"new_computed_blocks": ()}, TypeError, "KVCacheBlocks or None"),
    ],
)
def test_bad_counts_for_a_running_request_are_refused_without_changes(
    args, kwargs, error, match
) -> None:
    mgr, req = _running()
    before = _state(mgr)
    with pytest.raises(error, match=match):
        mgr.allocate_slots(req, *args, **kwargs)
    assert _state(mgr) == before


def test_numpy_counts_are_accepted_like_ints() -> None:
    mgr, req = _running()
    twin, twin_req = _running()
    a = mgr.allocate_slots(req, np.int64(1), num_lookahead_tokens=np.int32(4))
    b = twin.allocate_slots(twin_req, 1, num_lookahead_tokens=4)
    assert a is not None and a.get_block_ids() == b.get_block_ids() == ([7], [8])
    assert _state(mgr) == _state(twin)


WRONG_REQUESTS = [None, "live", b"live", 5, 2.5, ["live"], object()]


@pytest.mark.parametrize("bad", WRONG_REQUESTS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("name", ["full", "full+sw"])
@pytest.mark.parametrize("recording", [False, True])
def test_a_request_that_is_not_a_request_gets_a_type_error_and_changes_nothing(
    bad, name: str, recording: bool
) -> None:
    mgr, req = _running(name)
    rec = ListRecorder()
    if recording:
        mgr.set_recorder(rec)
    before = _state(mgr)
    calls = [
        ("allocate_slots", lambda: mgr.allocate_slots(bad, 1)),
        ("allocate_slots", lambda: mgr.allocate_slots(bad, 4, 0, None, 2)),
        ("free", lambda: mgr.free(bad)),
        ("get_computed_blocks", lambda: mgr.get_computed_blocks(bad)),
        ("cache_blocks", lambda: mgr.cache_blocks(bad, 4)),
    ]
    for call, fn in calls:
        with pytest.raises(TypeError, match=f"{call}: request must be a Request") as info:
            fn()
        assert type(bad).__name__ in str(info.value)
        assert _state(mgr) == before
    assert rec.calls == []
    # the manager still works
    assert mgr.allocate_slots(req, 1) is not None


@pytest.mark.parametrize("direct", [True, False])
def test_hit_scans_stop_at_a_miss_and_take_the_first_cached_duplicate(direct: bool) -> None:
    mgr = KVCacheManager(
        config(24, full_spec(4), sw_spec(4, 6)), max_model_len=96, hash_block_size=4
    )
    if not direct:  # get_cached_block per block, as vLLM
        mgr.block_pool.get_cached_block = mgr.block_pool.get_cached_block
    tokens = list(range(17))  # 4 full blocks
    x, y = make_request("x", tokens, 4), make_request("y", tokens, 4)
    for req in (x, y):  # y computes the same blocks again: every key maps to two blocks
        assert mgr.allocate_slots(req, 17) is not None
        req.num_computed_tokens = 17
    assert mgr.get_block_ids("x") == ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert mgr.get_block_ids("y") == ([11, 12, 13, 14, 15], [16, 17, 18, 19, 20])
    z = make_request("z", tokens, 4)
    blocks, hit = mgr.get_computed_blocks(z)
    # the first inserted block of each key; the window (6 tokens: 2 blocks) nulls the start
    assert hit == 16 and blocks.get_block_ids() == ([1, 2, 3, 4], [0, 0, 8, 9])
    mgr.free(x)
    mgr.free(y)
    mgr.evict_blocks({2, 12})  # block 1 of the full-attention chain, both copies
    blocks, hit = mgr.get_computed_blocks(z)
    assert hit == 4 and blocks.get_block_ids() == ([1], [6])


@pytest.mark.parametrize("name", ["full", "full+sw"])
def test_a_running_request_without_block_hashes_is_refused_before_any_change(name: str) -> None:
    mgr, _ = _managers(name, 16)
    req = Request("nohash", list(range(3)), SamplingParams(max_tokens=8), None)  # no hasher
    assert mgr.allocate_slots(req, 3) is not None  # no full block yet: nothing to cache
    req.num_computed_tokens = 3
    req.append_output_token_ids([7, 7])
    before = _state(mgr)
    with pytest.raises(ValueError, match="block hashes"):
        mgr.allocate_slots(req, 2)  # would complete (and cache) block 0
    assert _state(mgr) == before
