"""explain(): cap, deciding miss, evictions and their causes, hybrid shortening, EAGLE drop."""

from __future__ import annotations

import pytest
from _trace_helpers import admit, init_hashing, make_manager, make_request

from kvlab.trace import Recorder, explain

A = list(range(100, 112))  # 12 tokens = 3 full blocks of 4


def _last_lookup(trace):
    return trace.calls(name="get_computed_blocks")[-1]


def _setup(num_blocks: int = 16, **kw):
    init_hashing()
    m = make_manager(num_blocks, **kw)
    return m, Recorder().attach(m)


def test_full_hit_is_capped_at_num_tokens_minus_one() -> None:
    m, rec = _setup()
    assert admit(m, make_request("a", A[:8]))
    assert admit(m, make_request("b", A[:8]))
    e = explain(rec.trace(), _last_lookup(rec.trace()))
    assert (e.reason, e.capped, e.num_new_computed_tokens, e.max_cache_hit_length) == (
        "capped",
        True,
        4,
        7,
    )
    assert e.deciding_miss is None and e.eviction is None
    assert [(p.block_index, p.hit) for p in e.turns[0].probes] == [(0, True)]
    assert "stopped by the cap" in str(e)


def test_miss_caused_by_reuse_names_the_evicting_allocation() -> None:
    m, rec = _setup(num_blocks=8)
    a = make_request("a", A)
    assert admit(m, a)
    m.free(a)  # queue: 4 5 6 7 3 2 1 (tail first)
    rec.mark_step(2)
    c = make_request("c", list(range(500, 520)))  # 5 blocks: pops 4 5 6 7 and a's block 3
    assert admit(m, c)
    m.free(c)
    rec.mark_step(3)
    assert admit(m, make_request("b", A + [1, 2, 3, 4]))
    t = rec.trace()
    e = explain(t, _last_lookup(t))
    assert e.reason == "miss" and e.num_new_computed_tokens == 8
    assert (e.deciding_miss.block_index, e.deciding_miss.kv_cache_group_id) == (2, 0)
    ev = e.eviction
    assert ev.kind == "BLOCK_REMOVED" and ev.block_id == 3 and ev.step == 2
    assert (ev.call.name, ev.call.request) == ("allocate_slots", "c")
    assert ev.stored_by == "a" and ev.stored_seq is not None and ev.stored_seq < ev.seq
    assert "get_new_blocks popped block 3" in ev.how
    assert "evicted at event" in str(e) and "block index 2" in str(e)


def test_never_cached_prefix() -> None:
    m, rec = _setup()
    assert admit(m, make_request("a", A))
    t = rec.trace()
    e = explain(t, t.calls()[0].begin)
    assert e.reason == "miss" and e.never_cached and e.eviction is None
    assert e.deciding_miss.block_index == 0
    assert "never cached" in str(e)


def test_reset_prefix_cache_is_the_cause() -> None:
    m, rec = _setup()
    a = make_request("a", A)
    assert admit(m, a)
    m.free(a)
    assert m.reset_prefix_cache()
    assert admit(m, make_request("b", A))
    t = rec.trace()
    e = explain(t, _last_lookup(t))
    assert e.eviction.kind == "ALL_BLOCKS_CLEARED" and e.eviction.call.name == "reset_prefix_cache"
    assert e.deciding_miss.block_index == 0


def test_hybrid_sliding_window_shortens_the_fixed_point() -> None:
    m, rec = _setup(num_blocks=32, hybrid=True, sliding_window=8)
    a = make_request("a", A + [112, 113, 114, 115])  # 16 tokens, 4 blocks per group
    assert admit(m, a)
    sw_blocks = m.get_block_ids("a")[1]
    m.free(a)
    m.evict_blocks({sw_blocks[3]})
    assert admit(m, make_request("b", A + [112, 113, 114, 115, 1, 2, 3, 4]))
    t = rec.trace()
    e = explain(t, _last_lookup(t))
    assert e.num_new_computed_tokens == 12 and e.reason == "miss"
    assert [
        (s.kv_cache_group_ids, s.iteration, s.hit_length_in, s.hit_length_out)
        for s in e.shortened_by
    ] == [([0], 0, 19, 16), ([1], 0, 16, 12)]
    sw_turn = e.turns[1]
    assert [(p.block_index, p.hit) for p in sw_turn.probes] == [(3, False), (2, True), (1, True)]
    assert (e.deciding_miss.block_index, e.deciding_miss.kv_cache_group_id) == (3, 1)
    assert e.eviction.call.name == "evict_blocks" and e.eviction.block_id == sw_blocks[3]
    assert "shortened by groups [1]" in str(e)


def test_eagle_drops_the_last_matched_block() -> None:
    m, rec = _setup(use_eagle=True)
    assert admit(m, make_request("a", A))
    assert admit(m, make_request("b", A + [1, 2, 3, 4, 5]))
    t = rec.trace()
    e = explain(t, _last_lookup(t))
    assert e.eagle_dropped_blocks == 1 and e.num_new_computed_tokens == 8
    assert e.deciding_miss.block_index == 3
    assert "EAGLE" in str(e)


def test_prompt_shorter_than_a_block_has_no_lookup() -> None:
    m, rec = _setup()
    assert admit(m, make_request("a", A[:4]))
    t = rec.trace()
    e = explain(t, t.calls()[0])
    assert e.reason == "too_short" and e.turns[0].probes == []


def test_explain_rejects_other_calls() -> None:
    m, rec = _setup()
    assert admit(m, make_request("a", A))
    t = rec.trace()
    with pytest.raises(
        ValueError, match="needs a finished get_computed_blocks call, got allocate_slots"
    ):
        explain(t, t.calls(name="allocate_slots")[0])
