"""KV events: vLLM's fields, order and defaults, hashing, to_dict/from_dict (msgspec arrays too)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from kvlab.core.kv_events import (
    MEDIUM_GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventBatch,
    KVCacheEvent,
    KVEventBatch,
)


def stored(**kw):
    base = dict(
        block_hashes=[11, 12],
        parent_block_hash=10,
        token_ids=[1, 2, 3, 4],
        block_size=2,
        lora_id=None,
        medium=MEDIUM_GPU,
        lora_name=None,
    )
    base.update(kw)
    return BlockStored(**base)


def test_field_names_and_order_match_vllm():
    assert [f.name for f in fields(BlockStored)] == [
        "block_hashes",
        "parent_block_hash",
        "token_ids",
        "block_size",
        "lora_id",
        "medium",
        "lora_name",
        "extra_keys",
        "group_idx",
        "kv_cache_spec_kind",
        "kv_cache_spec_sliding_window",
    ]
    assert [f.name for f in fields(BlockRemoved)] == ["block_hashes", "medium", "group_idx"]
    assert [f.name for f in fields(AllBlocksCleared)] == []
    assert [f.name for f in fields(KVEventBatch)] == ["ts", "events", "data_parallel_rank"]
    assert MEDIUM_GPU == "GPU"


def test_events_are_hashable_and_comparable():
    a, b = stored(extra_keys=[("x",), None]), stored(extra_keys=[("x",), None])
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert stored(lora_name="n") != stored() and hash(stored(lora_name="n")) == hash(
        stored()
    )  # as vLLM
    assert hash(BlockRemoved([1], MEDIUM_GPU, 0)) == hash(BlockRemoved([1], MEDIUM_GPU, 0))
    assert (
        AllBlocksCleared() == AllBlocksCleared()
        and len({AllBlocksCleared(), AllBlocksCleared()}) == 1
    )
    ev = stored()
    ev.kv_cache_spec_kind = "full_attention"  # the manager fills these in after the fact
    assert ev.kv_cache_spec_kind == "full_attention"


@pytest.mark.parametrize(
    "event",
    [
        stored(extra_keys=[("a", 0), None], group_idx=1),
        BlockRemoved([b"\x01" * 8], MEDIUM_GPU, 3),
        AllBlocksCleared(),
    ],
)
def test_to_dict_round_trip(event):
    d = event.to_dict()
    assert d["type"] == type(event).__name__
    assert KVCacheEvent.from_dict(d) == event


def test_from_msgspec_tagged_arrays_with_trailing_defaults_omitted():
    assert (
        KVCacheEvent.from_dict(["BlockStored", [11, 12], 10, [1, 2, 3, 4], 2, None, "GPU", None])
        == stored()
    )
    assert KVCacheEvent.from_dict(["BlockRemoved", [7], "GPU", 2]) == BlockRemoved([7], "GPU", 2)
    assert KVCacheEvent.from_dict(["AllBlocksCleared"]) == AllBlocksCleared()
    with pytest.raises(ValueError, match="unknown KV cache event type 'Nope'"):
        KVCacheEvent.from_dict(["Nope"])
    with pytest.raises(ValueError, match="BlockRemoved has 3 fields, got 4"):
        KVCacheEvent.from_dict(["BlockRemoved", [7], "GPU", 2, 9])
    with pytest.raises(ValueError, match="cannot build BlockRemoved"):
        KVCacheEvent.from_dict({"type": "BlockRemoved", "medium": "GPU"})


def test_batch_round_trip_and_array_form():
    batch = KVEventBatch(ts=1.5, events=[stored(), AllBlocksCleared()], data_parallel_rank=0)
    again = KVEventBatch.from_dict(batch.to_dict())
    assert isinstance(again, KVEventBatch) and again == batch
    arr = EventBatch.from_dict([2.0, [["BlockRemoved", [1], "GPU"]]])
    assert (
        arr.ts == 2.0
        and arr.events == [BlockRemoved([1], "GPU")]
        and arr.data_parallel_rank is None
    )
    with pytest.raises(ValueError, match="2 or 3 items"):
        EventBatch.from_dict([1.0])


def test_reads_a_vllm_msgpack_batch():
    # msgspec.msgpack.decode(msgspec.msgpack.encode(batch)) of a vLLM 0.22.1 KVEventBatch, printed
    # in the oracle venv: array_like structs, tagged events, tuples decoded as lists.
    raw = [1.25, [
        ["BlockStored", [1, 2], None, [1, 2, 3, 4], 2, None, "GPU", None, [["a", ["img", 0]], None],
         0, None, None],
        ["BlockStored", [3], 2, [5, 6], 2, 1, "GPU", "x", None, None, None, None],
        ["BlockRemoved", [9], "GPU", 1],
        ["AllBlocksCleared"],
    ], None]  # fmt: skip
    batch = KVEventBatch.from_dict(raw)
    assert batch.ts == 1.25 and batch.data_parallel_rank is None
    assert batch.events == [
        stored(block_hashes=[1, 2], parent_block_hash=None, extra_keys=[("a", ("img", 0)), None],
               group_idx=0),
        stored(block_hashes=[3], parent_block_hash=2, token_ids=[5, 6], lora_id=1, lora_name="x"),
        BlockRemoved([9], "GPU", 1),
        AllBlocksCleared(),
    ]  # fmt: skip
    assert len(set(batch.events)) == 4  # extra keys came back as (hashable) tuples
