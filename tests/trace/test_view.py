"""Event/Call views and the field decoders."""

from __future__ import annotations

from kvlab.trace import EventKind, KVState, Recorder
from kvlab.trace.events import VERBATIM
from kvlab.trace.view import decode_call, short_hash

K = EventKind


def test_decode_call_known_unknown_and_verbatim() -> None:
    assert decode_call("get_computed_blocks", 9, 2, [], False) == {
        "num_tokens": 9,
        "num_block_hashes": 2,
    }
    assert decode_call("allocate_slots", 1, 2, [], True) == {
        "allocated": 1,
        "num_blocks_to_allocate": 2,
    }
    assert decode_call("evict_blocks", VERBATIM, 2, [3, 4], False) == {"block_ids": [3, 4]}
    assert decode_call("free", 0, 0, [], False) == {}
    assert decode_call("mystery", VERBATIM, 2, [5, 6], True) == {"result": [5, 6]}


def test_event_views_decode_every_kind() -> None:
    rec = Recorder(initial_state=KVState.fresh(6, num_groups=2))
    rec.fixed_point(0, [0], 16, 16, False)  # attention group 0's turn: iteration 0
    rec.fixed_point(0, [1], 16, 8, True)  # group 0's turn again: iteration 1 starts at 16
    rec.lookup(b"\x0f" * 32, 1, -1)
    rec.req_blocks_null("r", 1, [2, 1])
    rec.reset()
    t = rec.trace()
    fixed, look, nulled, reset = t[1], t[2], t[3], t[4]
    assert fixed.fields == {
        "iteration": 1,
        "hit_length_in": 16,
        "hit_length_out": 8,
        "reused": True,
        "kv_cache_group_ids": [1],
        "block_ids": None,  # recorded without block lists, as before they existed
    }
    assert fixed.group == 1 and fixed.request is None
    assert look.fields == {"hash": "0f0f0f0f", "hash_index": 0, "block_id": -1, "hit": False}
    assert nulled.fields == {"indices": [2, 1]} and nulled.request == "r"
    assert reset.fields == {} and reset.group is None
    assert str(look).startswith("#2 step 0 LOOKED_UP group=1 hash=0f0f0f0f")


def test_long_lists_are_shortened_in_text() -> None:
    rec = Recorder(initial_state=KVState.fresh(40))
    rec.popleft_n(list(range(1, 31)))
    text = str(rec.trace()[0])
    assert text.endswith("... (30)]") and "block_ids=[1, 2," in text
    assert short_hash(b"\x01\x02\x03\x04\x05") == "01020304"


def test_fixed_point_block_lists_decode_and_old_payloads_still_load(tmp_path) -> None:
    from kvlab.trace import load_trace

    rec = Recorder(initial_state=KVState.fresh(12, num_groups=3))
    rec.fixed_point(0, [1, 2], 16, 8, False, [[0, 7], [0, 9]])
    rec.fixed_point(1, [0], 8, 8, True, [[]])
    rec.fixed_point(2, [2, 1], 8, 8, False)  # the pre-block-list layout
    t = rec.trace()
    # flags = reused | (num groups << 1); then group ids, counts, ids.
    assert t.payload(0) == [8, 4, 1, 2, 2, 2, 0, 7, 0, 9]
    assert t.payload(1) == [8, 3, 0, 0]
    assert t.payload(2) == [8, 0, 2, 1]
    path = tmp_path / "fp.kvtrace"
    t.save(path)
    loaded = load_trace(path)
    fields = [loaded[i].fields for i in range(3)]
    assert fields[0]["kv_cache_group_ids"] == [1, 2] and fields[0]["reused"] is False
    assert fields[0]["block_ids"] == [[0, 7], [0, 9]]
    assert fields[1]["reused"] is True and fields[1]["block_ids"] == [[]]
    assert fields[2]["kv_cache_group_ids"] == [2, 1] and fields[2]["block_ids"] is None
    assert "block_ids=[[0, 7], [0, 9]]" in str(loaded[0])
