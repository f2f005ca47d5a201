"""check_invariants: every rule fires with a precise message; legal transients are accepted."""

from __future__ import annotations

import pytest
from _trace_helpers import admit, init_hashing, make_manager, make_request

from kvlab.trace import InvariantError, KVState, Recorder, check_invariants
from kvlab.trace.tables import key_code


def _state_with_cached_block() -> KVState:
    s = KVState.fresh(6)
    s.tables.hash_index(b"\x07" * 32)
    del s.free_queue[1]
    s.ref_cnt[1] = 1
    s.block_hash[1] = key_code(0, 0)
    s.cached[key_code(0, 0)] = (1,)
    s.req_to_blocks[0][s.tables.request_index("r")] = [1]
    return s


def test_a_consistent_state_passes_every_check() -> None:
    s = _state_with_cached_block()
    check_invariants(s, exact_ref_cnt=True)


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda s: s.ref_cnt.__setitem__(2, 1), "block 2 is in the free queue but has ref_cnt 1"),
        (lambda s: s.free_queue.pop(3), "block 3 has ref_cnt 0 but is not in the free queue"),
        (lambda s: s.free_queue.__setitem__(0, None), "the null block 0 is in the free queue"),
        (lambda s: s.ref_cnt.__setitem__(1, -1), "block 1 has negative ref_cnt -1"),
        (
            lambda s: s.block_hash.__setitem__(1, -1),
            "block 1 is cached under 07070707..(group 0) but its block_hash is None",
        ),
        (
            lambda s: s.cached.clear(),
            "block 1 has block_hash 07070707..(group 0) but is not in the cached map",
        ),
        (
            lambda s: s.cached.__setitem__(key_code(0, 1), (1,)),
            "block 1 appears twice in the cached map",
        ),
        (
            lambda s: s.block_hash.__setitem__(0, key_code(0, 0)),
            "the null block 0 has a block_hash",
        ),
        (
            lambda s: s.req_to_blocks[0].__setitem__(0, [1, 4]),
            "request 'r' group 0 holds block 4 (position 1) but its ref_cnt is 0",
        ),
    ],
)
def test_each_violation_is_named(damage, message: str) -> None:
    s = _state_with_cached_block()
    damage(s)
    with pytest.raises(
        InvariantError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
    ):
        check_invariants(s)


def test_num_free_blocks_must_match_the_queue() -> None:
    s = KVState.fresh(4)
    s.num_free_blocks = 2
    with pytest.raises(InvariantError, match="num_free_blocks is 2 but the free queue holds 3"):
        check_invariants(s)


def test_exact_ref_cnt_counts_holders() -> None:
    s = _state_with_cached_block()
    s.ref_cnt[1] = 2
    check_invariants(s)  # a second reference is legal when BlockPool is driven directly
    with pytest.raises(
        InvariantError, match="block 1 has ref_cnt 2 but 1 request block lists hold it"
    ):
        check_invariants(s, exact_ref_cnt=True)


def test_blocks_in_transit_are_excused_only_when_named() -> None:
    rec = Recorder(initial_state=KVState.fresh(6))
    rec.popleft_n([1, 2])
    rec.get_new_blocks([1, 2])
    rec.free_blocks([2, 1])
    rec.append_n([2, 1])
    t = rec.trace()
    assert t.in_transit(0) == {1, 2} and t.in_transit(1) == set()
    assert t.in_transit(2) == {2, 1} and t.in_transit(3) == set()
    with pytest.raises(InvariantError, match="block 1 has ref_cnt 0 but is not in the free queue"):
        check_invariants(t.state_at(0))
    for i in range(len(t)):
        check_invariants(t.state_at(i), in_transit=t.in_transit(i))


def test_live_manager_is_checked_including_its_linked_list() -> None:
    init_hashing()
    m = make_manager(12)
    req = make_request("r", list(range(9)))
    assert admit(m, req)
    check_invariants(m, exact_ref_cnt=True)
    m.block_pool.free_block_queue.num_free_blocks += 1
    with pytest.raises(InvariantError, match="num_free_blocks is 9 but walking the list finds 8"):
        check_invariants(m)
    m.block_pool.free_block_queue.num_free_blocks -= 1
    m.block_pool.blocks[1].next_free_block = m.block_pool.blocks[2]
    with pytest.raises(InvariantError, match="block 1 has only one free-list link"):
        check_invariants(m)
