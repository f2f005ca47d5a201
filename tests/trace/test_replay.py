"""Replay on hand-built event streams: exact free-queue orders, cached-map orders, request lists."""

from __future__ import annotations

import pytest

from kvlab.core.kv_cache_utils import make_block_hash_with_group_id as key
from kvlab.trace import EventKind, KVState, Recorder, ReplayError
from kvlab.trace.replay import apply_event
from kvlab.trace.tables import key_code

K = EventKind
HA, HB = b"\xaa" * 32, b"\xbb" * 32


def _recorder(num_blocks: int = 8, groups: int = 1, interval: int = 4096) -> Recorder:
    return Recorder(initial_state=KVState.fresh(num_blocks, groups), checkpoint_interval=interval)


def _allocate_and_free(rec: Recorder) -> None:
    rec.popleft_n([1, 2, 3])  # 0: queue 4 5 6 7
    rec.get_new_blocks([1, 2, 3])  # 1
    rec.req_blocks_add("r", 0, [1, 2, 3])
    rec.cache_full_blocks("r", 0, 0, 2, [1, 2], [key(HA, 0), key(HB, 0)])
    rec.req_free("r", 0)
    rec.free_blocks([3, 2, 1])  # 5: tail first
    rec.append_n([3, 2, 1])  # 6: queue 4 5 6 7 3 2 1


def test_free_queue_order_and_ref_counts_step_by_step() -> None:
    rec = _recorder()
    _allocate_and_free(rec)
    t = rec.trace()
    assert t.state_at(-1).free_queue_order() == [1, 2, 3, 4, 5, 6, 7]
    assert t.state_at(0).free_queue_order() == [4, 5, 6, 7]
    assert t.state_at(0).ref_cnt[1:4] == [0, 0, 0]
    assert t.state_at(1).ref_cnt[1:4] == [1, 1, 1]
    assert t.state_at(2).blocks_of("r") == [1, 2, 3]
    assert t.state_at(5).ref_cnt[1:4] == [0, 0, 0]
    assert t.state_at(5).blocks_of("r") == []
    assert t.state_at(6).free_queue_order() == [4, 5, 6, 7, 3, 2, 1]


def test_cache_hit_remove_and_eviction_by_reuse() -> None:
    rec = _recorder()
    _allocate_and_free(rec)
    rec.remove(2)  # 7: touch a cached free block
    rec.touch([2])  # 8
    rec.popleft_n([4, 5, 6, 7, 3])  # 9
    rec.get_new_blocks([4, 5, 6, 7, 3])
    rec.popleft(1)  # 11: the LRU cached block is reused
    rec.evict(1, key(HA, 0))  # 12
    t = rec.trace()
    s = t.state_at(8)
    assert s.free_queue_order() == [4, 5, 6, 7, 3, 1] and s.ref_cnt[2] == 1
    s = t.state_at(12)
    assert s.free_queue_order() == []
    assert s.block_hash_bytes(1) is None and s.block_hash_bytes(2) == key(HB, 0)
    assert {k: list(v) for k, v in s.canonical()["cached"].items()} == {key(HB, 0): [2]}


def test_duplicate_keys_keep_insertion_order_and_evict_one() -> None:
    rec = _recorder()
    rec.popleft_n([1, 2, 3])
    rec.get_new_blocks([1, 2, 3])
    rec.cache_full_blocks("x", 0, 0, 1, [3], [key(HA, 0)])
    rec.cache_full_blocks("y", 0, 0, 1, [1], [key(HA, 0)])  # same content, second block
    rec.cache_full_blocks("z", 0, 0, 1, [2], [key(HA, 0)])
    rec.evict(1, key(HA, 0))
    t = rec.trace()
    code = key_code(0, 0)
    assert t.state_at(4).cached[code] == (3, 1, 2)  # a lookup returns block 3
    assert t.state_at(5).cached[code] == (3, 2)
    assert t.state_at(5).block_hash[1] == -1


def test_groups_are_separate_keys_and_reset_clears_everything() -> None:
    rec = _recorder(groups=2)
    rec.popleft_n([1, 2])
    rec.get_new_blocks([1, 2])
    rec.cache_full_blocks("r", 0, 0, 1, [1], [key(HA, 0)])
    rec.cache_full_blocks("r", 1, 0, 1, [2], [key(HA, 1)])
    rec.free_blocks([1, 2])
    rec.append_n([1, 2])
    rec.reset()
    t = rec.trace()
    s = t.state_at(3)
    assert s.canonical()["cached"] == {key(HA, 0): [1], key(HA, 1): [2]}
    end = t.final_state()
    assert end.cached == {} and end.block_hash == [-1] * 8


