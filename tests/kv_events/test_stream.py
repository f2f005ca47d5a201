"""Reading vLLM KV events: kvlab's own KVCacheManager emits them, they are encoded in vLLM's
wire format, read back, and the rebuilt cached set equals the live manager's after every batch."""

from __future__ import annotations

import sys
import uuid

import pytest

from kvlab.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from kvlab.core.kv_cache_manager import KVCacheManager
from kvlab.core.kv_cache_utils import get_request_block_hasher, init_none_hash, sha256
from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
from kvlab.core.request import Request, SamplingParams
from kvlab.kv_events.stream import (
    KVEventTraceBuilder,
    cached_key_counts,
    manager_cached_key_counts,
    peak_cached_blocks,
    read_kv_event_file,
)
from kvlab.kv_events.wire import (
    decode_kv_event_batch,
    encode_kv_event_batch,
    read_kv_event_messages,
    write_kv_event_messages,
)
from kvlab.viz import block_cells

BS = 4


def _manager() -> KVCacheManager:
    if not hasattr(sys.modules["kvlab.core.kv_cache_utils"], "NONE_HASH"):
        init_none_hash(sha256)  # NOTE: process-wide; never re-set it under other tests
    spec = FullAttentionSpec(block_size=BS, num_kv_heads=1, head_size=1, dtype="float32")
    cfg = KVCacheConfig(6, [], [KVCacheGroupSpec(["l0"], spec)])
    return KVCacheManager(cfg, max_model_len=256, hash_block_size=BS, enable_kv_cache_events=True)


def _admit(mgr: KVCacheManager, rid: str, tokens: list[int]) -> Request:
    r = Request(rid, tokens, SamplingParams(max_tokens=8), None,
                block_hasher=get_request_block_hasher(BS, sha256))  # fmt: skip
    blocks, hit = mgr.get_computed_blocks(r)
    assert mgr.allocate_slots(r, r.num_tokens - hit, hit, blocks) is not None
    r.num_computed_tokens = r.num_tokens
    return r


def recorded_run() -> list[tuple[KVEventBatch, object]]:
    """Six batches: stores, a shared prefix, evictions, a reset, and stores again; each with
    the live manager's cached counts right after it."""
    mgr = _manager()
    out = []

    def batch(ts: float) -> None:
        out.append((KVEventBatch(ts, mgr.take_events()), manager_cached_key_counts(mgr)))

    a = _admit(mgr, "a", list(range(10)))
    batch(1.0)
    b = _admit(mgr, "b", [*range(8), 50, 51, 52, 53, 54])
    batch(2.0)
    mgr.free(a)
    mgr.free(b)
    batch(3.0)
    c = _admit(mgr, "c", list(range(100, 120)))  # 5 blocks: evicts every cached one
    batch(4.0)
    mgr.free(c)
    assert mgr.reset_prefix_cache()
    batch(5.0)
    _admit(mgr, "d", list(range(10)))
    batch(6.0)
    kinds = [type(e).__name__ for bt, _ in out for e in bt.events]
    assert kinds.count("BlockRemoved") >= 1 and kinds.count("AllBlocksCleared") == 1
    return out


def _check_rebuilt(builder: KVEventTraceBuilder, run) -> None:
    trace = builder.trace()
    steps = trace.steps()
    for i, (_, live) in enumerate(run):
        last = int((steps <= i).nonzero()[0][-1])
        assert cached_key_counts(trace.state_at(last)) == live, f"after batch {i}"
    assert builder.num_unknown_removed == 0


def test_builder_rebuilds_the_cached_set_after_every_batch() -> None:
    run = recorded_run()
    builder = KVEventTraceBuilder(num_blocks=5)
    for batch, _ in run:
        builder.add_batch(batch)
    _check_rebuilt(builder, run)
    trace = builder.trace()
    assert trace.call_names.count("BlockStored") == 1
    cells = block_cells(trace, len(trace) - 1)
    assert sum(c.status.value == "evictable" for c in cells) == sum(run[-1][1].values()) == 2


def test_jsonl_recording_needs_no_msgspec(tmp_path) -> None:
    run = recorded_run()
    path = tmp_path / "events.jsonl"
    n = write_kv_event_messages(path, ((b"kv", i, b) for i, (b, _) in enumerate(run)))
    assert n == 6
    assert [seq for seq, _ in read_kv_event_messages(path)] == list(range(6))
    _check_rebuilt(read_kv_event_file(path), run)


