"""save/load round trip; clear TraceFormatErrors for damaged, truncated, foreign, newer files."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from _trace_helpers import admit, decode, init_hashing, make_manager, make_request

from kvlab.trace import FORMAT_VERSION, KVState, Recorder, TraceFormatError, load_trace
from kvlab.trace.fileformat import MAGIC


@pytest.fixture()
def trace():
    """A trace that starts mid-run (non-trivial initial state) on a hybrid manager."""
    init_hashing()
    m = make_manager(24, hybrid=True)
    early = make_request("early", list(range(13)))
    assert admit(m, early)
    rec = Recorder().attach(m)
    late = make_request("late", list(range(12)) + [50, 51, 52])
    rec.mark_step(4)
    assert admit(m, late)
    for tok in range(6):
        assert decode(m, late, tok)
    m.free(early)
    m.evict_blocks({1, 2})
    return rec.trace()


def test_round_trip_preserves_everything(trace, tmp_path: Path) -> None:
    path = tmp_path / "t.kvtrace"
    size = trace.save(path)
    assert size == path.stat().st_size > 0
    loaded = load_trace(path)
    for name, arr in trace.cols.arrays().items():
        got = loaded.cols.arrays()[name]
        assert got.dtype == arr.dtype, name
        np.testing.assert_array_equal(got, arr, err_msg=name)
    assert loaded.tables.requests == trace.tables.requests
    assert [loaded.tables.hash_bytes(i) for i in range(loaded.tables.num_hashes)] == [
        trace.tables.hash_bytes(i) for i in range(trace.tables.num_hashes)
    ]
    assert loaded.initial_state == trace.initial_state
    assert (
        loaded.initial_state.blocks_of("early", 0)
        == trace.initial_state.blocks_of("early", 0)
        != []
    )
    assert loaded.config == json.loads(json.dumps(trace.config))
    assert loaded.call_names == trace.call_names
    assert [str(c) for c in loaded.calls()] == [str(c) for c in trace.calls()]
    for i in (0, len(trace) // 2, len(trace) - 1):
        assert loaded.state_at(i) == trace.state_at(i)
    assert [str(e) for e in loaded] == [str(e) for e in trace]


def test_empty_trace_round_trips(tmp_path: Path) -> None:
    t = Recorder(initial_state=KVState.fresh(4)).trace()
    t.save(tmp_path / "e.kvtrace")
    loaded = load_trace(tmp_path / "e.kvtrace")
    assert len(loaded) == 0 and loaded.final_state() == KVState.fresh(4)


def _rewrite(src: Path, dst: Path, *, header=None, drop=(), replace=None) -> None:
    """Copy a trace zip, optionally editing the header / dropping or replacing entries."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            data = zin.read(info.filename)
            if info.filename == "header.json" and header is not None:
                data = json.dumps(header(json.loads(data))).encode()
            if replace and info.filename in replace:
                data = replace[info.filename]
            zout.writestr(info.filename, data)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_trace(tmp_path / "nope.kvtrace")


def test_truncated_file(trace, tmp_path: Path) -> None:
    path = tmp_path / "t.kvtrace"
    trace.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="not a zip archive, or truncated"):
        load_trace(path)


def test_foreign_files(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(TraceFormatError, match="not a kvlab trace: not a zip"):
        load_trace(text)
    other_zip = tmp_path / "other.zip"
    with zipfile.ZipFile(other_zip, "w") as zf:
        zf.writestr("data.csv", "a,b\n")
    with pytest.raises(TraceFormatError, match="zip without header.json"):
        load_trace(other_zip)
    wrong_magic = tmp_path / "magic.zip"
    with zipfile.ZipFile(wrong_magic, "w") as zf:
        zf.writestr("header.json", json.dumps({"magic": "something-else", "format_version": 1}))
    with pytest.raises(TraceFormatError, match="magic is 'something-else', expected 'kvlab-trace'"):
        load_trace(wrong_magic)


def test_newer_format_version(trace, tmp_path: Path) -> None:
    src, dst = tmp_path / "a.kvtrace", tmp_path / "b.kvtrace"
    trace.save(src)
    _rewrite(src, dst, header=lambda h: {**h, "format_version": FORMAT_VERSION + 1})
    with pytest.raises(
        TraceFormatError, match=f"newer kvlab \\(format_version {FORMAT_VERSION + 1}"
    ):
        load_trace(dst)


def test_corrupted_entry_fails_its_crc(trace, tmp_path: Path) -> None:
    path = tmp_path / "t.kvtrace"
    trace.save(path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("payload.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 5
    data[start] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="entry payload.npy unreadable"):
        load_trace(path)


@pytest.mark.parametrize(
    "edit,message",
    [
        ({"drop": ("kind.npy",)}, "entry kind.npy listed in the header is missing"),
        ({"header": lambda h: {**h, "num_events": h["num_events"] + 1}}, "column kind has"),
        (
            {"header": lambda h: {k: v for k, v in h.items() if k != "requests"}},
            "'requests' missing",
        ),
        (
            {"header": lambda h: {**h, "format_version": "one"}},
            "format_version 'one' is not an int",
        ),
        ({"replace": {"header.json": b"{not json"}}, "header.json is not valid JSON"),
    ],
)
def test_damaged_header_or_entries(trace, tmp_path: Path, edit: dict, message: str) -> None:
    src, dst = tmp_path / "a.kvtrace", tmp_path / "b.kvtrace"
    trace.save(src)
    _rewrite(src, dst, **edit)
    with pytest.raises(TraceFormatError, match=message):
        load_trace(dst)


def test_arrays_that_contradict_each_other(trace, tmp_path: Path) -> None:
    src, dst = tmp_path / "a.kvtrace", tmp_path / "b.kvtrace"
    trace.save(src)
    bad_offsets = trace.cols.offsets.copy()
    bad_offsets[-1] += 1
    _rewrite(src, dst, replace={"offsets.npy": _npy(bad_offsets)})
    with pytest.raises(TraceFormatError, match="payload offsets inconsistent"):
        load_trace(dst)
    wrong_dtype = trace.cols.kind.astype(np.int64)
    _rewrite(src, dst, replace={"kind.npy": _npy(wrong_dtype)})
    with pytest.raises(TraceFormatError, match="kind has dtype int64, expected uint8"):
        load_trace(dst)


def test_header_is_first_and_says_what_it_is(trace, tmp_path: Path) -> None:
    path = tmp_path / "t.kvtrace"
    trace.save(path)
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist()[0] == "header.json"
        header = json.loads(zf.read("header.json"))
    assert header["magic"] == MAGIC and header["format_version"] == FORMAT_VERSION
    assert header["num_events"] == len(trace)
