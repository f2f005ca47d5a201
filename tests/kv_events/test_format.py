"""vLLM's KV-event payloads: both wire forms decoded, every field checked, the encoder's layouts
per release, and the versions table."""

from __future__ import annotations

import math
import tracemalloc

import msgspec
import pytest

from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
from kvlab.kv_events.format import (
    END_SEQ,
    MAX_GROUP_IDX,
    KVEventFormatError,
    check_kv_event_batch,
    decode_kv_event_payload,
    decode_seq_frame,
    encode_kv_event_payload,
    encode_seq_frame,
)
from kvlab.kv_events.stream import read_kv_event_file
from kvlab.kv_events.versions import (
    FIELDS,
    FIELDS_SINCE,
    MEDIA_SINCE,
    WIRE_CHANGES,
    fields_in,
    form_of,
)
from kvlab.kv_events.wire import read_kv_event_messages, write_kv_event_messages

enc = msgspec.msgpack.encode
STORED_0221 = ["BlockStored", [7, 8], None, [1, 2, 3, 4, 5, 6, 7, 8], 4, None, "GPU", None,
               None, 0, "full_attention", None]  # fmt: skip
STORED_MAP = {"type": "BlockStored", "block_hashes": [7, 8], "parent_block_hash": None,
              "token_ids": [1, 2, 3, 4, 5, 6, 7, 8], "block_size": 4, "lora_id": None,
              "medium": "GPU", "lora_name": None, "group_idx": 0,
              "kv_cache_spec_kind": "full_attention"}  # fmt: skip
STORED = BlockStored([7, 8], None, [1, 2, 3, 4, 5, 6, 7, 8], 4, None, "GPU", None, None, 0,
                     "full_attention", None)  # fmt: skip


def test_versions_table() -> None:
    # read from each release's vllm/distributed/kv_events.py (see the module docstring)
    assert fields_in("BlockStored", "0.22.1") == FIELDS["BlockStored"][:11]
    assert fields_in("BlockStored", "0.25.1") == FIELDS["BlockStored"][:11]
    assert fields_in("BlockStored", "0.26.0")[11:] == ("locality",)
    assert fields_in("BlockStored", "0.29.0")[11:] == ("locality", "ownership")
    assert fields_in("BlockStored", "0.32.0")[11:] == ("locality", "ownership", "session_id")
    assert fields_in("BlockStored", "0.33.0") == FIELDS["BlockStored"]
    assert fields_in("BlockRemoved", "0.28.0") == ("block_hashes", "medium", "group_idx",
                                                   "locality")  # fmt: skip
    assert fields_in("AllBlocksCleared", "0.33.0") == ()
    assert [form_of(v) for v in ("0.22.1", "0.23.0", "0.24.0", "0.33.0")] == [
        "array", "array", "map", "map"]  # fmt: skip
    assert FIELDS_SINCE["BlockStored"] == {"locality": "0.26.0", "ownership": "0.29.0",
                                           "session_id": "0.30.0",
                                           "lookahead_token_ids": "0.33.0"}  # fmt: skip
    assert MEDIA_SINCE == {"GPU": "0.22.1", "CPU": "0.26.0", "FS": "0.26.0", "OBJ": "0.26.0",
                           "STORAGE": "0.27.0"}  # fmt: skip
    releases = [tuple(map(int, v.split("."))) for v, _ in WIRE_CHANGES]
    assert releases == sorted(releases) and releases[0] == (0, 24, 0)
    for bad in ("0.21.0", "latest", None, "0.33"):
        with pytest.raises(KVEventFormatError, match=r"a vLLM release 'X.Y.Z' >= 0.22.1"):
            form_of(bad)


def test_decodes_every_event_type_in_both_forms() -> None:
    removed_a = ["BlockRemoved", [9], "CPU", 1]
    removed_m = {"type": "BlockRemoved", "block_hashes": [9], "medium": "CPU", "group_idx": 1}
    array = decode_kv_event_payload(enc([2.5, [STORED_0221, removed_a, ["AllBlocksCleared"]], 0]))
    mapped = decode_kv_event_payload(enc([2.5, [STORED_MAP, removed_m,
                                                {"type": "AllBlocksCleared"}], 0]))  # fmt: skip
    want = [STORED, BlockRemoved([9], "CPU", 1), AllBlocksCleared()]
    assert array.form == "array" and mapped.form == "map"
    assert array.batch == mapped.batch == KVEventBatch(2.5, want, 0)
    assert array.newer_fields == mapped.newer_fields == ({}, {}, {})
    assert decode_kv_event_payload(enc([1.0, []])).form is None
    # array form stopping early: the missing trailing fields take their defaults
    short = decode_kv_event_payload(enc([1.0, [["BlockRemoved", [7], "GPU"]]]))
    assert short.batch.events == [BlockRemoved([7], "GPU", None)]
    assert short.batch.data_parallel_rank is None


