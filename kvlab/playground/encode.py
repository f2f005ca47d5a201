"""A LiteTrace in the trace player's format (``kvlab-trace/1``), with the standard library only.

``kvlab.viz.encode.encode_trace`` writes numpy columns as base64 little-endian bytes; this does
the same with :mod:`array` and :mod:`base64`, choosing the same narrowest dtypes, so the player
(``replay.js``) receives byte-for-byte what ``export_html`` would send for the same run
(tests/playground/test_equivalence.py). The hash tree comes from ``kvlab.playground.chains``.

Examples:
    >>> encode_array([1, 2, 300], narrowest([1, 2, 300], "<i4"))["dtype"]
    '<i2'
"""

from __future__ import annotations

import base64
import json
import sys
from array import array
from typing import Any

from kvlab.playground.chains import build_chains
from kvlab.playground.events import InitialState, LiteTrace
from kvlab.trace.events import CALL_SPECS, EventKind

__all__ = ["FORMAT", "encode_array", "encode_lite_trace", "narrowest"]

FORMAT = "kvlab-trace/1"
"""The player's format tag (``kvlab.viz.encode.FORMAT``)."""

GROUP_BITS = 16
"""``kvlab.trace.tables.GROUP_BITS``: a key code is ``hash_index << 16 | group``."""

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
# numpy's dtype.str -> (array typecode, item size); 1-byte types have no byte order ("|").
_TYPES = {
    "|i1": ("b", 1),
    "|u1": ("B", 1),
    "<i2": ("h", 2),
    "<u2": ("H", 2),
    "<i4": ("i", 4),
    "<u4": ("I", 4),
    "<f8": ("d", 8),
}
_BOUNDS = {
    "|i1": (-(2**7), 2**7 - 1),
    "|u1": (0, 2**8 - 1),
    "<i2": (-(2**15), 2**15 - 1),
    "<u2": (0, 2**16 - 1),
    "<i4": (-(2**31), 2**31 - 1),
    "<u4": (0, 2**32 - 1),
}


def _canonical(dtype: str) -> str:
    dtype = dtype.rstrip("*")
    return "|" + dtype[1:] if dtype[1:] in ("i1", "u1") else dtype


def narrowest(values: list[int], dtype: str) -> str:
    """``kvlab.viz.encode.narrowest``: the narrowest int dtype of ``dtype``'s kind that fits.

    Raises:
        ValueError: If ``dtype`` is not ``<i4`` or ``<u4`` (with or without ``*``).
    """
    base = dtype.rstrip("*")
    if base not in ("<i4", "<u4"):
        raise ValueError(f"narrowest() takes '<i4' or '<u4', got {dtype!r}")
    lo, hi = (min(values), max(values)) if values else (0, 0)
    for size in (1, 2, 4):
        cand = _canonical(f"<{base[1]}{size}")
        low, high = _BOUNDS[cand]
        if low <= lo and hi <= high:
            return cand
    return base


def encode_array(values: list[Any], dtype: str) -> dict[str, Any]:
    """``{"dtype", "length", "b64"}`` as ``kvlab.viz.encode.encode_array`` writes it.

    Raises:
        OverflowError: If a value does not fit ``dtype``.
    """
    dtype = _canonical(dtype)
    code, _ = _TYPES[dtype]
    if values and dtype in _BOUNDS:
        low, high = _BOUNDS[dtype]
        if min(values) < low or max(values) > high:
            raise OverflowError(f"values in [{min(values)}, {max(values)}] do not fit {dtype}")
    arr = array(code, [float(v) for v in values] if code == "d" else values)
    if sys.byteorder == "big":
        arr.byteswap()
    return {"dtype": dtype, "length": len(values), "b64": base64.b64encode(arr.tobytes()).decode()}


def _ragged(lists: list[Any]) -> dict[str, Any]:
    offsets = [0]
    for x in lists:
        offsets.append(offsets[-1] + len(x))
    flat = [v for x in lists for v in x]
    return {"offsets": encode_array(offsets, "<i4"), "values": encode_array(flat, "<i4")}


def encode_state(state: InitialState) -> dict[str, Any]:
    """The ``initial`` entry (``kvlab.viz.encode.encode_state``)."""
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
        "free_queue": encode_array(state.free_queue, "<i4"),
        "ref_cnt": encode_array(state.ref_cnt, "<i4"),
        "block_hash": encode_array(state.block_hash, "<f8"),
        "cached": {
            "codes": encode_array([c for c, _ in cached], "<f8"),
            **_ragged([ids for _, ids in cached]),
        },
        "req_to_blocks": groups,
    }


def _hash_tree(trace: LiteTrace) -> dict[str, Any]:
    tree = build_chains(trace)
    n = len(trace.hashes)
    parent, position = [-2] * n, [-1] * n
    for h, p in tree.parent.items():
        parent[h], position[h] = p, tree.position[h]
    index = {r: i for i, r in enumerate(trace.requests)}
    chains: list[list[int]] = [[] for _ in trace.requests]
    for r, chain in tree.chains.items():
        chains[index[r]] = chain
    return {
        "parent": encode_array(parent, "<i4"),
        "position": encode_array(position, "<i4"),
        "chains": _ragged(chains),
    }


def encode_lite_trace(trace: LiteTrace) -> dict[str, Any]:
    """Everything the player needs to replay and draw ``trace`` (``encode_trace``'s layout).

    Raises:
        OverflowError: If a value does not fit its column.
    """
    columns = {}
    for name, dtype in _COLUMN_DTYPES.items():
        values = getattr(trace, name)
        columns[name] = encode_array(
            values, narrowest(values, dtype) if dtype.endswith("*") else dtype
        )
    prefix = [b for h in trace.hashes for b in (h[:4] + bytes(4))[:4]]
    return {
        "format": FORMAT,
        "num_events": len(trace),
        "columns": columns,
        "requests": list(trace.requests),
        "hashes": encode_array(prefix, "<u1"),
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
        "config": json.loads(json.dumps(trace.config, default=str)),
        "initial": encode_state(trace.initial),
        "hash_tree": _hash_tree(trace),
        "key_group_bits": GROUP_BITS,
    }
