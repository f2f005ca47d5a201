"""The shared popleft / evict / hit builders on hand-made list columns (the browser's form).

tests/playground/test_equivalence.py checks that a Trace and a LiteTrace get the same points
through them; here their rules are checked on events small enough to read.
"""

from __future__ import annotations

from kvlab.i18n import use_language
from kvlab.trace.events import EventKind as K
from kvlab.viz.predict_cache_questions import (
    Events,
    evict_question,
    find_cache_decisions,
    hit_question,
    popleft_question,
)
from kvlab.viz.predict_common import QuizPoint, ask_points

# get_new_blocks popped 5, 6, 7: 5 held no hash (counted), 6 and 7 are evicted in turn; then
# evict_blocks removes 9 (not asked: no POPLEFT_N before it).
KINDS = [K.STEP, K.POPLEFT_N, K.GET_NEW_BLOCKS, K.BLOCK_REMOVED, K.BLOCK_REMOVED,
         K.GET_NEW_BLOCKS, K.STEP, K.BLOCK_REMOVED]  # fmt: skip
A = [0, 0, 0, 6, 7, 0, 1, 9]
PAYLOADS = {1: [5, 6, 7], 2: [5], 5: [6, 7]}
EVENTS = Events(KINDS, [0] * 8, A, [0] * 8, lambda i: PAYLOADS.get(i, []))


def test_finds_each_popleft_n_and_only_the_first_eviction_of_its_loop() -> None:
    both = ("evict", "popleft")
    found = find_cache_decisions(EVENTS, range(len(KINDS)), both, [], lambda i: -1)
    assert found == [(0, 1, "popleft"), (1, 3, "evict")]
    assert find_cache_decisions(EVENTS, range(len(KINDS)), ("hit",), [], lambda i: -1) == []


def test_the_evict_question_skips_the_block_without_a_hash_and_names_the_next() -> None:
    block_hash = [-1] * 10
    block_hash[6], block_hash[7], block_hash[8] = 61, 71, 81
    with use_language("en"):
        point = evict_question(EVENTS, 1, 3, [8, 2], block_hash, "ab12cd34")
    assert point.values[point.answer] == 6
    # the truth, popped[0], the cached head of the queue, the last popped
    assert sorted(point.values) == [5, 6, 7, 8]
    assert "block 5 holds no hash, so block 6 (hash ab12cd34) is first (block 7 next)" in (
        point.explanation
    )


def test_popleft_asks_for_the_queue_head_and_names_the_evicted_cached_blocks() -> None:
    block_hash = [-1] * 10
    block_hash[6] = 61
    with use_language("en"):
        point = popleft_question(EVENTS, 0, 1, {5: None, 6: None, 7: None, 2: None, 3: None},
                                 block_hash, ("allocate_slots", "a"))  # fmt: skip
    assert point.values[point.answer] == [5, 6, 7]
    assert point.question.startswith("allocate_slots for request 'a' needs 3 new blocks")
    assert point.explanation.endswith("Block 6 still holds a block_hash and is evicted from the "
                                      "prefix cache now.")  # fmt: skip


def test_hit_counts_the_lookups_up_to_the_first_miss() -> None:
    events = Events([K.CALL_BEGIN, K.LOOKED_UP, K.LOOKED_UP, K.LOOKED_UP, K.CALL_END], [0] * 5,
                    [0] * 5, [0, 3, 4, -1, 0], lambda i: [])  # fmt: skip
    config = {"groups": [{"block_size": 4, "manager": "FullAttentionManager"}]}
    with use_language("en"):
        point = hit_question(events, -1, 4, "r", {"num_tokens": 14, "num_block_hashes": 3},
                             {"num_new_computed_tokens": 8}, config, [])  # fmt: skip
    assert point.values == (0, 8, 12, 13) and point.values[point.answer] == 8
    assert "block 2's block_hash is not in cached_block_hash_to_block" in point.explanation


def _point(kind: str, ask: int, reveal: int) -> QuizPoint:
    return QuizPoint(kind, ask, reveal, "?", ("x", "y"), (0, 1), 0, ".")


def test_ask_points_drops_hits_asked_turn_by_turn_and_overlapping_windows() -> None:
    found = [(0, 5, "hit"), (1, 3, "fixed_point"), (4, 6, "popleft"), (6, 9, "popleft")]
    replayed = []
    points = ask_points(found, ("fixed_point", "hit", "popleft"), lambda r: 5,
                        lambda start, stop: replayed.append((start, stop)), _point)  # fmt: skip
    # hit (its call ends at 5) is asked by its turn; [4, 6] overlaps nothing kept before it
    assert [(p.kind, p.ask, p.reveal) for p in points] == [
        ("fixed_point", 1, 3), ("popleft", 4, 6), ("popleft", 6, 9)]  # fmt: skip
    assert replayed == [(0, 2), (2, 5), (5, 7)]
    points = ask_points(found, ("hit", "popleft"), lambda r: 5, lambda *_: None, _point)
    assert [(p.kind, p.reveal) for p in points] == [("hit", 5), ("popleft", 9)]
