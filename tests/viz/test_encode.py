"""encode_trace: compact columns that decode back to the trace's own arrays."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvlab.trace import EventKind, Trace
from kvlab.viz import build_hash_tree, encode_trace
from kvlab.viz.encode import FORMAT, decode_array, encode_array


def test_columns_round_trip(hybrid: Trace) -> None:
    data = encode_trace(hybrid)
    assert data["format"] == FORMAT and data["num_events"] == len(hybrid)
    arrays = hybrid.cols.arrays()
    for name, field in data["columns"].items():
        got = decode_array(field)
        assert np.array_equal(got, arrays[name]), name
        assert got.dtype.kind == arrays[name].dtype.kind, name
    assert data["requests"] == ["a", "b"] and data["kinds"][17] == "CALL_BEGIN"
    assert data["call_names"] == hybrid.call_names


def test_compact_not_one_object_per_event(hybrid: Trace) -> None:
    text = json.dumps(encode_trace(hybrid))
    assert all(isinstance(f["b64"], str) for f in encode_trace(hybrid)["columns"].values())
    # 20 bytes per event + payload, base64: far below a JSON object per event
    assert len(text) < 12_000 and text.count("{") < 80


def test_hash_prefixes_and_initial_state(shared: Trace) -> None:
    data = encode_trace(shared)
    prefixes = decode_array(data["hashes"]).reshape(-1, 4)
    for i in range(shared.tables.num_hashes):
        assert bytes(prefixes[i]) == shared.tables.hash_bytes(i)[:4]
    ini = data["initial"]
    assert decode_array(ini["free_queue"]).tolist() == shared.initial_state.free_queue_order()
    assert decode_array(ini["ref_cnt"]).tolist() == shared.initial_state.ref_cnt
    assert (ini["num_blocks"], ini["num_groups"], ini["null_block_id"]) == (10, 1, 0)


def test_encoded_mid_run_state_has_cached_and_requests(shared: Trace) -> None:
    from kvlab.viz.encode import encode_state

    state = shared.state_at(20)
    enc = encode_state(state)
    codes = decode_array(enc["cached"]["codes"]).tolist()
    offsets = decode_array(enc["cached"]["offsets"]).tolist()
    values = decode_array(enc["cached"]["values"]).tolist()
    cached = {int(c): tuple(values[offsets[k] : offsets[k + 1]]) for k, c in enumerate(codes)}
    assert cached == state.cached
    g0 = enc["req_to_blocks"][0]
    reqs = decode_array(g0["requests"]).tolist()
    off, vals = decode_array(g0["offsets"]).tolist(), decode_array(g0["values"]).tolist()
    assert {r: vals[off[k] : off[k + 1]] for k, r in enumerate(reqs)} == state.req_to_blocks[0]


def test_hash_tree_arrays(shared: Trace) -> None:
    tree = build_hash_tree(shared)
    enc = encode_trace(shared)["hash_tree"]
    parent = decode_array(enc["parent"]).tolist()
    assert parent == [tree.parent.get(h, -2) for h in range(shared.tables.num_hashes)]
    off, vals = decode_array(enc["chains"]["offsets"]), decode_array(enc["chains"]["values"])
    assert vals[off[2] : off[3]].tolist() == tree.chains["c"]


def test_encode_array_refuses_overflow() -> None:
    with pytest.raises(OverflowError, match="do not fit int16"):
        encode_array([1, 40000], "<i2")
    assert decode_array(encode_array([], "<i4")).tolist() == []
    assert EventKind.CALL_END == 18


def test_narrowest_integer_types() -> None:
    from kvlab.viz.encode import narrowest

    assert [narrowest(v, "<i4*") for v in ([-1, 127], [-129, 5], [0, 32768], [-(2**31)])] == [
        "|i1",
        "<i2",
        "<i4",
        "<i4",
    ]
    assert [narrowest(v, "<u4") for v in ([0, 255], [256], [70_000], [])] == [
        "|u1",
        "<u2",
        "<u4",
        "|u1",
    ]
    with pytest.raises(ValueError, match="takes '<i4' or '<u4', got '<f8'"):
        narrowest([1.5], "<f8")


def test_small_trace_columns_are_narrowed_and_exact(shared: Trace) -> None:
    data = encode_trace(shared)
    dtypes = {name: field["dtype"] for name, field in data["columns"].items()}
    # 10 blocks, 4 requests, a few hashes: every event column fits one byte
    assert dtypes == {
        "kind": "|u1", "depth": "|u1", "group": "|i1", "request": "|i1", "a": "|i1",
        "b": "|i1", "offsets": "|u1", "payload": "|i1", "step_seq": "<i4", "step_val": "<i4",
    }  # fmt: skip
    arrays = shared.cols.arrays()
    for name, field in data["columns"].items():
        assert decode_array(field).tolist() == np.asarray(arrays[name]).tolist(), name
