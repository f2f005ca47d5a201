"""KVCacheManager's guards: wrong request types and counts get clear errors, nothing changes.

The guard on the first line of each public method accepts the common call (a Request asking
for its next tokens) with a few type tests; bad input that looks like it (bool, float, negative
counts, a wrong request, missing block hashes) must still get a clear error with nothing
changed, recording on or off.
"""

from __future__ import annotations

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
    "full": lambda n: config(n, full_spec(4)),
    "full+sw": lambda n: config(n, full_spec(4), sw_spec(4, 6)),
}


def _manager(name: str, num_blocks: int) -> KVCacheManager:
    return KVCacheManager(CONFIGS[name](num_blocks), max_model_len=64, hash_block_size=4)


def _running(name: str = "full+sw"):
    mgr = _manager(name, 16)
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


def test_hit_scans_stop_at_a_miss_and_take_the_first_cached_duplicate() -> None:
    mgr = KVCacheManager(
        config(24, full_spec(4), sw_spec(4, 6)), max_model_len=96, hash_block_size=4
    )
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
    mgr = _manager(name, 16)
    req = Request("nohash", list(range(3)), SamplingParams(max_tokens=8), None)  # no hasher
    assert mgr.allocate_slots(req, 3) is not None  # no full block yet: nothing to cache
    req.num_computed_tokens = 3
    req.append_output_token_ids([7, 7])
    before = _state(mgr)
    with pytest.raises(ValueError, match="block hashes"):
        mgr.allocate_slots(req, 2)  # would complete (and cache) block 0
    assert _state(mgr) == before