def test_newer_fields_and_unknown_keys() -> None:
    stored = {**STORED_MAP, "locality": "LOCAL", "ownership": "kvcr", "session_id": "s-1",
              "lookahead_token_ids": [[9, 9], [8, 8]], "from_the_future": 1}  # fmt: skip
    removed = {"type": "BlockRemoved", "block_hashes": [b"\x01" * 32], "medium": "STORAGE",
               "locality": "REMOTE"}  # fmt: skip
    d = decode_kv_event_payload(enc([3.0, [stored, removed], 2]))
    assert d.batch.events == [STORED, BlockRemoved([b"\x01" * 32], "STORAGE")]
    assert d.newer_fields == (
        {"locality": "LOCAL", "ownership": "kvcr", "session_id": "s-1",
         "lookahead_token_ids": [[9, 9], [8, 8]]},
        {"locality": "REMOTE"},
    )  # fmt: skip
    assert d.unknown_fields == {"BlockStored.from_the_future"}


def _stored(**change):
    return enc([1.0, [{**STORED_MAP, **change}], 0])


BAD = [
    (_stored(block_hashes=None), "field 'block_hashes' must be a list of block hashes"),
    (_stored(block_hashes=[1.5]), r"must be a list of block hashes \(64-bit ints or bytes\), got \[1.5\]"),
    (_stored(group_idx="x"), r"'group_idx' must be an int in \[0, 4095\] or None, got 'x'"),
    (_stored(group_idx=2**40), r"'group_idx' must be an int in \[0, 4095\] or None, got 1099"),
    (_stored(group_idx=-1), r"'group_idx' must be an int in \[0, 4095\]"),
    (_stored(token_ids=["a"]), "'token_ids' must be a list of token ids"),
    (_stored(block_size=0), "'block_size' must be a block size in tokens"),
    (_stored(medium=5), "'medium' must be a str or None, got 5"),
    (_stored(session_id=3), "'session_id' must be a str or None"),
    (_stored(lookahead_token_ids=[1, 2]), "'lookahead_token_ids' must be a list of token-id"),
    (_stored(extra_keys=[5]), "'extra_keys' must be a list of per-block key tuples"),
    (enc([1.0, [{"type": "BlockStored", "block_hashes": [1]}]]),
     "missing required field.*parent_block_hash.*needs block_hashes, parent_block_hash"),
    (enc(["yesterday", []]), "'ts' must be a finite number"),
    (enc([math.nan, []]), "'ts' must be a finite number"),
    (enc([1.0, [], -1]), "'data_parallel_rank' must be an int >= 0 or None"),
    (enc([1.0, {"a": 1}]), "'events' must be a list"),
    (enc({"x": 1}), "not a KV event batch: expected the array"),
    (enc([1.0, [["Nope"]]]), "unknown KV cache event type 'Nope'; known: AllBlocksCleared"),
    (enc([1.0, [{"type": 3}]]), "not a KV cache event: expected a tagged array"),
    (enc([1.0, [["AllBlocksCleared"], {"type": "AllBlocksCleared"}]]), "mix the array and"),
    (b"\xc1garbage", "not a msgpack KV event batch"),
    (b"\x91" * 100_000 + b"\x01", "not a msgpack KV event batch"),
]  # fmt: skip


@pytest.mark.parametrize(("payload", "message"), BAD, ids=[m[:30] for _, m in BAD])
def test_bad_payloads_raise_one_clear_error(payload: bytes, message: str) -> None:
    with pytest.raises(KVEventFormatError, match=message):
        decode_kv_event_payload(payload, "seq 4")
    assert issubclass(KVEventFormatError, ValueError)


def test_huge_group_idx_allocates_nothing(tmp_path) -> None:
    payload = enc([0.0, [["BlockRemoved", [7], "GPU", 2**40]]])
    assert len(payload) < 60
    path = tmp_path / "tiny.kvev"
    write_kv_event_messages(path, [(b"", 0, payload)])
    tracemalloc.start()
    try:
        with pytest.raises(KVEventFormatError, match=r"group_idx' must be an int in \[0, 4095\]"):
            read_kv_event_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes for a {len(payload)}-byte event"
    assert MAX_GROUP_IDX == 4095


def test_seq_frames() -> None:
    assert decode_seq_frame((5).to_bytes(8, "big")) == 5
    assert encode_seq_frame(2**64 - 1) == b"\xff" * 8 == END_SEQ
    for bad in (b"\x00" * 7, b"\x00" * 9, b"", "12345678"):
        with pytest.raises(KVEventFormatError, match="a seq frame is 8 bytes"):
            decode_seq_frame(bad)
    for bad in (-1, 2**64, 1.0, True):
        with pytest.raises(KVEventFormatError, match=r"a seq is an int in \[0, 2\*\*64\)"):
            encode_seq_frame(bad)


