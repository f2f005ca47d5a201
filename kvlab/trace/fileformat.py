"""The trace file: a zip holding a JSON header and one .npy entry per array (format_version 1).

Layout (every entry deflate-compressed; ``header.json`` is written first)::

    header.json        {"magic": "kvlab-trace", "format_version": 1, "kvlab_version": ...,
                        "num_events": n, "arrays": {name: {"dtype", "shape"}}, "config": {...},
                        "call_names": [...], "requests": [...], "checkpoint_interval": k,
                        "initial_state": {"num_blocks", "num_groups", "null_block_id"}}
    kind.npy depth.npy group.npy request.npy a.npy b.npy offsets.npy payload.npy
    step_seq.npy step_val.npy hash_blob.npy hash_offsets.npy
    init_free_queue.npy init_ref_cnt.npy init_block_hash.npy          (int64 key codes / -1)
    init_cached.npy    int64 [k, 2]: (key code, block_id) in map insertion order
    init_req.npy       int64 [m, 3]: (group, request index, block_id), list order kept

Loading checks everything it relies on and raises TraceFormatError naming the problem: not a
zip / truncated, foreign (no header or wrong magic), newer format_version, a damaged entry (CRC
or .npy parse), sizes over the limits, or fields and arrays that contradict the header or each
other (``kvlab.trace.fileformat_checks`` lists the checks and limits). Saving is atomic.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections import OrderedDict
from os import PathLike
from typing import Any

import numpy as np

from kvlab._version import __version__ as _KVLAB_VERSION
from kvlab.trace.atomic_file import atomic_write
from kvlab.trace.columns import COLUMN_DTYPES, OFFSET_DTYPE, PAYLOAD_DTYPE, Columns
from kvlab.trace.fileformat_checks import (
    DEFAULT_MAX_BYTES,
    MAX_HEADER_BYTES,
    TraceFormatError,
    brief,
    check_columns,
    check_header,
    check_initial_state,
    check_zip_directory,
    parse_npy,
    read_entry,
)
from kvlab.trace.state import KVState
from kvlab.trace.tables import FrozenTables

__all__ = ["FORMAT_VERSION", "MAGIC", "TraceFormatError", "load_trace", "save_trace"]

MAGIC = "kvlab-trace"
FORMAT_VERSION = 1
_EXPECTED: dict[str, np.dtype] = {
    **COLUMN_DTYPES,
    "offsets": OFFSET_DTYPE,
    "payload": PAYLOAD_DTYPE,
    "step_seq": np.dtype(np.int64),
    "step_val": np.dtype(np.int32),
    "hash_blob": np.dtype(np.uint8),
    "hash_offsets": np.dtype(np.int64),
    "init_free_queue": np.dtype(np.int64),
    "init_ref_cnt": np.dtype(np.int64),
    "init_block_hash": np.dtype(np.int64),
    "init_cached": np.dtype(np.int64),
    "init_req": np.dtype(np.int64),
}


def save_trace(trace: Any, path: str | PathLike[str]) -> int:
    """Write ``trace`` to ``path`` atomically: the old file survives any failure.

    The trace is written to a temporary file next to ``path``, flushed to disk (fsync) and
    renamed over ``path`` (``os.replace``), so a save that is killed, runs out of disk or
    fails in any other way leaves the previous file intact (and no temporary file behind).

    Args:
        trace: A kvlab.trace.Trace.
        path: Destination file (replaced); its directory must exist.

    Returns:
        Size of the written file (bytes).

    Raises:
        FileNotFoundError: If the directory of ``path`` does not exist (nothing written).
        IsADirectoryError: If ``path`` is a directory.
        TypeError: If a request id is not a str or the config is not JSON-serialisable
            (nothing written: such a file could not be loaded again).
        OSError: If writing fails (e.g. a full disk); ``path`` is unchanged.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot save the trace to {path}: no directory {directory}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot save the trace to {path}: it is a directory")
    header, arrays = _header_and_arrays(trace)
    bad_ids = [r for r in header["requests"] if not isinstance(r, str)]
    if bad_ids:
        raise TypeError(
            f"cannot save the trace: request ids must be strings (as in vLLM) for the file to "
            f"load again, got {bad_ids[:3]!r}; nothing was written"
        )
    try:
        header_json = json.dumps(header)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"cannot save the trace: its config must be JSON-serialisable ({exc}); nothing was "
            "written"
        ) from exc
    with atomic_write(path, "wb") as fh:
        _write_zip(fh, header_json, arrays)
    return os.path.getsize(path)


