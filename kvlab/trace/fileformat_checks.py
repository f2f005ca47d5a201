"""What ``load_trace`` checks before it trusts a trace file: sizes first, then every field.

A trace file is untrusted input. Every size it states is bounded before anything is allocated
(a 1 MB zip entry may claim to inflate to 1 GB; a header may claim 10**11 blocks), and every
field is checked against what the recorder can write, so a damaged file fails at load with one
TraceFormatError naming the field and what is allowed, never later with a raw IndexError or a
silently wrong replay (a negative block id would index from the end of a Python list).

Limits (module constants; ``load_trace(path, max_bytes=...)`` raises the total):

====================  ===========  =============================================================
limit                 default      bounds
====================  ===========  =============================================================
DEFAULT_MAX_BYTES     1 GiB        the uncompressed size of all entries together (bytes)
MAX_HEADER_BYTES      64 MiB       header.json (bytes)
MAX_GROUPS            1024         initial_state.num_groups (kv cache groups)
MAX_MEMBERS           256          zip entries (a trace has 18), read from the end-of-central-
                                   directory record before ``zipfile`` parses the directory
====================  ===========  =============================================================

Nothing in a trace file is executed: arrays are parsed by ``parse_npy`` with pickles refused
(a .npy of dtype object is not an int array), the header by ``json``, and entry names are never
used as paths (nothing is extracted).
"""

from __future__ import annotations

import io
import os
import struct
import tokenize
import zipfile
import zlib
from typing import Any

import numpy as np

from kvlab.trace.events import KIND_SCHEMA, WIDE, EventKind, unpack_wide
from kvlab.trace.tables import GROUP_BITS

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_GROUPS",
    "MAX_HEADER_BYTES",
    "MAX_MEMBERS",
    "TraceFormatError",
    "brief",
    "check_columns",
    "check_header",
    "check_initial_state",
    "check_zip_directory",
    "read_entry",
]

DEFAULT_MAX_BYTES = 1 << 30
MAX_HEADER_BYTES = 64 << 20
MAX_GROUPS = 1024
MAX_MEMBERS = 256
_CHUNK = 1 << 20
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record (22 bytes + comment)
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # 20 bytes, right before the EOCD record
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # 56 bytes

K = EventKind
_BLOCK_A = [K.POPLEFT, K.REMOVE, K.APPEND, K.BLOCK_REMOVED]
_BLOCK_PAYLOAD = [K.POPLEFT_N, K.APPEND_N, K.GET_NEW_BLOCKS, K.TOUCH, K.FREE_BLOCKS,
                  K.REQ_BLOCKS_ADDED]  # fmt: skip
_GROUP_KINDS = [k for k, s in KIND_SCHEMA.items() if s.uses_group and s.mutates]
# NOTE: BLOCK_STORED may have no request (-1: a KV-event stream names none); REQ_* need one.
_REQUEST_KINDS = [K.REQ_BLOCKS_ADDED, K.REQ_BLOCKS_NULLED, K.REQ_FREED]


class TraceFormatError(ValueError):
    """A file is not a readable kvlab trace; the message says why and what was expected."""


def brief(exc: BaseException, limit: int = 200) -> str:
    """An exception's text for a message: at most ``limit`` characters, control characters
    escaped (a library's error may quote the file's bytes)."""
    text = str(exc)
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text)} characters)"
    return text.encode("unicode_escape", "backslashreplace").decode("ascii") if not (
        text.isprintable()) else text  # fmt: skip


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_zip_directory(path: Any) -> None:
    """Refuse a zip whose central directory lists more than MAX_MEMBERS entries, from its end
    record alone (``zipfile`` would build an object per entry: a million tiny members cost
    about 1 GB before any check could run). A file without an end record is left to zipfile.

    Raises:
        TraceFormatError: Naming the number of entries and the limit.
    """
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        tail_start = max(0, size - _EOCD.size - 0xFFFF)
        fh.seek(tail_start)
        tail = fh.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            return
        _, _, _, _, entries, _, _, _ = _EOCD.unpack_from(tail, at)
        if entries == 0xFFFF and at >= _ZIP64_LOCATOR.size:
            sig, _, where, _ = _ZIP64_LOCATOR.unpack_from(tail, at - _ZIP64_LOCATOR.size)
            if sig == b"PK\x06\x07" and where + _ZIP64_EOCD.size <= size:
                fh.seek(where)
                record = fh.read(_ZIP64_EOCD.size)
                if record[:4] == b"PK\x06\x06":
                    entries = _ZIP64_EOCD.unpack(record)[6]
    if entries > MAX_MEMBERS:
        raise TraceFormatError(
            f"{path}: not a kvlab trace: a zip of {entries} entries; a trace has 18, allowed at "
            f"most MAX_MEMBERS={MAX_MEMBERS}"
        )