def test_encoder_layout_per_release() -> None:
    batch = KVEventBatch(2.5, [STORED, BlockRemoved([9], "CPU", 1), AllBlocksCleared()], 0)
    extras = [{"locality": "LOCAL", "lookahead_token_ids": [[1], [2]]}, {"ownership": "o"}, None]
    array = encode_kv_event_payload(batch, "0.22.1")
    assert msgspec.msgpack.decode(array) == [
        2.5, [STORED_0221, ["BlockRemoved", [9], "CPU", 1], ["AllBlocksCleared"]], 0]
    new = encode_kv_event_payload(batch, "0.33.0", extras)
    assert msgspec.msgpack.decode(new) == [2.5, [
        {**STORED_MAP, "locality": "LOCAL", "lookahead_token_ids": [[1], [2]]},
        {"type": "BlockRemoved", "block_hashes": [9], "medium": "CPU", "group_idx": 1,
         "ownership": "o"},
        {"type": "AllBlocksCleared"}], 0]  # fmt: skip
    # msgspec sizes a struct's map header by its field count: 0.33's BlockStored has 15 fields
    # (+ the tag: map16), 0.30's 14 (fixmap), whatever is left out.
    bare = KVEventBatch(1.0, [BlockStored([1], None, [1], 1, None, None, None)])
    assert encode_kv_event_payload(bare, "0.33.0")[11:14] == b"\xde\x00\x08"  # type + 7 required
    assert encode_kv_event_payload(bare, "0.30.0")[11:12] == b"\x88"
    decoded = decode_kv_event_payload(new)
    assert decoded.batch == batch and decoded.newer_fields == ({"locality": "LOCAL",
        "lookahead_token_ids": [[1], [2]]}, {"ownership": "o"}, {})  # fmt: skip


@pytest.mark.parametrize(("version", "extras", "message"), [
    ("0.30.0", [{"lookahead_token_ids": [[1]]}], r"0.30.0 has no field 'lookahead_token_ids' \(sent since 0.33.0\)"),
    ("0.22.1", [{"locality": "LOCAL"}], r"vLLM 0.22.1 has no field 'locality' \(sent since 0.26"),
    ("0.33.0", [{"colour": "red"}], "'colour' is not a field BlockStored gained after 0.22.1"),
    ("0.33.0", [{"session_id": 7}], "'session_id' must be a str or None"),
    ("0.33.0", [{}, {}], "newer_fields has 2 entries for 1 events"),
    ("0.20.0", [], r"a vLLM release 'X.Y.Z' >= 0.22.1"),
])  # fmt: skip
def test_encoder_refuses(version: str, extras: list, message: str) -> None:
    with pytest.raises(KVEventFormatError, match=message):
        encode_kv_event_payload(KVEventBatch(1.0, [STORED]), version, extras)
    with pytest.raises(KVEventFormatError, match="cannot encode str"):
        encode_kv_event_payload(KVEventBatch(1.0, ["BlockStored"]))
    with pytest.raises(KVEventFormatError, match="'ts' must be a finite number"):
        encode_kv_event_payload(KVEventBatch(math.inf, []))


def test_jsonl_keeps_newer_fields_and_checks_every_line(tmp_path) -> None:
    payload = encode_kv_event_payload(KVEventBatch(1.0, [STORED], 0), "0.33.0",
                                      [{"session_id": "s", "locality": "LOCAL"}])  # fmt: skip
    path = tmp_path / "e.jsonl"
    write_kv_event_messages(path, [(b"kv", 3, payload)])
    [(seq, d)] = list(read_kv_event_messages(path, decoded=True))
    assert seq == 3 and d.batch.events == [STORED] and d.form == "map"
    assert d.newer_fields == ({"locality": "LOCAL", "session_id": "s"},)
    lines = {
        '{"seq": "abc", "ts": 1.0, "events": []}': r"line 1: 'seq' must be an int in \[0, 2\*\*64\)",
        '{"seq": 0, "ts": "yesterday", "events": []}': "line 1: 'ts' must be a finite number",
        '{"ts": 1.0, "events": [{"type": "BlockRemoved", "block_hashes": null, "medium": null}]}':
            "line 1, event 0 .BlockRemoved.: field 'block_hashes' must be a list",
        "[" * 100_000 + "]" * 100_000: "line 1: not a JSON KV event batch",
        '{"ts": 1.0}': "line 1: not a KV event batch: expected an object with 'ts' and 'events'",
    }  # fmt: skip
    for line, message in lines.items():
        path.write_text(line + "\n")
        with pytest.raises(KVEventFormatError, match=message):
            list(read_kv_event_messages(path))


def test_damaged_kvev_files(tmp_path) -> None:
    path = tmp_path / "d.kvev"
    path.write_bytes(b"KVEV1\n\x00\x00\x00\x00" + (0).to_bytes(8, "big") + b"\xff\xff\xff\xf0ab")
    with pytest.raises(KVEventFormatError, match="payload of 4294967280 bytes at byte 22, 2 left"):
        list(read_kv_event_messages(path))
    path.write_bytes(b"KVEV1\n\xff\xff\xff\xff")
    with pytest.raises(KVEventFormatError, match="topic of 4294967295 bytes .at most 65536."):
        list(read_kv_event_messages(path))
    with pytest.raises(KVEventFormatError, match=r"seq must be an int in \[0, 2\*\*64\)"):
        write_kv_event_messages(path, [(b"", -1, b"")])
    assert isinstance(check_kv_event_batch(1, []).batch, KVEventBatch)
