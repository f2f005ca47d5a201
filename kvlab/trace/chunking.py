"""Columnarisation: turn a recorder's buffer of hook tuples into numpy columns, in one batch.

The recorder's hooks only append ``(kind, group, request, a, b, payload)`` tuples (hash bytes go
to a side list); every ``chunk_size`` events this module converts the batch:

* each column in one C-level pass (``map(itemgetter)`` + ``np.fromiter``);
* request ids and hashes interned into the tables (only unseen values take the slow path);
* call args / results packed per call name as ``kvlab.trace.events.CallSpec`` describes, one
  numpy operation per name (a decode step's ``allocate_slots`` needs no payload);
* the call depth derived from the CALL_BEGIN / CALL_END rows with a cumulative sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from kvlab.core.kv_cache_utils import get_block_hash, get_group_id
from kvlab.trace.events import CALL_SPECS, VERBATIM, WIDE, EventKind, pack_wide
from kvlab.trace.tables import InternTables

__all__ = ["Chunk", "columnarise"]

K = EventKind
_G_KIND, _G_GROUP, _G_REQUEST, _G_A, _G_B, _G_PAYLOAD = (itemgetter(i) for i in range(6))
_EMPTY: tuple[int, ...] = ()
_SIDE = np.zeros(256, dtype=bool)
_SIDE[[K.BLOCK_STORED, K.BLOCK_REMOVED, K.LOOKED_UP]] = True  # kinds with a side-list item
_I32 = np.iinfo(np.int32)
_LO, _HI = WIDE + 1, _I32.max  # NOTE: call values in [_LO, _HI] pack as is; others go WIDE


@dataclass
class Chunk:
    """One batch, ready for ColumnStore.append_chunk (plus the depth after it)."""

    cols: dict[str, np.ndarray]
    lengths: np.ndarray
    payload: np.ndarray
    depth_after: int


def columnarise(buf: list[tuple], side: list[Any], tables: InternTables, call_names: list[str],
                depth_before: int) -> Chunk:  # fmt: skip
    """Convert one buffer of hook tuples (and its side list) into columns.

    Args:
        buf: Hook tuples ``(kind, group, request, a, b, payload)``; CALL rows hold the call id
            in ``group`` and the raw args / result as ``payload``.
        side: Hash bytes of the LOOKED_UP / BLOCK_REMOVED / BLOCK_STORED rows, in row order.
        tables: Intern tables (request ids and hashes are added).
        call_names: Call-name table (call id -> name).
        depth_before: Call nesting depth before the first row.

    Returns:
        The Chunk.

    Raises:
        OverflowError: A value does not fit its column (CALL args never do: they go WIDE).
        RuntimeError: The side list does not match the rows (a recorder bug).

    NOTE: ``buf`` and ``side`` are not modified (the caller clears them once the chunk is
    stored), so a failed batch can be repaired and retried; interning is idempotent.
    """
    n = len(buf)
    kind = np.fromiter(map(_G_KIND, buf), dtype=np.uint8, count=n)
    a = _fit(np.fromiter(map(_G_A, buf), dtype=np.int64, count=n), np.int32, "a")
    b = _fit(np.fromiter(map(_G_B, buf), dtype=np.int64, count=n), np.int32, "b")
    group = _fit(np.fromiter(map(_G_GROUP, buf), dtype=np.int64, count=n), np.int16, "group")
    pls = list(map(_G_PAYLOAD, buf))
    if side:
        _intern_side(side, kind, a, b, group, pls, tables)
    _pack_calls(kind, group, a, b, pls, call_names)
    lengths = np.fromiter(map(len, pls), dtype=np.int64, count=n)
    payload = np.fromiter(chain.from_iterable(pls), dtype=np.int64, count=int(lengths.sum()))
    depth, depth_after = _depths(kind, depth_before)
    cols = {"kind": kind, "group": group, "request": _requests(buf, tables), "a": a, "b": b,
            "depth": depth}  # fmt: skip
    return Chunk(cols, lengths, _fit(payload, np.int32, "payload"), depth_after)


def _fit(values: np.ndarray, dtype: type, name: str) -> np.ndarray:
    info = np.iinfo(dtype)
    if len(values) and (values.min() < info.min or values.max() > info.max):
        raise OverflowError(f"an event's {name} value does not fit {np.dtype(dtype).name}: "
                            f"range [{values.min()}, {values.max()}]")  # fmt: skip
    return values.astype(dtype)


def _requests(buf: list[tuple], tables: InternTables) -> np.ndarray:
    reqs = list(map(_G_REQUEST, buf))
    rget = tables._request_index.get
    out = np.array([-1 if r is None else rget(r, -2) for r in reqs], dtype=np.int32)
    new = np.flatnonzero(out == -2).tolist()
    if new:  # ids seen for the first time: intern each once, then fill just those rows
        for r in dict.fromkeys(reqs[i] for i in new):
            tables.request_index(r)
        out[new] = [rget(reqs[i]) for i in new]
    return out


def hash_indexes(hashes: list[bytes], tables: InternTables) -> list[int]:
    """Intern ``hashes`` (new ones in order of appearance) and return their indexes."""
    hget = tables._hash_index.get
    idx = list(map(hget, hashes))
    if None in idx:  # unseen hashes: intern each once, then fill just those positions
        miss = np.flatnonzero(np.equal(np.array(idx, dtype=object), None)).tolist()
        for h in dict.fromkeys(hashes[j] for j in miss):
            tables.hash_index(h)
        for j in miss:
            idx[j] = hget(hashes[j])
    return idx


def _intern_side(side: list[Any], kind: np.ndarray, a: np.ndarray, b: np.ndarray,
                 group: np.ndarray, pls: list, tables: InternTables) -> None:  # fmt: skip
    """Hash bytes -> hash indexes: LOOKED_UP a, BLOCK_REMOVED b + group, BLOCK_STORED payload."""
    rows = np.flatnonzero(_SIDE[kind])
    if len(rows) != len(side):
        raise RuntimeError(f"recorder side list out of step: {len(side)} items, {len(rows)} rows")
    side_kinds = kind[rows]
    look = np.flatnonzero(side_kinds == K.LOOKED_UP)
    if len(look):
        hashes = side if len(look) == len(side) else [side[j] for j in look.tolist()]
        a[rows[look]] = hash_indexes(hashes, tables)
    removed = np.flatnonzero(side_kinds == K.BLOCK_REMOVED)
    if len(removed):
        keys = [side[j] for j in removed.tolist()]
        b[rows[removed]] = hash_indexes(list(map(get_block_hash, keys)), tables)
        group[rows[removed]] = list(map(get_group_id, keys))
    stored = np.flatnonzero(side_kinds == K.BLOCK_STORED).tolist()
    if stored:  # payload = block ids, then their hash indexes; one batch for all rows
        per_row = [side[j] for j in stored]
        idx = hash_indexes(list(map(get_block_hash, chain.from_iterable(per_row))), tables)
        pos = 0
        for j, keys in zip(stored, per_row, strict=True):
            row = int(rows[j])
            pls[row] = (*pls[row], *idx[pos : pos + len(keys)])
            pos += len(keys)


def _pack_calls(kind: np.ndarray, group: np.ndarray, a: np.ndarray, b: np.ndarray, pls: list,
                call_names: list[str]) -> None:  # fmt: skip
    """Pack CALL rows' raw args / results into a, b and a trimmed payload (per call name).

    Rows holding a value outside [WIDE + 1, int32 max] (e.g. a refused
    ``allocate_slots(r, 10**12)``) are stored WIDE (``pack_wide``): lossless, never an error.
    """
    rows = np.flatnonzero((kind == K.CALL_BEGIN) | (kind == K.CALL_END))
    if not len(rows):
        return
    keys = kind[rows].astype(np.int64) << 16 | group[rows].astype(np.int64)
    for key in np.unique(keys).tolist():
        sel = rows[keys == key].tolist()
        is_end, call_id = (key >> 16) == K.CALL_END, key & 0xFFFF
        spec = CALL_SPECS.get(call_names[call_id])
        order = None if spec is None else (tuple(range(len(spec.result))) if is_end else spec.pack)
        values = [pls[i] for i in sel]
        if order is None or set(map(len, values)) != {len(order)}:
            for i, v in zip(sel, values, strict=True):
                _store_loose(i, v, a, b, pls)
            continue
        if not _pack_fixed(sel, values, order, a, b, pls):
            for i, v in zip(sel, values, strict=True):  # some value is wide: row by row
                if _fits(v):
                    _pack_fixed([i], [v], order, a, b, pls)
                else:
                    _store_loose(i, v, a, b, pls)


def _fits(values: tuple) -> bool:
    return all(_LO <= v <= _HI for v in values)


def _store_loose(i: int, v: tuple, a: np.ndarray, b: np.ndarray, pls: list) -> None:
    """Store one call row unpacked: VERBATIM when every value fits int32, else WIDE."""
    if _fits(v):
        a[i], b[i], pls[i] = VERBATIM, len(v), tuple(v)
    else:
        a[i], b[i], pls[i] = WIDE, len(v), pack_wide(v)


def _pack_fixed(sel: list[int], values: list, order: tuple[int, ...], a: np.ndarray,
                b: np.ndarray, pls: list) -> bool:  # fmt: skip
    """Pack rows of one layout; False (nothing written) if a value is outside [_LO, _HI]."""
    arity = len(order)
    if arity == 0:
        return True  # () stays an empty payload
    try:
        arr = np.fromiter(chain.from_iterable(values), dtype=np.int64, count=len(sel) * arity)
    except OverflowError:  # beyond int64
        return False
    if arr.min() < _LO or arr.max() > _HI:
        return False
    arr = arr.reshape(len(sel), arity)[:, list(order)]
    a[sel] = arr[:, 0]
    if arity > 1:
        b[sel] = arr[:, 1]
    for i in sel:
        pls[i] = _EMPTY
    if arity > 2:  # the rest, trailing zeros trimmed; most rows (decode steps) keep nothing
        rest = arr[:, 2:]
        nonzero = rest != 0
        keep = np.where(nonzero.any(1), rest.shape[1] - np.argmax(nonzero[:, ::-1], 1), 0)
        for j in np.flatnonzero(keep).tolist():
            pls[sel[j]] = tuple(rest[j, : keep[j]].tolist())
    return True


def _depths(kind: np.ndarray, depth_before: int) -> tuple[np.ndarray, int]:
    is_begin = kind == K.CALL_BEGIN
    level = np.cumsum(is_begin.astype(np.int64) - (kind == K.CALL_END)) + depth_before
    depth = np.clip(level - is_begin, 0, 255).astype(np.uint8)
    return depth, (max(int(level[-1]), 0) if len(level) else depth_before)