def read_entry(zf: zipfile.ZipFile, path: Any, name: str, limit: int) -> bytes:
    """Read one zip entry, refusing it before reading when it inflates beyond ``limit`` bytes.

    Raises:
        TraceFormatError: Missing, too large, or damaged (CRC / truncated) entry.
    """
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise TraceFormatError(
            f"{path}: damaged trace: entry {name} listed in the header is missing"
        ) from None
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise TraceFormatError(
            f"{path}: damaged trace: entry {name} is compressed with method "
            f"{info.compress_type}; allowed: stored (0) or deflate (8), what save_trace writes"
        )
    if info.file_size > limit:
        raise TraceFormatError(
            f"{path}: entry {name} inflates to {info.file_size} bytes, over the limit of "
            f"{limit} bytes (load_trace(path, max_bytes=...) raises the limit for big traces)"
        )
    try:
        with zf.open(info) as fh:
            # NOTE: read in chunks: one read of the declared size would allocate it before
            # finding out that the entry holds far less (a 1 KB file may declare 1 GB).
            chunks, got = [], 0
            while got <= info.file_size:
                chunk = fh.read(min(_CHUNK, info.file_size + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            raw = b"".join(chunks)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError,
            ValueError) as exc:  # fmt: skip
        # NOTE: zipfile raises RuntimeError for an encrypted entry, NotImplementedError for an
        # unknown method, UnicodeDecodeError (a ValueError) for a name that is not UTF-8.
        raise TraceFormatError(
            f"{path}: damaged trace: entry {name} unreadable ({brief(exc)})"
        ) from None
    if len(raw) != info.file_size:
        raise TraceFormatError(f"{path}: damaged trace: entry {name} has the wrong length")
    return raw


def parse_npy(raw: bytes, path: Any, name: str, want: np.dtype, shape: list[int]) -> np.ndarray:
    """Parse a .npy entry without allocating more than its bytes: dtype and shape must match.

    Raises:
        TraceFormatError: Not a .npy, another dtype or shape, or a length that does not fit.
    """
    fp = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(fp)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        got_shape, fortran, dtype = read_header(fp)
    except (ValueError, TypeError, SyntaxError, EOFError, tokenize.TokenError, KeyError,
            RecursionError, MemoryError) as exc:  # fmt: skip
        raise TraceFormatError(
            f"{path}: damaged trace: entry {name}.npy unreadable ({brief(exc)})"
        ) from None
    if dtype != want:
        raise TraceFormatError(f"{path}: damaged trace: {name} has dtype {dtype}, expected {want}")
    if list(got_shape) != shape:
        raise TraceFormatError(
            f"{path}: damaged trace: {name} has shape {list(got_shape)}, header says {shape}"
        )
    count = int(np.prod(got_shape, dtype=np.int64)) if got_shape else 1
    start = fp.tell()
    if len(raw) - start != count * dtype.itemsize:
        raise TraceFormatError(
            f"{path}: damaged trace: {name}.npy holds {len(raw) - start} data bytes, its shape "
            f"{list(got_shape)} needs {count * dtype.itemsize}"
        )
    arr = np.frombuffer(raw, dtype=dtype, count=count, offset=start)
    return arr.reshape(got_shape, order="F" if fortran else "C")


def check_header(header: dict[str, Any], path: Any, expected: dict[str, np.dtype]) -> None:
    """Check every header field the loader uses (types, ranges, array specs).

    Raises:
        TraceFormatError: Naming the first bad field and what is allowed.
    """

    def bad(field: str, allowed: str, got: Any) -> TraceFormatError:
        shown = repr(got) if len(repr(got)) <= 80 else repr(got)[:77] + "..."
        return TraceFormatError(
            f"{path}: damaged trace: header field {field}: allowed {allowed}, got {shown}"
        )

    n = header["num_events"]
    if not _int(n) or n < 0:
        raise bad("num_events", "an int >= 0", n)
    config = header.get("config")
    if config is not None and not isinstance(config, dict):
        raise bad("config", "a JSON object (dict) of trace metadata", config)
    if config:
        _check_config(config, bad)
    names = header.get("call_names")
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(x, str) and x for x in names)
        or len(set(names)) != len(names)
    ):
        raise bad("call_names", "a non-empty list of distinct non-empty call names (str)", names)
    interval = header.get("checkpoint_interval", 4096)
    if not _int(interval) or interval < 1:
        raise bad("checkpoint_interval", "an int >= 1 (events between checkpoints)", interval)
    requests = header["requests"]
    if not all(isinstance(r, str) for r in requests) or len(set(requests)) != len(requests):
        raise bad("requests", "a list of distinct request ids (str)", requests)
    meta = header["initial_state"]
    num_blocks, num_groups = meta.get("num_blocks"), meta.get("num_groups")
    if not _int(num_blocks) or num_blocks < 1:
        raise bad("initial_state.num_blocks", "an int >= 1", num_blocks)
    if not _int(num_groups) or not 0 <= num_groups <= MAX_GROUPS:
        raise bad("initial_state.num_groups", f"an int in [0, {MAX_GROUPS}]", num_groups)
    null = meta.get("null_block_id")
    if null is not None and (not _int(null) or not 0 <= null < num_blocks):
        raise bad("initial_state.null_block_id", f"null or an int in [0, {num_blocks})", null)
    for name, spec in header["arrays"].items():
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if not isinstance(shape, list) or not all(_int(d) and d >= 0 for d in shape):
            raise bad(f"arrays.{name}", "{'dtype': str, 'shape': [ints >= 0]}", spec)
        ndim = 2 if name in ("init_cached", "init_req") else 1
        if name in expected and len(shape) != ndim:
            raise bad(f"arrays.{name}", f"a {ndim}-D shape", shape)