def test_sliding_window_nulls_and_frees() -> None:
    rec = _recorder()
    rec.popleft_n([1, 2, 3])
    rec.get_new_blocks([1, 2, 3])
    rec.req_blocks_add("r", 0, [1, 2, 3])
    rec.req_blocks_null("r", 0, [1, 0])  # walked back from the last skipped block
    rec.free_blocks([2, 1])
    rec.append_n([2, 1])
    s = rec.trace().final_state()
    assert s.blocks_of("r") == [0, 0, 3]
    assert s.free_queue_order() == [4, 5, 6, 7, 2, 1]


def test_checkpoints_and_backward_scrubbing_agree_with_a_fresh_replay() -> None:
    rec = _recorder(interval=3)
    _allocate_and_free(rec)
    rec.remove(2)
    rec.touch([2])
    t = rec.trace()
    reference: list[dict] = []
    t.check_replay(lambda state, i: reference.append(state.canonical()))  # the slow, checked path
    order = list(range(len(t) - 1, -1, -1)) + [4, 0, 8, 2, 8]
    for i in order:
        assert t.state_at(i).canonical() == reference[i], i
    assert sorted(t._checkpoints) == [0, 3, 6, 9]


def test_state_at_returns_independent_copies() -> None:
    rec = _recorder()
    _allocate_and_free(rec)
    t = rec.trace()
    s = t.state_at(1)
    s.ref_cnt[1] = 99
    s.free_queue.clear()
    assert t.state_at(1).ref_cnt[1] == 1 and t.state_at(1).free_queue_order() == [4, 5, 6, 7]


def test_state_at_range_is_checked() -> None:
    t = _recorder().trace()
    assert t.state_at(-1).free_queue_order() == [1, 2, 3, 4, 5, 6, 7]
    with pytest.raises(IndexError, match="need -1 <= i < 0"):
        t.state_at(0)


@pytest.mark.parametrize(
    "events,message",
    [
        ([(K.POPLEFT, 0, -1, 3, 0, [])], "POPLEFT of block 3 but the head is block 1"),
        ([(K.POPLEFT_N, 0, -1, 0, 0, [2, 1])], "POPLEFT_N of"),
        ([(K.POPLEFT_N, 0, -1, 0, 0, [1]), (K.REMOVE, 0, -1, 1, 0, [])], "REMOVE of block 1"),
        ([(K.APPEND, 0, -1, 4, 0, [])], "already in the free queue"),
        ([(K.BLOCK_REMOVED, 0, -1, 1, 0, [])], "not cached under that key"),
        (
            [(K.BLOCK_STORED, 0, 0, 0, 1, [1, 0]), (K.BLOCK_STORED, 0, 0, 0, 1, [1, 0])],
            "already has a hash",
        ),
    ],
)
def test_apply_event_names_the_broken_precondition(events: list, message: str) -> None:
    state = KVState.fresh(8)
    with pytest.raises(ReplayError, match=message):
        for ev in events:
            apply_event(state, *ev)


def test_check_replay_reports_the_first_bad_event() -> None:
    rec = _recorder()
    rec.popleft_n([1])
    rec.append(2)  # block 2 is still queued: a damaged trace
    with pytest.raises(ReplayError, match="event #1: APPEND"):
        rec.trace().check_replay()


def test_fast_replay_fails_loudly_on_damage() -> None:
    rec = _recorder()
    rec.popleft_n([1])
    rec.remove(1)  # not in the queue any more
    with pytest.raises(ReplayError, match="replaying events"):
        rec.trace().final_state()


def test_non_mutating_events_change_nothing() -> None:
    rec = _recorder()
    rec.mark_step(1)
    rec.begin_call("get_computed_blocks", "r", (9, 2))
    rec.lookup(HA, 0, -1)
    rec.fixed_point(0, [0], 8, 0, False)
    rec.end_call("get_computed_blocks", (0,))
    t = rec.trace()
    assert t.final_state() == t.initial_state


def test_stepping_a_state_with_rows_matches_state_at() -> None:
    rec = _recorder()
    _allocate_and_free(rec)
    t = rec.trace()
    state = t.initial_state.copy()
    for i in range(len(t)):
        state.apply(*t.row(i))
        assert state == t.state_at(i)
    assert t.row(0) == (int(K.POPLEFT_N), 0, -1, 0, 0, [1, 2, 3])