def test_vllm_wire_format_round_trip(tmp_path) -> None:
    msgspec = pytest.importorskip("msgspec")
    run = recorded_run()
    payloads = [encode_kv_event_batch(b) for b, _ in run]
    # the layout vLLM's msgspec structs give: [ts, [tagged event arrays], dp_rank]; msgspec
    # writes every field of an array_like struct (omit_defaults only shortens dict-like ones)
    raw = [msgspec.msgpack.decode(p) for p in payloads]
    assert raw[0][0] == 1.0 and raw[0][2] is None and len(raw[0]) == 3
    stored = raw[0][1][0]
    assert stored[0] == "BlockStored" and len(stored) == 12
    assert stored[3] == list(range(8)) and stored[4] == BS and stored[6] == "GPU"
    assert stored[9:] == [0, "full_attention", None]  # group_idx, spec kind, sliding window
    removed = next(e for r in raw for e in r[1] if e[0] == "BlockRemoved")
    assert len(removed) == 4 and removed[2:] == ["GPU", 0]
    assert ["AllBlocksCleared"] in raw[4][1]
    expected = KVEventBatch(2.5, [BlockRemoved([7], "GPU"), AllBlocksCleared()])
    hand = msgspec.msgpack.encode([2.5, [["BlockRemoved", [7], "GPU", None], ["AllBlocksCleared"]],
                                   None])  # fmt: skip
    assert encode_kv_event_batch(expected) == hand
    assert decode_kv_event_batch(hand) == expected
    short = msgspec.msgpack.encode([2.5, [["BlockRemoved", [7], "GPU"]]])  # defaults left out
    assert decode_kv_event_batch(short).events == [BlockRemoved([7], "GPU")]
    path = tmp_path / "events.kvev"
    write_kv_event_messages(path, ((b"", 10 + i, p) for i, p in enumerate(payloads)))
    assert [seq for seq, _ in read_kv_event_messages(path)] == list(range(10, 16))
    builder = read_kv_event_file(path)
    assert builder.num_blocks == 5 and [s for s, _ in builder.batch_seqs] == list(range(10, 16))
    _check_rebuilt(builder, run)


def test_decoding_tolerates_newer_fields_and_rejects_garbage(tmp_path) -> None:
    msgspec = pytest.importorskip("msgspec")
    newer = msgspec.msgpack.encode([1.0, [["BlockRemoved", [7], "GPU", 0, "a-new-field"]], 3])
    batch = decode_kv_event_batch(newer)
    assert batch.events == [BlockRemoved([7], "GPU", 0)] and batch.data_parallel_rank == 3
    with pytest.raises(ValueError, match="not a KV event batch"):
        decode_kv_event_batch(msgspec.msgpack.encode({"x": 1}))
    with pytest.raises(ValueError, match="unknown KV cache event type"):
        decode_kv_event_batch(msgspec.msgpack.encode([1.0, [["Nope"]]]))
    bad = tmp_path / "bad.kvev"
    bad.write_bytes(b"KVEV1\n\x00\x00\x00\x05ab")
    with pytest.raises(ValueError, match="truncated"):
        list(read_kv_event_messages(bad))
    (tmp_path / "foreign.kvev").write_bytes(b"hello")
    with pytest.raises(ValueError, match="not a .kvev recording"):
        list(read_kv_event_messages(tmp_path / "foreign.kvev"))


def test_builder_slots_duplicates_unknown_removals_and_capacity() -> None:
    b = KVEventTraceBuilder(num_blocks=3, num_groups=2)
    b.add_batch(KVEventBatch(0.0, [BlockStored([7, 8], None, [], 4, None, "GPU", None)]))
    b.add_batch(KVEventBatch(1.0, [BlockStored([7], 8, [], 4, None, "GPU", None, group_idx=1)]))
    b.add_batch(KVEventBatch(2.0, [BlockRemoved([7], "GPU"), BlockRemoved([99], "GPU")]))
    t = b.trace()
    s = t.state_at(len(t) - 1)
    assert b.num_unknown_removed == 1
    # slot 0 held 7 (group 0) and is free again; slot 1 holds 8; slot 2 holds 7 of group 1
    assert s.block_hash_bytes(0) is None and s.block_hash_bytes(1)[:8] == (8).to_bytes(8, "big")
    assert s.block_hash_bytes(2)[-4:] == (1).to_bytes(4, "big")
    before = len(b.trace())
    with pytest.raises(ValueError, match="more than num_blocks=3"):
        b.add_event(BlockStored([1, 2, 3], None, [], 4, None, "GPU", None))
    with pytest.raises(ValueError, match=r"group_idx must be None or an int in \[0, 1\]; pass"):
        b.add_event(BlockRemoved([1], "GPU", 5))
    assert len(b.trace()) == before
    with pytest.raises(ValueError, match="num_blocks"):
        KVEventTraceBuilder(0)


def test_live_zmq_socket() -> None:
    zmq = pytest.importorskip("zmq")
    pytest.importorskip("msgspec")
    from kvlab.kv_events.subscriber import KVEventSubscriber

    run = recorded_run()
    ctx = zmq.Context()
    endpoint = f"inproc://kvlab-{uuid.uuid4().hex}"
    pub = ctx.socket(zmq.XPUB)
    pub.bind(endpoint)
    sub = KVEventSubscriber(endpoint, topic="kv", context=ctx)
    try:
        assert pub.poll(5000), "the subscription never reached the publisher"
        assert pub.recv() == b"\x01kv"
        for i, (batch, _) in enumerate(run):
            pub.send_multipart((b"kv", i.to_bytes(8, "big"), encode_kv_event_batch(batch)))
        got = list(sub.batches(timeout_ms=500))
    finally:
        sub.close()
        pub.close(linger=0)
        ctx.term()
    assert [seq for seq, _ in got] == list(range(6))
    builder = KVEventTraceBuilder(num_blocks=5)
    for seq, batch in got:
        builder.add_batch(batch, seq)
    _check_rebuilt(builder, run)


