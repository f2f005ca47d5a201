"""Bad-input campaign, trace files and the Trace API: one TraceFormatError naming the field.

Each file row takes a good saved trace, damages one thing (a header field, an array, the zip
itself) and asserts that ``load_trace`` raises TraceFormatError whose message names the field
and what is allowed, and that neither the damaged file nor the good trace changed. Each API row
calls a Trace method with a bad argument and asserts the error and that the trace's replayed
states are unchanged.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _robust_helpers import busy_manager, make_request

from kvlab.trace import EventKind, Recorder, Trace, TraceFormatError, load_trace

K = EventKind
Edit = Callable[[dict[str, Any], dict[str, np.ndarray]], None]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace]:
    return build_good(tmp_path_factory.mktemp("campaign"))


def build_good(directory: Path) -> tuple[Path, Trace]:
    """A trace recorded from mid-run (non-empty initial req_to_blocks and cached map), saved."""
    m, first, (_, live) = busy_manager(hybrid=True)
    first.detach()
    rec = Recorder(chunk_size=4).attach(m)
    rec.mark_step(1)
    new = make_request("new", list(range(8)) + [5] * 5)
    blocks, hit = m.get_computed_blocks(new)
    assert m.allocate_slots(new, new.num_tokens - hit, hit, blocks) is not None
    assert m.allocate_slots(new, 10**12) is None  # recorded as a WIDE call row
    rec.mark_step(2)
    m.free(live)
    rec.mark_step(3)
    m.evict_blocks(set(range(24)))
    path = directory / "good.kvtrace"
    trace = rec.trace()
    assert len(trace.initial_state.req_to_blocks[0]) and trace.initial_state.cached
    trace.save(path)
    return path, trace


def _read(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read("header.json"))
        names = [n for n in zf.namelist() if n != "header.json"]
        arrays = {n[:-4]: np.load(io.BytesIO(zf.read(n))) for n in names}
    return header, arrays


def _write(path: Path, header: dict[str, Any] | bytes, arrays: dict[str, np.ndarray],
           fix_shapes: bool = True) -> None:  # fmt: skip
    if isinstance(header, dict) and isinstance(header.get("arrays"), dict) and fix_shapes:
        for name, arr in arrays.items():
            spec = header["arrays"].get(name)
            if isinstance(spec, dict) and isinstance(spec.get("shape"), list):
                header["arrays"][name] = {"dtype": arr.dtype.str, "shape": list(arr.shape)}
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", raw)
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, arr)
            zf.writestr(f"{name}.npy", buf.getvalue())


def _first(arrays: dict[str, np.ndarray], kinds: list[int]) -> int:
    return int(np.flatnonzero(np.isin(arrays["kind"], kinds))[0])


def _payload_pos(arrays: dict[str, np.ndarray], kind: int) -> int:
    i = int(np.flatnonzero((arrays["kind"] == kind) & (np.diff(arrays["offsets"]) > 0))[0])
    return int(arrays["offsets"][i])


def _set(name: str, index: Any, value: int) -> Edit:
    def edit(h: dict[str, Any], a: dict[str, np.ndarray]) -> None:
        arr = a[name].copy()
        arr[index(a) if callable(index) else index] = value
        a[name] = arr
    return edit


def _header(**fields: Any) -> Edit:
    def edit(h: dict[str, Any], a: dict[str, np.ndarray]) -> None:
        for key, value in fields.items():
            if "__" in key:
                outer, inner = key.split("__")
                h[outer][inner] = value
            elif value is _DROP:
                h.pop(key)
            else:
                h[key] = value
    return edit


_DROP = object()


FILE_ROWS: list[tuple[str, Edit, str]] = [
    # ---- header fields
    ("checkpoint_interval -1", _header(checkpoint_interval=-1),
     r"checkpoint_interval: allowed an int >= 1 .*got -1"),
    ("checkpoint_interval 'abc'", _header(checkpoint_interval="abc"),
     r"checkpoint_interval: allowed an int >= 1 .*got 'abc'"),
    ("checkpoint_interval 1.5", _header(checkpoint_interval=1.5),
     r"checkpoint_interval: allowed an int >= 1"),
    ("config as a list", _header(config=[1, 2]), r"config: allowed a JSON object \(dict\)"),
    ("config as a string", _header(config="x"), r"config: allowed a JSON object \(dict\)"),
    ("integers in the request table", _header(requests=[1, 2, 3]),
     r"requests: allowed a list of distinct request ids \(str\)"),
    ("duplicate request ids", lambda h, a: h.update(requests=h["requests"][:1] * 3),
     r"requests: allowed a list of distinct request ids"),
    ("requests not a list", _header(requests={"a": 1}), r"'requests' missing or not a list"),
    ("empty call_names", _header(call_names=[]),
     r"call_names: allowed a non-empty list of distinct non-empty call names"),
    ("missing call_names", _header(call_names=_DROP), r"call_names: allowed a non-empty list"),
    ("call_names of ints", _header(call_names=[1, 2]), r"call_names: allowed a non-empty list"),
    ("num_events -1", _header(num_events=-1), r"num_events: allowed an int >= 0"),
    ("num_events '3'", _header(num_events="3"), r"'num_events' missing or not a int"),
    ("num_events off by one", lambda h, a: h.update(num_events=h["num_events"] + 1),
     r"column kind has \d+ rows, expected \d+"),
    ("num_blocks 10**11", _header(initial_state__num_blocks=10**11),
     r"init_ref_cnt / init_block_hash: allowed one entry per block \(100000000000\)"),
    ("num_blocks 0", _header(initial_state__num_blocks=0),
     r"initial_state.num_blocks: allowed an int >= 1"),
    ("num_blocks 'many'", _header(initial_state__num_blocks="many"),
     r"initial_state.num_blocks: allowed an int >= 1"),
    ("num_groups 10**9", _header(initial_state__num_groups=10**9),
     r"initial_state.num_groups: allowed an int in \[0, 1024\]"),
    ("null_block_id out of range", _header(initial_state__null_block_id=10**6),
     r"null_block_id: allowed null or an int in \[0, 24\)"),
    ("initial_state as a list", _header(initial_state=[1]),
     r"'initial_state' missing or not a dict"),
    ("arrays spec shape 'abc'", lambda h, a: h["arrays"]["kind"].update(shape="abc"),
     r"arrays.kind: allowed \{'dtype': str, 'shape': \[ints >= 0\]\}"),
    ("format_version 'one'", _header(format_version="one"), r"format_version 'one' is not an int"),
    # ---- event columns
    ("decreasing step_seq", lambda h, a: a.update(step_seq=a["step_seq"][[0, 2, 1]]),
     r"step_seq: allowed strictly increasing from 0"),
    ("step_seq not from 0", _set("step_seq", 0, 5),
     r"step_seq: allowed strictly increasing from 0"),
    ("step_seq beyond the events", _set("step_seq", -1, 10**6),
     r"step_seq: allowed strictly increasing from 0 to <= \d+"),
    ("unknown event kind", _set("kind", 3, 99), r"kind: allowed 0..18 \(EventKind\)"),
    ("block_id -1 in a payload", _set("payload", lambda a: _payload_pos(a, K.GET_NEW_BLOCKS), -1),
     r"payload block ids: allowed \[0, 24\)"),
    ("block_id 24 in a payload", _set("payload", lambda a: _payload_pos(a, K.FREE_BLOCKS), 24),
     r"payload block ids: allowed \[0, 24\)"),
    ("block_id out of range in a", _set("a", lambda a: _first(a, [K.BLOCK_REMOVED]), 10**6),
     r"column a \(block_id\): allowed \[0, 24\)"),
    ("hash index out of range", _set("b", lambda a: _first(a, [K.BLOCK_REMOVED]), 10**6),
     r"column b \(hash index\): allowed \[0, \d+\)"),
    ("stored hash index -1",
     _set("payload", lambda a: int(a["offsets"][_first(a, [K.BLOCK_STORED]) + 1]) - 1, -1),
     r"BLOCK_STORED hash indexes: allowed \[0, \d+\)"),
    ("group 5 of 2", _set("group", lambda a: _first(a, [K.REQ_BLOCKS_ADDED]), 5),
     r"column group: allowed \[0, 2\)"),
    ("request 99 of 3", _set("request", lambda a: _first(a, [K.REQ_FREED]), 99),
     r"column request: allowed \[-1, \d+\)"),
    ("request -1 on a REQ event", _set("request", lambda a: _first(a, [K.REQ_FREED]), -1),
     r"column request: allowed \[0, \d+\)"),
    ("unknown call id", _set("group", lambda a: _first(a, [K.CALL_BEGIN]), 99),
     r"column group \(call id\): allowed \[0, 8\)"),
    ("offsets decreasing", _set("offsets", 1, 10**6), r"payload offsets inconsistent"),
    # ---- initial state
    ("negative init_ref_cnt", _set("init_ref_cnt", 5, -1),
     r"init_ref_cnt: allowed >= 0 for every block but the null block"),
    ("init_ref_cnt too short", lambda h, a: a.update(init_ref_cnt=a["init_ref_cnt"][:-1]),
     r"init_ref_cnt / init_block_hash: allowed one entry per block \(24\)"),
    ("duplicate in init_free_queue", _set("init_free_queue", 1, -7),
     r"init_free_queue: allowed distinct block ids in \[0, 24\)"),
    ("init_free_queue repeats a block",
     lambda h, a: a.update(init_free_queue=np.repeat(a["init_free_queue"][:1], 2)),
     r"init_free_queue: allowed distinct block ids"),
    ("init_block_hash code beyond the table", _set("init_block_hash", 3, 10**9 << 16),
     r"key codes: allowed -1 or hash index in \[0, \d+\)"),
    ("init_req request beyond the table", _set("init_req", (0, 1), 50),
     r"init_req: allowed group in \[0, 2\), request in \[0, \d+\)"),
    ("init_req 1-D", lambda h, a: a.update(init_req=a["init_req"].reshape(-1)),
     r"arrays.init_req: allowed a 2-D shape"),
    # ---- entries
    ("wrong dtype", lambda h, a: a.update(kind=a["kind"].astype(np.int64)),
     r"kind has dtype int64, expected uint8"),
    ("missing array", lambda h, a: (a.pop("step_val"), h["arrays"].pop("step_val")),
     r"missing arrays \['step_val'\]"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "allowed"), [r[1:] for r in FILE_ROWS],
                         ids=[r[0] for r in FILE_ROWS])  # fmt: skip
def test_damaged_trace_file_gives_one_clear_error(good, tmp_path, edit, allowed) -> None:
    src, trace = good
    header, arrays = _read(src)
    edit(header, arrays)
    bad = tmp_path / "bad.kvtrace"
    _write(bad, header, arrays)
    raw = bad.read_bytes()
    with pytest.raises(TraceFormatError, match=allowed):
        load_trace(bad)
    assert bad.read_bytes() == raw  # loading never writes
    assert load_trace(src).final_state() == trace.final_state()


def _deep_header(src: Path, dst: Path) -> None:
    _, arrays = _read(src)
    _write(dst, b"[" * 100_000 + b"]" * 100_000, arrays, fix_shapes=False)


def _deep_config(src: Path, dst: Path) -> None:
    header, arrays = _read(src)
    deep = "[" * 100_000 + "]" * 100_000
    raw = json.dumps(header).replace('"config": {', '"config": {"x": ' + deep + ", ", 1)
    _write(dst, raw.encode(), arrays, fix_shapes=False)


def _npy_shape_lies(src: Path, dst: Path) -> None:
    header, arrays = _read(src)
    _write(dst, header, arrays)
    header["arrays"]["payload"]["shape"] = [10**10]
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<i4", "fortran_order": False,
                                               "shape": (10**10,)})  # fmt: skip
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "header.json":
                data = json.dumps(header).encode()
            elif name == "payload.npy":
                data = buf.getvalue() + b"\0" * 64
            zout.writestr(name, data)


def _not_a_zip(src: Path, dst: Path) -> None:
    dst.write_bytes(b"kvlab? no: plain text\n" * 10)


def _truncated(src: Path, dst: Path) -> None:
    dst.write_bytes(src.read_bytes()[: src.stat().st_size // 2])


def _header_not_json(src: Path, dst: Path) -> None:
    _, arrays = _read(src)
    _write(dst, b"{oops", arrays, fix_shapes=False)


ZIP_ROWS: list[tuple[str, Callable[[Path, Path], None], str]] = [
    ("100,000-deep header.json", _deep_header, r"header.json nests too deeply \(allowed:"),
    ("100,000-deep config", _deep_config, r"header.json nests too deeply \(allowed:"),
    ("npy header claims 10**10 items", _npy_shape_lies,
     r"payload.npy holds 64 data bytes, its shape \[10000000000\] needs 40000000000"),
    ("not a zip", _not_a_zip, r"not a kvlab trace: not a zip archive"),
    ("truncated", _truncated, r"not a zip archive, or truncated"),
    ("header.json not JSON", _header_not_json, r"header.json is not valid JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "allowed"), [r[1:] for r in ZIP_ROWS],
                         ids=[r[0] for r in ZIP_ROWS])  # fmt: skip
def test_damaged_trace_zip_gives_one_clear_error(good, tmp_path, damage, allowed) -> None:
    src, _ = good
    bad = tmp_path / "bad.kvtrace"
    damage(src, bad)
    with pytest.raises(TraceFormatError, match=allowed):
        load_trace(bad)


def test_max_bytes_limit_is_named(good) -> None:
    src, _ = good
    with pytest.raises(TraceFormatError, match=r"over the limit of max_bytes=1000 bytes"):
        load_trace(src, max_bytes=1000)


API_ROWS: list[tuple[str, Callable[[Trace], Any], type[BaseException], str]] = [
    ("state_at('3')", lambda t: t.state_at("3"), TypeError, r"int event index in \[-1, \d+\)"),
    ("state_at(None)", lambda t: t.state_at(None), TypeError, r"int event index in \[-1, \d+\)"),
    ("state_at(1.5)", lambda t: t.state_at(1.5), TypeError, r"int event index"),
    ("state_at(True)", lambda t: t.state_at(True), TypeError, r"int event index"),
    ("state_at(10**9)", lambda t: t.state_at(10**9), IndexError, r"need -1 <= i < \d+"),
    ("state_at(-2)", lambda t: t.state_at(-2), IndexError, r"need -1 <= i < \d+"),
    ("trace['x']", lambda t: t["x"], TypeError, r"event index must be an int in \[-\d+, \d+\)"),
    ("event(None)", lambda t: t.event(None), TypeError, r"event index must be an int"),
    ("payload(2.0)", lambda t: t.payload(2.0), TypeError, r"event index must be an int"),
    ("event(10**9)", lambda t: t.event(10**9), IndexError, r"out of range for a trace of"),
    ("call('3')", lambda t: t.call("3"), TypeError, r"event index must be an int"),
    ("Trace(checkpoint_interval='abc')",
     lambda t: Trace(t.cols, t.tables, t.initial_state, checkpoint_interval="abc"), ValueError,
     r"checkpoint_interval must be an int >= 1"),
    ("Trace(checkpoint_interval=0)",
     lambda t: Trace(t.cols, t.tables, t.initial_state, checkpoint_interval=0), ValueError,
     r"checkpoint_interval must be an int >= 1"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "allowed"), [r[1:] for r in API_ROWS],
                         ids=[r[0] for r in API_ROWS])  # fmt: skip
def test_trace_api_refuses_bad_arguments(good, call, error, allowed) -> None:
    _, trace = good
    before = [trace.state_at(i) for i in (-1, len(trace) // 2, len(trace) - 1)]
    with pytest.raises(error, match=allowed):
        call(trace)
    after = [trace.state_at(i) for i in (-1, len(trace) // 2, len(trace) - 1)]
    assert after == before


def _kv_event_trace() -> Trace:
    from kvlab.core.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
    from kvlab.kv_events.stream import KVEventTraceBuilder

    b = KVEventTraceBuilder(num_blocks=16, num_groups=2)
    b.add_batch(KVEventBatch(0.0, [BlockStored([7, 8], None, [], 16, None, "GPU", None)]))
    b.add_batch(KVEventBatch(1.0, [BlockRemoved([7], "GPU")]))
    b.add_batch(KVEventBatch(2.0, [BlockStored([9, 10], 8, [], 16, None, "GPU", None),
                                   AllBlocksCleared()]))  # fmt: skip
    b.add_batch(KVEventBatch(3.0, [BlockStored([19], None, [], 16, None, "GPU", None,
                                               group_idx=1)]))  # fmt: skip
    return b.trace()


def _nano_trace() -> Trace:
    from kvlab.compare.cli import WORKLOADS
    from kvlab.compare.driver import run_workload

    return run_workload(WORKLOADS["multi-turn"](seed=0), "nano-vllm", pool_tokens=256,
                        block_size=16, record=True).trace  # fmt: skip


def _empty_trace() -> Trace:
    from kvlab.trace import KVState

    return Recorder(initial_state=KVState.fresh(4)).trace()


@pytest.mark.parametrize("make", [_kv_event_trace, _nano_trace, _empty_trace],
                         ids=["kv-event stream (no request)", "nano-vllm", "empty"])  # fmt: skip
def test_every_kvlab_producer_still_loads(make, good, tmp_path) -> None:
    """The checks refuse damage, never a trace kvlab itself writes."""
    trace = make()
    trace.save(tmp_path / "t.kvtrace")
    loaded = load_trace(tmp_path / "t.kvtrace")
    assert loaded.final_state() == trace.final_state() and len(loaded) == len(trace)
    _, hybrid = good  # hybrid, mid-run start, WIDE call row
    assert load_trace(good[0]).final_state() == hybrid.final_state()
