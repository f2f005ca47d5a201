"""Tiny inputs never cause big allocations: every size read from a file is bounded first.

Each case writes a small hostile file, then reads it in a fresh Python process under
tracemalloc (numpy's allocations are traced too) and asserts a clear error naming the limit
and a peak far below what the file claims (the issue measured 2.3 GB for the zip bomb and
7.45 GiB for ``max_tokens`` 10**9 before the bounds).
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _robust_helpers import busy_manager

MiB = 1 << 20

RUNNER = textwrap.dedent(
    """
    import json, sys, tracemalloc
    {setup}
    tracemalloc.start()
    try:
        {call}
        out = {{"error": None, "message": ""}}
    except Exception as exc:
        out = {{"error": type(exc).__name__, "message": str(exc)}}
    out["peak"] = tracemalloc.get_traced_memory()[1]
    print(json.dumps(out))
    """
)


def _measure(call: str, setup: str = "") -> dict[str, Any]:
    """Run ``call`` in a fresh interpreter; return its error and traced peak (bytes)."""
    code = RUNNER.format(setup=setup, call=call)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load(path: Path) -> dict[str, Any]:
    return _measure(f"load_trace({str(path)!r})", "from kvlab.trace import load_trace")


def _entries(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read("header.json"))
        return header, {n: zf.read(n) for n in zf.namelist() if n != "header.json"}


def _write_raw_zip(path: Path, entries: list[tuple[str, bytes, int, int]]) -> None:
    """A zip from already-deflated entries: (name, raw deflate stream, crc32, inflated size)."""
    out, central = io.BytesIO(), io.BytesIO()
    for name, data, crc, size in entries:
        offset, encoded = out.tell(), name.encode()
        out.write(struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(data),
                              size, len(encoded), 0) + encoded + data)  # fmt: skip
        central.write(struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21,
                                  crc, len(data), size, len(encoded), 0, 0, 0, 0, 0, offset)
                      + encoded)  # fmt: skip
    cd = central.getvalue()
    eocd = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(cd),
                       out.tell(), 0)  # fmt: skip
    path.write_bytes(out.getvalue() + cd + eocd)


def _deflated(data: bytes) -> tuple[str, bytes, int, int]:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return "", c.compress(data) + c.flush(), zlib.crc32(data), len(data)


def _zeros_bomb(prefix: bytes, num_chunks: int, chunk: int = 16 * MiB) -> tuple[bytes, int, int]:
    """A deflate stream of ``prefix`` + num_chunks * chunk zero bytes, built without inflating
    it: one full-flushed compressed chunk repeated, then an empty final block."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    zeros = bytes(chunk)
    block = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(prefix)
    for _ in range(num_chunks):
        crc = zlib.crc32(zeros, crc)
    return head + block * num_chunks + b"\x03\x00", crc, len(prefix) + num_chunks * chunk


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, rec, _ = busy_manager()
    path = tmp_path_factory.mktemp("bounds") / "good.kvtrace"
    rec.trace().save(path)
    return path


def test_a_zip_entry_inflating_to_1_2_GB_is_refused_before_reading(good, tmp_path) -> None:
    header, raw = _entries(good)
    num_chunks = 72  # 72 * 16 MiB = 1.2 GB of int32 payload
    count = num_chunks * 16 * MiB // 4
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"descr": "<i4", "fortran_order": False,
                                               "shape": (count,)})  # fmt: skip
    header["arrays"]["payload"]["shape"] = [count]
    stream, crc, size = _zeros_bomb(npy.getvalue(), num_chunks)
    entries = [("header.json", *_deflated(json.dumps(header).encode())[1:])]
    entries += [(n, *_deflated(d)[1:]) for n, d in raw.items() if n != "payload.npy"]
    entries.append(("payload.npy", stream, crc, size))
    bomb = tmp_path / "bomb.kvtrace"
    _write_raw_zip(bomb, entries)
    assert bomb.stat().st_size < 1.5 * MiB and size > 1.2e9
    with zipfile.ZipFile(bomb) as zf:  # a real zip: the entry really inflates to 1.2 GB
        assert zf.getinfo("payload.npy").file_size == size
        with zf.open("payload.npy") as fh:
            assert fh.read(1 << 16)[len(npy.getvalue()):].count(0) > 60_000
    got = _load(bomb)
    assert got["error"] == "TraceFormatError"
    assert f"inflates to {size + sum(e[3] for e in entries[:-1])} bytes" in got["message"]
    assert "over the limit of max_bytes=1073741824 bytes" in got["message"]
    assert got["peak"] < 8 * MiB