def _snapshot(b: KVEventTraceBuilder):
    return (len(b.trace()), b.num_batches, list(b.batch_seqs), sorted(b._free),
            {k: list(v) for k, v in b._slots.items()}, {t: dict(c) for t, c in b.tiers.items()},
            dict(b.unknown_removed))  # fmt: skip


def test_offloaded_tiers_stay_out_of_the_gpu_view() -> None:
    def stored(hashes, medium, group=None):
        return BlockStored(hashes, None, [], 4, None, medium, None, group_idx=group)

    b = KVEventTraceBuilder(num_blocks=2, num_groups=2)
    b.add_batch(KVEventBatch(0.0, [stored([7, 8], "GPU"), stored([7, 8, 9], "CPU"),
                                   stored([5], "cpu", 1), stored([6], "STORAGE")]))  # fmt: skip
    b.add_batch(KVEventBatch(1.0, [BlockRemoved([8], "GPU"), BlockRemoved([8], "CPU"),
                                   BlockRemoved([99], "STORAGE"), AllBlocksCleared(),
                                   stored([1], None)]))  # fmt: skip
    def key(h: int) -> bytes:
        return h.to_bytes(8, "big")

    assert {t: dict(c) for t, c in b.tiers.items()} == {
        "CPU": {(key(7), 0): 1, (key(9), 0): 1, (key(5), 1): 1},
        "STORAGE": {(key(6), 0): 1},
    }
    assert b.unknown_removed == {"STORAGE": 1} and b.num_unknown_removed == 1
    t = b.trace()
    # the GPU view held 7 and 8 (2 slots: the 3 CPU blocks never took one), then only 1
    assert cached_key_counts(t.state_at(3)) == {(key(7), 0): 1, (key(8), 0): 1}
    assert cached_key_counts(t.state_at(len(t) - 1)) == {(key(1), 0): 1}
    assert [c.name for c in t.calls()] == ["BlockStored", "BlockRemoved", "AllBlocksCleared",
                                           "BlockStored"]  # fmt: skip
    batches = [KVEventBatch(0.0, [stored([1, 2], "GPU"), stored([3, 4, 5], "CPU")])]
    assert peak_cached_blocks(batches) == (2, 1)


@pytest.mark.parametrize(("bad_event", "message"), [
    (BlockStored([1, 2], None, [], 4, None, "GPU", None), "event 2 .BlockStored.: more than"),
    (BlockRemoved([1], "GPU", 2**40), r"event 2 .BlockRemoved.: group_idx must be None or an int"),
    (BlockRemoved([1.5], "GPU"), "event 2 .BlockRemoved.: block_hashes: a block hash is an int"),
    (BlockRemoved([1], 5), "medium must be a str or None, got 5"),
    ("BlockStored", "event 2 .str.: not a KV cache event; allowed: BlockStored"),
])  # fmt: skip
def test_a_refused_batch_changes_nothing(bad_event, message) -> None:
    b = KVEventTraceBuilder(num_blocks=3)
    b.add_batch(KVEventBatch(0.0, [BlockStored([7], None, [], 4, None, "GPU", None)]), seq=4)
    before = _snapshot(b)
    batch = KVEventBatch(1.0, [BlockRemoved([7], "GPU"),
                               BlockStored([8, 9], None, [], 4, None, "CPU", None), bad_event])
    batch.events[1] = BlockStored([8, 9], None, [], 4, None, "GPU", None)
    with pytest.raises(ValueError, match=message):
        b.add_batch(batch, seq=5)
    assert _snapshot(b) == before
    for ts, seq, text in ((float("nan"), 5, "finite number"), (1.0, -1, "seq must be an int")):
        with pytest.raises(ValueError, match=text):
            b.add_batch(KVEventBatch(ts, []), seq=seq)
    assert _snapshot(b) == before
    b.add_batch(KVEventBatch(2.0, [BlockRemoved([7], "GPU")]), seq=5)
    assert b.batch_seqs == [(4, 0.0), (5, 2.0)]
    assert sorted(set(b.trace().steps().tolist())) == [0, 1]


def test_peak_refuses_huge_groups_before_sizing() -> None:
    with pytest.raises(ValueError, match=r"group_idx must be None or an int in \[0, 4095\]"):
        peak_cached_blocks([KVEventBatch(0.0, [BlockRemoved([1], "GPU", 2**40)])])
    with pytest.raises(ValueError, match="num_groups must be at most 1024 .the most groups a kvlab"):
        KVEventTraceBuilder(1, num_groups=1025)
    b = KVEventTraceBuilder(1, num_groups=1024)
    b.add_batch(KVEventBatch(0.0, [BlockStored([5], None, [], 4, None, "GPU", None, None, 1023)]))
    assert cached_key_counts(b.trace().state_at(len(b.trace()) - 1)) == {
        ((5).to_bytes(8, "big"), 1023): 1}