_CONFIG_INTS = {"num_groups": 0, "num_gpu_blocks": 0, "hash_block_size": 1, "max_model_len": 0,
                "null_block_id": 0}  # fmt: skip
_GROUP_INTS = {"kv_cache_group_id": 0, "block_size": 1, "sliding_window": 1,
               "attention_chunk_size": 1}  # fmt: skip


def _check_config(config: dict[str, Any], bad: Any) -> None:
    """The config keys kvlab's views read have the types the recorders write (other keys are
    free metadata): ints (or null), bools, strings, and ``groups`` a list of dicts."""

    def int_or_null(where: str, v: Any, low: int) -> None:
        if v is not None and (not _int(v) or v < low):
            raise bad(where, f"null or an int >= {low}", v)

    for key, low in _CONFIG_INTS.items():
        int_or_null(f"config.{key}", config.get(key), low)
    for key in ("enable_caching", "use_eagle"):
        if key in config and not isinstance(config[key], bool):
            raise bad(f"config.{key}", "true or false", config[key])
    for key in ("cache", "coordinator"):
        if config.get(key) is not None and not isinstance(config[key], str):
            raise bad(f"config.{key}", "null or a string", config[key])
    ids = config.get("eagle_group_ids")
    if ids is not None and (not isinstance(ids, list) or not all(_int(g) for g in ids)):
        raise bad("config.eagle_group_ids", "a list of ints", ids)
    groups = config.get("groups")
    if groups is None:
        return
    if not isinstance(groups, list) or len(groups) > MAX_GROUPS:
        raise bad("config.groups", f"a list of at most {MAX_GROUPS} group dicts", groups)
    for g, spec in enumerate(groups):
        if not isinstance(spec, dict):
            raise bad(f"config.groups[{g}]", "a dict (kv_cache_group_id, spec, block_size...)",
                      spec)  # fmt: skip
        for key, low in _GROUP_INTS.items():
            int_or_null(f"config.groups[{g}].{key}", spec.get(key), low)
        for key in ("spec", "manager"):
            if spec.get(key) is not None and not isinstance(spec[key], str):
                raise bad(f"config.groups[{g}].{key}", "null or a string", spec[key])