def _rewritten(good: Path, dst: Path, edit: Any) -> Path:
    header, raw = _entries(good)
    replace = edit(header) or {}
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", json.dumps(header))
        for name, data in raw.items():
            zf.writestr(name, replace.get(name, data))
    return dst


def test_a_header_with_10_to_the_11_blocks_allocates_nothing(good, tmp_path) -> None:
    path = _rewritten(good, tmp_path / "b.kvtrace",
                      lambda h: h["initial_state"].update(num_blocks=10**11))  # fmt: skip
    got = _load(path)
    assert got["error"] == "TraceFormatError" and "one entry per block (100000000000)" in got[
        "message"]  # fmt: skip
    assert got["peak"] < 4 * MiB


def test_a_header_with_10_to_the_9_groups_allocates_nothing(good, tmp_path) -> None:
    path = _rewritten(good, tmp_path / "g.kvtrace",
                      lambda h: h["initial_state"].update(num_groups=10**9))  # fmt: skip
    got = _load(path)
    assert got["error"] == "TraceFormatError" and "an int in [0, 1024]" in got["message"]
    assert got["peak"] < 4 * MiB


def test_an_npy_header_claiming_10_to_the_10_items_allocates_nothing(good, tmp_path) -> None:
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"descr": "<i4", "fortran_order": False,
                                               "shape": (10**10,)})  # fmt: skip

    def edit(h: dict[str, Any]) -> dict[str, bytes]:
        h["arrays"]["payload"]["shape"] = [10**10]
        return {"payload.npy": npy.getvalue() + bytes(64)}

    got = _load(_rewritten(good, tmp_path / "n.kvtrace", edit))
    assert got["error"] == "TraceFormatError" and "needs 40000000000" in got["message"]
    assert got["peak"] < 4 * MiB


def test_a_100_000_deep_header_is_refused_cheaply(good, tmp_path) -> None:
    header, raw = _entries(good)
    path = tmp_path / "deep.kvtrace"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", "[" * 100_000 + "]" * 100_000)
        for name, data in raw.items():
            zf.writestr(name, data)
    got = _load(path)
    assert got["error"] == "TraceFormatError" and "nests too deeply" in got["message"]
    assert got["peak"] < 8 * MiB


def _jsonl(tmp_path: Path, lines: list[str]) -> dict[str, Any]:
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return _measure(f"from_jsonl({str(path)!r})", "from kvlab.compare import from_jsonl")


def test_jsonl_max_tokens_of_10_to_the_9_is_refused_before_planning_outputs(tmp_path) -> None:
    got = _jsonl(tmp_path, ['{"prompt_token_ids": [1, 2], "max_tokens": 1000000000}'])
    assert got["error"] == "ValueError"
    assert "max_tokens must be an int in [1, 1048576]" in got["message"]
    assert got["peak"] < 4 * MiB


def test_jsonl_many_big_requests_stop_at_the_workload_limit(tmp_path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt_token_ids": [1], "max_tokens": 50000}\n' * 1000)  # 5 * 10**7 tokens
    got = _measure(f"from_jsonl({str(path)!r}, max_total_tokens=200_000)",
                   "from kvlab.compare import from_jsonl")  # fmt: skip
    assert got["error"] == "ValueError" and "line 4: the workload exceeds max_total_tokens" in (
        got["message"])  # fmt: skip
    assert got["peak"] < 16 * MiB  # three requests' planned tokens, not a thousand


def test_jsonl_100_000_deep_line_is_refused_cheaply(tmp_path) -> None:
    got = _jsonl(tmp_path, ["[" * 100_000 + "]" * 100_000])
    assert got["error"] == "ValueError" and "nested too deeply" in got["message"]
    assert got["peak"] < 8 * MiB


def test_jsonl_a_line_over_the_limit_is_not_read_whole(tmp_path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_text('{"prompt_token_ids": [' + "1, " * 4 * MiB + "1]}\n")  # 12 MiB line
    got = _measure(
        f"from_jsonl({str(path)!r})",
        "import kvlab.compare.workload_io as w\n"
        "w.MAX_LINE_CHARS = 1 << 20\nfrom_jsonl = w.from_jsonl",
    )
    assert got["error"] == "ValueError" and "over the limit of MAX_LINE_CHARS=1048576" in (
        got["message"])  # fmt: skip
    assert got["peak"] < 8 * MiB
