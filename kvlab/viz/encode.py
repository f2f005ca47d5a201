"""A trace in the compact form the widget's JavaScript reads: numpy columns as base64 bytes.

No per-event JSON objects: each column travels as the little-endian bytes of its numpy array
(base64), ragged lists as (offsets, values) pairs, so a 200,000-event trace is a few MB and
decodes in JavaScript with ``new Int32Array(bytes.buffer)`` and no parsing loop. The event
columns take the narrowest integer type of their kind that holds their values (``B(i4*)``:
int8, int16 or int32; ``B(u4*)``: uint8, uint16 or uint32); each field names its dtype.

Layout of ``encode_trace(trace)`` (``B(dtype)`` = base64 of a little-endian array)::

    format          "kvlab-trace/1"
    num_events      int
    columns         kind B(u1) depth B(u1) group B(i4*) request B(i4*) a B(i4*) b B(i4*)
                    offsets B(u4*) [n + 1]  payload B(i4*)  step_seq B(i4)  step_val B(i4)
    requests        [str]              request index -> id
    hashes          B(u1) [num_hashes * 4]: the first 4 bytes of each BlockHash (short hex)
    call_names      [str]              call id -> name
    call_specs      {name: {args, result, pack}}  (kvlab.trace.events.CALL_SPECS)
    kinds           [str]              EventKind value -> name
    config          Trace.config (num_gpu_blocks, groups, ...)
    initial         num_blocks, num_groups, null_block_id (-1 = none), free_queue B(i4),
                    ref_cnt B(i4), block_hash B(f8) (key code or -1),
                    cached {codes B(f8), offsets B(i4), values B(i4)},
                    req_to_blocks [per group {requests B(i4), offsets B(i4), values B(i4)}]
    hash_tree       parent B(i4) [num_hashes] (-1 root, -2 not in a chain),
                    position B(i4) [num_hashes], chains {offsets B(i4), values B(i4)} per
                    request index
    key_group_bits  16: a key code is ``hash_index * 2**16 + kv_cache_group_id``

Examples:
    >>> data = encode_trace(trace)                     # doctest: +SKIP
    >>> decode_array(data["columns"]["kind"]).tolist()[:3]  # doctest: +SKIP
    [0, 17, 12]
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from kvlab.trace import CALL_SPECS, EventKind, KVState
from kvlab.trace.tables import GROUP_BITS
from kvlab.viz.hash_tree import build_hash_tree

__all__ = ["FORMAT", "decode_array", "encode_array", "encode_state", "encode_trace", "narrowest"]

FORMAT = "kvlab-trace/1"
"""Format tag of ``encode_trace`` output (bumped on any incompatible change)."""

_COLUMN_DTYPES = {
    "kind": "<u1",
    "depth": "<u1",
    "group": "<i4*",
    "request": "<i4*",
    "a": "<i4*",
    "b": "<i4*",
    "offsets": "<u4*",
    "payload": "<i4*",
    "step_seq": "<i4",
    "step_val": "<i4",
}
"""Column -> dtype; a trailing ``*`` means "the narrowest of this kind that fits" (narrowest)."""


def narrowest(values: Any, dtype: str) -> str:
    """The narrowest integer dtype of ``dtype``'s kind (signed or not) that holds ``values``.

    Halves or quarters the bytes of columns whose values are small (block ids of a small pool,
    request indexes, hash indexes), which is most of an exported page's size and load time.

    Args:
        values: Integers (any array-like).
        dtype: ``"<i4"`` or ``"<u4"`` (the widest allowed), with or without a trailing ``*``.

    Returns:
        A numpy dtype string: ``"|i1"``, ``"<i2"``, ``"<i4"``, ``"|u1"``, ``"<u2"`` or ``"<u4"``.

    Raises:
        ValueError: If ``dtype`` is not ``"<i4"`` or ``"<u4"``.
    """
    widest = np.dtype(dtype.rstrip("*"))
    if widest.kind not in "iu" or widest.itemsize != 4:
        raise ValueError(f"narrowest() takes '<i4' or '<u4', got {dtype!r}")
    arr = np.asarray(values)
    lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
    for size in (1, 2, 4):
        cand = np.dtype(f"<{widest.kind}{size}")
        info = np.iinfo(cand)
        if info.min <= lo and hi <= info.max:
            return cand.str
    return widest.str  # NOTE: encode_array then raises OverflowError naming the range


def encode_array(values: Any, dtype: str) -> dict[str, Any]:
    """``{"dtype", "length", "b64"}``: ``values`` as little-endian ``dtype`` bytes, base64.

    Raises:
        OverflowError: If a value does not fit ``dtype``.
    """
    arr = np.asarray(values)
    target = np.dtype(dtype)
    if arr.size and target.kind in "iu":
        info = np.iinfo(target)
        if arr.min() < info.min or arr.max() > info.max:
            raise OverflowError(f"values in [{arr.min()}, {arr.max()}] do not fit {target}")
    out = np.ascontiguousarray(arr, dtype=target)
    return {
        "dtype": target.str,
        "length": int(out.size),
        "b64": base64.b64encode(out.tobytes()).decode(),
    }


def decode_array(field: dict[str, Any]) -> np.ndarray:
    """Inverse of encode_array."""
    raw = base64.b64decode(field["b64"])
    return np.frombuffer(raw, dtype=np.dtype(field["dtype"]), count=field["length"]).copy()


def _ragged(lists: list[list[int]] | list[tuple[int, ...]]) -> dict[str, Any]:
    lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = [v for x in lists for v in x]
    return {"offsets": encode_array(offsets, "<i4"), "values": encode_array(flat, "<i4")}


def encode_state(state: KVState) -> dict[str, Any]:
    """A KVState in the compact form (the ``initial`` entry of encode_trace)."""
    cached = list(state.cached.items())
    groups = []
    for per_req in state.req_to_blocks:
        items = list(per_req.items())
        groups.append(
            {
                "requests": encode_array([r for r, _ in items], "<i4"),
                **_ragged([b for _, b in items]),
            }
        )
    return {
        "num_blocks": state.num_blocks,
        "num_groups": state.num_groups,
        "null_block_id": -1 if state.null_block_id is None else state.null_block_id,
        "free_queue": encode_array(state.free_queue_order(), "<i4"),
        "ref_cnt": encode_array(state.ref_cnt, "<i4"),
        "block_hash": encode_array(state.block_hash, "<f8"),
        "cached": {
            "codes": encode_array([c for c, _ in cached], "<f8"),
            **_ragged([ids for _, ids in cached]),
        },
        "req_to_blocks": groups,
    }


def _hash_tree(trace: Any) -> dict[str, Any]:
    tree = build_hash_tree(trace)
    n = trace.tables.num_hashes
    parent = np.full(n, -2, dtype=np.int64)
    position = np.full(n, -1, dtype=np.int64)
    for h, p in tree.parent.items():
        parent[h], position[h] = p, tree.position[h]
    index = {r: i for i, r in enumerate(trace.tables.requests)}
    chains: list[list[int]] = [[] for _ in trace.tables.requests]
    for r, chain in tree.chains.items():
        chains[index[r]] = chain
    return {
        "parent": encode_array(parent, "<i4"),
        "position": encode_array(position, "<i4"),
        "chains": _ragged(chains),
    }


def _json_safe(value: Any) -> Any:
    """A copy of ``value`` that json.dumps accepts (numpy scalars -> int/float, tuples -> lists)."""
    return json.loads(
        json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    )


def encode_trace(trace: Any) -> dict[str, Any]:
    """Everything the widget's JavaScript needs to replay and draw ``trace`` (see module doc).

    Args:
        trace: A kvlab.trace.Trace.

    Returns:
        A JSON-serialisable dict.

    Raises:
        OverflowError: If a step or event index does not fit int32.
    """
    cols = trace.cols.arrays()
    columns = {
        name: encode_array(cols[name], narrowest(cols[name], dt) if dt.endswith("*") else dt)
        for name, dt in _COLUMN_DTYPES.items()
    }
    tables = trace.tables
    starts = tables.hash_offsets[:-1]
    prefix = np.zeros((tables.num_hashes, 4), dtype=np.uint8)
    for k in range(4):  # NOTE: hashes are >= 4 bytes in practice; shorter ones pad with 0
        ok = tables.hash_offsets[1:] - starts > k
        prefix[ok, k] = tables.hash_blob[starts[ok] + k]
    return {
        "format": FORMAT,
        "num_events": len(trace),
        "columns": columns,
        "requests": list(tables.requests),
        "hashes": encode_array(prefix.reshape(-1), "<u1"),
        "call_names": list(trace.call_names),
        "call_specs": {
            name: {
                "args": list(s.args),
                "result": list(s.result),
                "pack": None if s.pack is None else list(s.pack),
            }
            for name, s in CALL_SPECS.items()
        },
        "kinds": [k.name for k in EventKind],
        "config": _json_safe(trace.config),
        "initial": encode_state(trace.initial_state),
        "hash_tree": _hash_tree(trace),
        "key_group_bits": GROUP_BITS,
    }