def _header_and_arrays(trace: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    arrays = dict(trace.cols.arrays())
    arrays["hash_blob"] = trace.tables.hash_blob
    arrays["hash_offsets"] = trace.tables.hash_offsets
    arrays.update(_state_arrays(trace.initial_state))
    s = trace.initial_state
    header = {
        "magic": MAGIC,
        "format_version": FORMAT_VERSION,
        "kvlab_version": _KVLAB_VERSION,
        "num_events": len(trace),
        "config": trace.config,
        "call_names": trace.call_names,
        "requests": trace.tables.requests,
        "checkpoint_interval": trace.checkpoint_interval,
        "initial_state": {
            "num_blocks": s.num_blocks,
            "num_groups": s.num_groups,
            "null_block_id": s.null_block_id,
        },
        "arrays": {k: {"dtype": v.dtype.str, "shape": list(v.shape)} for k, v in arrays.items()},
    }
    return header, arrays


def _write_zip(fh: Any, header_json: str, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr("header.json", header_json)
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            zf.writestr(f"{name}.npy", buf.getvalue())


def _state_arrays(s: KVState) -> dict[str, np.ndarray]:
    cached = [(code, bid) for code, ids in s.cached.items() for bid in ids]
    req = [
        (g, r, bid)
        for g, blocks in enumerate(s.req_to_blocks)
        for r, ids in blocks.items()
        for bid in ids
    ]
    return {
        "init_free_queue": np.array(list(s.free_queue), dtype=np.int64),
        "init_ref_cnt": np.array(s.ref_cnt, dtype=np.int64),
        "init_block_hash": np.array(s.block_hash, dtype=np.int64),
        "init_cached": np.array(cached, dtype=np.int64).reshape(-1, 2),
        "init_req": np.array(req, dtype=np.int64).reshape(-1, 3),
    }


def load_trace(path: str | PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """Read a trace written by ``save_trace`` (or ``Trace.save``).

    The file is untrusted: sizes are bounded before anything is allocated and every field is
    checked (``kvlab.trace.fileformat_checks``), so a damaged file fails here, never later.

    Args:
        path: The file.
        max_bytes: Limit on the uncompressed size of all entries together (bytes).

    Returns:
        The Trace.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        TraceFormatError: If the file is truncated, damaged, foreign, from a newer kvlab, or
            bigger than ``max_bytes`` once inflated (the message names the field or limit).
    """
    from kvlab.trace.trace import Trace

    check_zip_directory(path)
    try:
        zf = zipfile.ZipFile(path, "r")
    except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError, OSError) as exc:
        raise TraceFormatError(
            f"{path}: not a kvlab trace: not a zip archive, or truncated ({brief(exc)})"
        ) from None
    with zf:
        total = sum(info.file_size for info in zf.infolist())
        if total > max_bytes:
            raise TraceFormatError(
                f"{path}: the trace inflates to {total} bytes, over the limit of max_bytes="
                f"{max_bytes} bytes (pass a larger max_bytes to load_trace for big traces)"
            )
        header = _read_header(zf, path)
        check_header(header, path, _EXPECTED)
        arrays = {}
        for name, spec in header["arrays"].items():
            if name in _EXPECTED:  # NOTE: unknown entries are never read
                raw = read_entry(zf, path, f"{name}.npy", max_bytes)
                arrays[name] = parse_npy(raw, path, name, _EXPECTED[name], spec["shape"])
    missing = sorted(set(_EXPECTED) - set(arrays))
    if missing:
        raise TraceFormatError(f"{path}: damaged trace: missing arrays {missing}")
    cols = Columns(**{name: arrays[name] for name in Columns.__dataclass_fields__})
    check_columns(cols, arrays, header, path)
    check_initial_state(arrays, header, path)
    try:
        tables = FrozenTables(list(header["requests"]), arrays["hash_blob"], arrays["hash_offsets"])
        state = _rebuild_state(header["initial_state"], arrays, tables)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise TraceFormatError(
            f"{path}: damaged trace: bad tables or initial state ({brief(exc)})"
        ) from None
    return Trace(
        cols,
        tables,
        state,
        config=header.get("config") or {},
        call_names=list(header["call_names"]),
        checkpoint_interval=header.get("checkpoint_interval", 4096),
    )


def _read_header(zf: zipfile.ZipFile, path: Any) -> dict[str, Any]:
    if "header.json" not in zf.namelist():
        raise TraceFormatError(
            f"{path}: not a kvlab trace: a zip without header.json (foreign file)"
        )
    raw = read_entry(zf, path, "header.json", MAX_HEADER_BYTES)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceFormatError(
            f"{path}: damaged trace: header.json is not valid JSON ({brief(exc)})"
        ) from None
    except RecursionError:
        raise TraceFormatError(
            f"{path}: damaged trace: header.json nests too deeply (allowed: the flat header "
            "the recorder writes; a JSON nesting depth within Python's recursion limit)"
        ) from None
    try:
        raw.decode("utf-8") and json.dumps(header, ensure_ascii=False).encode("utf-8")
    except UnicodeError as exc:
        raise TraceFormatError(
            f"{path}: damaged trace: header.json holds text that is not valid Unicode "
            f"({brief(exc)}); allowed: UTF-8 strings (no lone surrogates such as \\ud800)"
        ) from None
    if not isinstance(header, dict) or header.get("magic") != MAGIC:
        got = header.get("magic") if isinstance(header, dict) else type(header).__name__
        raise TraceFormatError(f"{path}: not a kvlab trace: magic is {got!r}, expected {MAGIC!r}")
    version = header.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise TraceFormatError(
            f"{path}: damaged trace: format_version {version!r} is not an int >= 1"
        )
    if version > FORMAT_VERSION:
        raise TraceFormatError(
            f"{path}: written by a newer kvlab (format_version {version}, by kvlab "
            f"{header.get('kvlab_version')}); this kvlab {_KVLAB_VERSION} reads format_version "
            f"<= {FORMAT_VERSION}: upgrade kvlab"
        )
    for key, typ in (
        ("num_events", int),
        ("arrays", dict),
        ("requests", list),
        ("initial_state", dict),
    ):
        if not isinstance(header.get(key), typ):
            raise TraceFormatError(
                f"{path}: damaged trace: header field {key!r} missing or not a {typ.__name__}"
            )
    return header


def _rebuild_state(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], tables: FrozenTables
) -> KVState:
    state = KVState(int(meta["num_blocks"]), int(meta["num_groups"]), meta.get("null_block_id"),
                    tables)  # fmt: skip
    ref_cnt, block_hash = arrays["init_ref_cnt"].tolist(), arrays["init_block_hash"].tolist()
    if len(ref_cnt) != state.num_blocks or len(block_hash) != state.num_blocks:
        raise ValueError(
            f"initial ref_cnt/block_hash length differs from num_blocks={state.num_blocks}"
        )
    state.ref_cnt, state.block_hash = ref_cnt, block_hash
    state.free_queue = OrderedDict.fromkeys(arrays["init_free_queue"].tolist())
    for code, bid in arrays["init_cached"].tolist():
        state.cached[code] = state.cached.get(code, ()) + (bid,)
    for group, req, bid in arrays["init_req"].tolist():
        state.req_to_blocks[group].setdefault(req, []).append(bid)
    return state