def _in(values: np.ndarray, lo: int, hi: int) -> bool:
    return not len(values) or (int(values.min()) >= lo and int(values.max()) < hi)


def check_columns(cols: Any, arrays: dict[str, np.ndarray], header: dict[str, Any],
                  path: Any) -> None:  # fmt: skip
    """Check the event columns against the header and each other (vectorised).

    Raises:
        TraceFormatError: Naming the column and the allowed range.
    """

    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"{path}: damaged trace: {what}")

    n = header["num_events"]
    for name in ("kind", "depth", "group", "request", "a", "b"):
        if len(arrays[name]) != n:
            raise bad(f"column {name} has {len(arrays[name])} rows, expected {n}")
    off = cols.offsets.astype(np.int64)
    if len(off) != n + 1 or off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] != len(cols.payload):
        raise bad(f"payload offsets inconsistent with {n} events and {len(cols.payload)} ints")
    kind = cols.kind
    if not _in(kind, 0, len(EventKind)):
        raise bad(f"kind: allowed 0..{len(EventKind) - 1} (EventKind), got {int(kind.max())}")
    seq = cols.step_seq
    if (
        len(seq) == 0 or len(seq) != len(cols.step_val) or seq[0] != 0
        or np.any(np.diff(seq) <= 0) or seq[-1] > n
    ):  # fmt: skip
        raise bad(f"step_seq: allowed strictly increasing from 0 to <= {n}, one step_val each")
    meta = header["initial_state"]
    num_blocks, num_groups = meta["num_blocks"], meta["num_groups"]
    num_requests, nh = len(header["requests"]), len(arrays["hash_offsets"]) - 1
    num_calls = len(header["call_names"])
    checks = [
        ("request", cols.request, np.ones(n, dtype=bool), -1, num_requests),
        ("request", cols.request, np.isin(kind, _REQUEST_KINDS), 0, num_requests),
        ("group", cols.group, np.isin(kind, _GROUP_KINDS), 0, max(num_groups, 1)),
        ("group (call id)", cols.group, np.isin(kind, [K.CALL_BEGIN, K.CALL_END]), 0, num_calls),
        ("a (block_id)", cols.a, np.isin(kind, _BLOCK_A), 0, num_blocks),
        ("a (hash index)", cols.a, kind == K.LOOKED_UP, 0, nh),
        ("b (hash index)", cols.b, kind == K.BLOCK_REMOVED, 0, nh),
    ]
    for name, col, sel, lo, hi in checks:
        if not _in(col[sel], lo, hi):
            raise bad(f"column {name}: allowed [{lo}, {hi}) for its event kinds")
    _check_payload(cols, kind, off, num_blocks, nh, bad)


