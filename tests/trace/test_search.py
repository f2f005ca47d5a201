"""filter_events / mentions_block: block ids match, hash indexes and call ids do not."""

from __future__ import annotations

import pytest

from kvlab.core.kv_cache_utils import make_block_hash_with_group_id
from kvlab.trace import EventKind, KVState, Recorder
from kvlab.trace.search import filter_events, mentions_block

K = EventKind


def _trace():
    rec = Recorder(initial_state=KVState.fresh(8, num_groups=2))
    rec.begin_call("allocate_slots", "r", (0, 0, 0, 4, 0, 0, 0))  # group column = call id 1
    rec.popleft_n([3, 4])
    rec.get_new_blocks([3, 4])
    # hash index 0 and 1 sit in the payload next to block ids 3 and 4
    rec.cache_full_blocks(
        "r",
        1,
        0,
        2,
        [3, 4],
        [
            make_block_hash_with_group_id(b"\x00" * 32, 1),
            make_block_hash_with_group_id(b"\x01" * 32, 1),
        ],
    )
    rec.lookup(b"\x00" * 32, 1, 3)
    rec.end_call("allocate_slots", (1, 2))
    rec.evict(3, make_block_hash_with_group_id(b"\x00" * 32, 1))
    return rec.trace()


def test_block_mentions_skip_hash_indexes() -> None:
    t = _trace()
    assert mentions_block(t.cols, 3).nonzero()[0].tolist() == [1, 2, 3, 4, 6]
    assert mentions_block(t.cols, 1).nonzero()[0].tolist() == []  # only a hash index / call id


def test_filters_combine() -> None:
    t = _trace()
    assert filter_events(t, group=1).tolist() == [3, 4, 6]  # CALL rows hold call id 1: excluded
    assert filter_events(t, K.BLOCK_STORED, request="r").tolist() == [3]
    assert filter_events(t, depth=1).tolist() == [1, 2, 3, 4]
    assert filter_events(t, request="nobody").tolist() == []
    assert filter_events(t, start=5, block_id=3).tolist() == [6]
    with pytest.raises(ValueError, match="start must be >= 0"):
        filter_events(t, start=-1)
