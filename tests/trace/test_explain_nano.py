"""nano-vllm's facts rebuilt from a trace equal the live NanoBlockManager's own counters, and
explain() says why a nano allocate stopped (first missing hash or token-id mismatch)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlab.nanovllm import NanoBlockManager, NanoSequence, compute_hash, record_nano
from kvlab.trace import explain
from kvlab.trace.explain_nano import explain_allocate, is_nano, nano_facts

COUNTERS = ("num_lookups", "num_hits", "num_token_mismatches", "num_stale_hits",
            "num_reactivated_blocks", "num_deque_scan_steps", "num_evicted_blocks")  # fmt: skip


def _counts(obj) -> dict[str, int]:
    return {name: getattr(obj, name) for name in COUNTERS}


def _stale_by_index(trace, manager) -> dict[int, int]:
    return {
        trace.tables.find_hash(h.to_bytes(8, "big")): b for h, b in manager.stale_entries().items()
    }


def _drive(
    m: NanoBlockManager, ops: list[tuple[int, int, int]], live: dict[str, NanoSequence]
) -> None:
    for kind, r, t in ops:
        rid, s = f"r{r}", live.get(f"r{r}")
        if kind == 0 and s is None:
            s = NanoSequence(rid, [1, 2, 3, 4, t % 3, t % 2, t][: 2 + t % 6], 2)
            if m.can_allocate(s):
                m.allocate(s)
                live[rid] = s
        elif kind == 1 and s is not None:
            s.append_token(t % 4)
            if m.can_append(s):
                m.may_append(s)
            else:
                s.token_ids.pop()
        elif kind == 2 and s is not None:
            m.deallocate(live.pop(rid))


OPS = st.lists(
    st.tuples(st.sampled_from([0, 0, 1, 1, 1, 2, 2]), st.integers(0, 3), st.integers(0, 20)),
    min_size=5,
    max_size=50,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, OPS)
def test_facts_equal_the_live_counters(warmup, ops) -> None:
    m = NanoBlockManager(5, 2)
    live: dict[str, NanoSequence] = {}
    _drive(m, warmup, live)  # NOTE: recording starts from a used manager (stale entries included)
    before = _counts(m.stats)
    rec = record_nano(m)
    _drive(m, ops, live)
    trace = rec.trace()
    facts = nano_facts(trace)
    assert _counts(facts) == {k: v - before[k] for k, v in _counts(m.stats).items()}
    assert facts.stale_entries == _stale_by_index(trace, m)


def _mismatch_trace():
    """a's blocks are freed; b reuses them (block 0 gets b's partial last block); c misses."""
    m = NanoBlockManager(3, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3, 4], 2)
    m.allocate(a)
    m.deallocate(a)
    b = NanoSequence("b", [7, 7, 7, 7, 7], 2)
    m.allocate(b)
    m.deallocate(b)
    m.allocate(NanoSequence("c", [1, 2, 3, 4], 2))
    return m, rec.trace()


def test_token_id_mismatch_is_explained() -> None:
    m, t = _mismatch_trace()
    e = explain(t, len(t) - 1)
    h0 = f"{compute_hash([1, 2]):016x}"[:8]
    assert e.reason == "token_mismatch" and m.stats.num_token_mismatches == 1
    assert (e.deciding_miss.block_index, e.deciding_miss.entry_block_id) == (0, 0)
    assert str(e).splitlines() == [
        (
            "allocate for request c (event #43, step 0, nano-vllm BlockManager): hit 0 of 4 tokens "
            "(0 of 2 blocks of 2)"
        ),
        (
            "  lookups go block 0, 1, ... and stop at the first miss; every later block is taken "
            "fresh from the head of free_block_ids"
        ),
        (
            f"  probe block 0 (hash {h0}, event #44): miss: hash_to_block_id names block 0, whose "
            "token_ids differ"
        ),
        (
            f"  stopped at block index 0: token-id mismatch: hash {h0} has a stale entry naming "
            "block 0, which holds other tokens now"
        ),
        (
            "  removed from the cache at event #31 (step 0): allocate of request b took block 0 "
            "from the head of free_block_ids (popleft) and reset its hash; its hash_to_block_id "
            "entry stayed behind, stale; cached by request a"
        ),
        "  reason: token_mismatch",
    ]


def test_first_missing_hash_and_reactivation() -> None:
    m = NanoBlockManager(6, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3, 4, 5], 2)
    m.allocate(a)
    m.deallocate(a)  # free_block_ids: 3 4 5 2 1 0
    m.allocate(NanoSequence("b", [1, 2, 3, 4, 9, 9], 2))
    t = rec.trace()
    e = explain(t, len(t) - 1)
    h = [compute_hash([1, 2])]
    h += [compute_hash([3, 4], h[0]), compute_hash([9, 9], compute_hash([3, 4], h[0]))]
    short = [f"{x:016x}"[:8] for x in h]
    assert e.reason == "no_entry" and e.reactivated == [(0, 5), (1, 4)]
    assert str(e).splitlines()[2:] == [
        f"  probe block 0 (hash {short[0]}, event #24): hit block 0",
        f"  probe block 1 (hash {short[1]}, event #28): hit block 1",
        f"  probe block 2 (hash {short[2]}, event #32): miss: no hash_to_block_id entry",
        (
            "  re-activated freed cached block 0: removed from free_block_ids after scanning 5 "
            "position(s) (O(n); vLLM V1 unlinks in O(1))"
        ),
        (
            "  re-activated freed cached block 1: removed from free_block_ids after scanning 4 "
            "position(s) (O(n); vLLM V1 unlinks in O(1))"
        ),
        f"  stopped at block index 2: first missing hash {short[2]}",
        "  no request had stored this hash earlier in this trace",
        "  reason: no_entry",
    ]
    assert m.stats.num_deque_scan_steps == 9


def test_stale_entry_hit_is_flagged() -> None:
    m = NanoBlockManager(3, 2)
    rec = record_nano(m)
    a = NanoSequence("a", [1, 2, 3, 4, 9], 2)
    m.allocate(a)
    m.deallocate(a)  # free: 2 1 0
    x = NanoSequence("x", [5, 6, 3, 4], 2)  # takes 2, then 1: block 1 = [3, 4] under (5, 6)
    m.allocate(x)
    m.deallocate(x)
    m.allocate(NanoSequence("y", [1, 2, 3, 4], 2))
    t = rec.trace()
    e = explain(t, len(t) - 1)
    assert [p.verdict for p in e.probes] == ["hit", "stale_hit"] and e.reason == "complete"
    assert m.stats.num_stale_hits == 1 and nano_facts(t).num_stale_hits == 1
    assert str(e).splitlines()[-2:] == [
        "  every block hit (the prompt fills whole blocks)",
        "  reason: complete",
    ]


@pytest.mark.parametrize(
    ("tokens", "reason", "line"),
    [
        ([1], "too_short", "  no lookup: the prompt is shorter than one block"),
        ([1, 2, 3], "partial_last_block",
         "  every full block hit; the partial last block has no hash and is not looked up"),
    ],
)  # fmt: skip
def test_hits_without_a_miss(tokens, reason, line) -> None:
    m = NanoBlockManager(6, 2)
    rec = record_nano(m)
    m.allocate(NanoSequence("a", [1, 2, 3, 4], 2))
    m.allocate(NanoSequence("b", tokens, 2))
    t = rec.trace()
    e = explain(t, len(t) - 1)
    assert (e.reason, e.deciding_miss, str(e).splitlines()[-2]) == (reason, None, line)


def test_bad_calls_are_refused() -> None:
    m, t = _mismatch_trace()
    dealloc = next(c for c in t.calls() if c.name == "deallocate")
    with pytest.raises(ValueError, match="get_computed_blocks"):
        explain(t, dealloc)
    with pytest.raises(ValueError, match="nano-vllm trace"):
        explain_allocate(t, dealloc)
    with pytest.raises(IndexError, match="out of range"):
        nano_facts(t, len(t))
    assert is_nano(t) and m.stats.num_lookups == nano_facts(t).num_lookups