def _check_payload(cols: Any, kind: np.ndarray, off: np.ndarray, num_blocks: int, nh: int,
                   bad: Any) -> None:  # fmt: skip
    lengths = np.diff(off)
    stored = kind == K.BLOCK_STORED
    if np.any(lengths[stored] % 2):
        raise bad("BLOCK_STORED payload: allowed n block ids then n hash indexes (even length)")
    pos_kind = np.repeat(kind, lengths)
    pos = np.arange(len(cols.payload), dtype=np.int64) - np.repeat(off[:-1], lengths)
    half = np.repeat(lengths // 2, lengths)
    payload = cols.payload
    block_pos = np.isin(pos_kind, _BLOCK_PAYLOAD) | ((pos_kind == K.BLOCK_STORED) & (pos < half))
    if not _in(payload[block_pos], 0, num_blocks):
        raise bad(f"payload block ids: allowed [0, {num_blocks})")
    if not _in(payload[(pos_kind == K.BLOCK_STORED) & (pos >= half)], 0, nh):
        raise bad(f"BLOCK_STORED hash indexes: allowed [0, {nh})")
    if not _in(payload[pos_kind == K.REQ_BLOCKS_NULLED], 0, 2**31):
        raise bad("REQ_BLOCKS_NULLED indices: allowed >= 0")
    # NOTE: the two variable layouts are checked row by row (rare rows: hybrid fixed-point
    # turns, and calls holding values beyond int32).
    for i in np.flatnonzero(kind == K.FIXED_POINT_ITERATED).tolist():
        if not _fixed_point_ok(payload[off[i] : off[i + 1]].tolist()):
            raise bad(f"event {i}: FIXED_POINT_ITERATED payload: allowed hit_length_out, flags, "
                      "n group ids, then n block counts and the block ids they count")  # fmt: skip
    calls = np.flatnonzero(np.isin(kind, [K.CALL_BEGIN, K.CALL_END]) & (cols.a == WIDE))
    for i in calls.tolist():
        try:
            unpack_wide(payload[off[i] : off[i + 1]].tolist())
        except ValueError as exc:
            raise bad(f"event {i}: WIDE call payload: allowed pack_wide's limbs ({exc})") from None


def _fixed_point_ok(values: list[int]) -> bool:
    if len(values) < 2 or values[1] < 0:
        return False
    n = values[1] >> 1
    if n == 0:
        return True
    counts = values[2 + n : 2 + 2 * n]
    return len(counts) == n and min(counts) >= 0 and len(values) == 2 + 2 * n + sum(counts)


def check_initial_state(arrays: dict[str, np.ndarray], header: dict[str, Any], path: Any) -> None:
    """Check the initial-state arrays (ranges, lengths, distinct queue entries).

    Raises:
        TraceFormatError: Naming the array and what is allowed.
    """
    meta = header["initial_state"]
    num_blocks, num_groups, null = meta["num_blocks"], meta["num_groups"], meta.get("null_block_id")
    nh, num_requests = len(arrays["hash_offsets"]) - 1, len(header["requests"])

    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"{path}: damaged trace: {what}")

    ref_cnt, block_hash = arrays["init_ref_cnt"], arrays["init_block_hash"]
    if len(ref_cnt) != num_blocks or len(block_hash) != num_blocks:
        raise bad(f"init_ref_cnt / init_block_hash: allowed one entry per block ({num_blocks})")
    real = np.ones(num_blocks, dtype=bool)
    if null is not None:
        real[null] = False  # NOTE: the null block's ref_cnt is not meaningful (may be < 0)
    if not _in(ref_cnt[real], 0, 2**62):
        raise bad("init_ref_cnt: allowed >= 0 for every block but the null block")
    queue = arrays["init_free_queue"]
    if not _in(queue, 0, num_blocks) or len(np.unique(queue)) != len(queue):
        raise bad(f"init_free_queue: allowed distinct block ids in [0, {num_blocks})")
    cached, req = arrays["init_cached"], arrays["init_req"]
    if cached.ndim != 2 or cached.shape[1] != 2 or req.ndim != 2 or req.shape[1] != 3:
        raise bad("init_cached / init_req: allowed shapes [k, 2] and [m, 3]")
    codes = np.concatenate([block_hash[block_hash != -1], cached[:, 0]])
    if not _in(codes >> GROUP_BITS, 0, nh) or not _in(codes & ((1 << GROUP_BITS) - 1), 0,
                                                        max(num_groups, 1)):  # fmt: skip
        raise bad(f"key codes: allowed -1 or hash index in [0, {nh}) and group < {num_groups}")
    if not _in(cached[:, 1], 0, num_blocks) or not _in(req[:, 2], 0, num_blocks):
        raise bad(f"init_cached / init_req block ids: allowed [0, {num_blocks})")
    if not _in(req[:, 0], 0, num_groups) or not _in(req[:, 1], 0, num_requests):
        raise bad(
            f"init_req: allowed group in [0, {num_groups}), request in [0, {num_requests})"
        )
