"""Bounds the fuzzing campaign (benchmarks/results/fuzz.md) showed were missing, each measured in
a fresh interpreter under tracemalloc (test_memory_bounds._measure): a zip of a million tiny
members, a zip entry whose declared size is a lie, a GGUF declaring a 2**62-element array (it
once made gguf's reader loop until the machine ran out of memory), a KV-event recording of
tiny messages."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from test_memory_bounds import MiB, _measure, good  # noqa: F401 (a fixture)


def _million_member_zip(path: Path, members: int = 1_000_000) -> None:
    """A zip whose central directory lists ``members`` one-byte stored entries (the same local
    entry: zipfile parses the directory, never the members)."""
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 0, 0, 0x21, 0xE8B7BE43, 1, 1, 1, 0)
    entry = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, 0xE8B7BE43,
                        1, 1, 1, 0, 0, 0, 0, 0, 0) + b"a"  # fmt: skip
    head = local + b"a" + b"a"
    cd = entry * members
    eocd = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, len(head), 0)
    z64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, members, members, len(cd),
                      len(head))  # fmt: skip
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(head) + len(cd), 1)
    path.write_bytes(head + cd + z64 + locator + eocd)


def test_a_million_tiny_members_are_refused_from_the_end_record(tmp_path: Path) -> None:
    path = tmp_path / "members.kvtrace"
    _million_member_zip(path)
    got = _measure(f"load_trace({str(path)!r})", "from kvlab.trace import load_trace")
    assert got["error"] == "TraceFormatError"
    assert "a zip of 1000000 entries; a trace has 18, allowed at most MAX_MEMBERS=256" in got["message"]
    assert got["peak"] < 2 * MiB  # NOTE: zipfile's directory of it: 381 MiB, 73 s (fuzz.md)


def test_a_stored_entry_declaring_900_MB_allocates_nothing(good: Path, tmp_path: Path) -> None:
    """payload.npy holds its real bytes and says 900 MB: it is read in 1 MiB chunks and refused
    as damaged (one read of the declared size allocated 900 MB before: fuzz.md)."""
    import zipfile

    path = tmp_path / "liar.kvtrace"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    raw = bytearray(path.read_bytes())
    name = b"payload.npy"
    for sig, head, fields in ((b"PK\x03\x04", 30, (18, 22)), (b"PK\x01\x02", 46, (20, 24))):
        i = raw.find(sig)
        while raw[i + head : i + head + len(name)] != name:  # NOTE: this entry's header
            i = raw.find(sig, i + 1)
        for at in fields:  # compressed and uncompressed size
            raw[i + at : i + at + 4] = struct.pack("<I", 900 * MiB)
    path.write_bytes(bytes(raw))
    got = _measure(f"load_trace({str(path)!r}, max_bytes=2**31)", "from kvlab.trace import load_trace")
    assert got["error"] == "TraceFormatError" and "payload.npy" in got["message"]
    assert got["peak"] < 16 * MiB


def test_a_gguf_declaring_a_2_to_the_62_element_array_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "huge-array.gguf"
    key = b"tokenizer.ggml.token_type"
    body = struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    body += struct.pack("<IIQ", 9, 5, 1 << 62) + np.zeros(16, np.int32).tobytes()  # ARRAY of INT32
    path.write_bytes(body)
    got = _measure(f"open_gguf({str(path)!r})", "from kvlab.model.gguf_loader import open_gguf")
    assert got["error"] == "ValueError"
    assert "more than MAX_METADATA_ITEMS=4194304 array elements" in got["message"]
    assert got["peak"] < 2 * MiB


def test_a_recording_of_tiny_messages_costs_memory_in_proportion(tmp_path: Path) -> None:
    import msgspec

    payload = msgspec.msgpack.encode([0.0, [], 0])
    frame = struct.pack(">I", 0) + struct.pack(">Q", 7) + struct.pack(">I", len(payload)) + payload
    path = tmp_path / "tiny.kvev"
    path.write_bytes(b"KVEV1\n" + frame * 20_000)  # 560 KB, 20,000 batches
    got = _measure(f"b = read_kv_event_file({str(path)!r}); assert b.num_batches == 20000",
                   "from kvlab.kv_events import read_kv_event_file")  # fmt: skip
    assert got["error"] is None
    assert got["peak"] < 10 * path.stat().st_size  # measured: about 7 bytes per byte of file
