"""The player's JavaScript replay (kvlab/viz/static/replay.js) against Python, under Node.

Writes a fixture (encoded traces, Python's ``state_at`` at scrambled indexes, every cursor
move of ``Navigator``) and runs ``node --test tests/viz/js/replay.test.mjs`` on it. Skips
cleanly where Node (>= 18) is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _viz_traces import hybrid_trace, serving_trace, shared_prefix_trace

from kvlab.figures import hybrid_trace as three_group_trace
from kvlab.trace import Call, EventKind, KVState
from kvlab.trace.events import pack_fixed_point, unpack_fixed_point
from kvlab.viz import Navigator, encode_trace
from kvlab.viz.calls import block_size_of, find_call, fixed_point_rows, slot_layout
from kvlab.viz.navigation import MOVES
from kvlab.viz.palette import SEGMENT_COLOURS
from kvlab.viz.snapshot import group_label

NODE = shutil.which("node")
TEST_FILE = Path(__file__).parent / "js" / "replay.test.mjs"


def _canonical(state: KVState) -> dict[str, Any]:
    """What the JS test's canonical() gives (codes and request indexes, sorted)."""
    return {
        "free_queue": state.free_queue_order(),
        "ref_cnt": list(state.ref_cnt),
        "block_hash": list(state.block_hash),
        "cached": sorted([code, list(ids)] for code, ids in state.cached.items()),
        "req_to_blocks": [sorted([r, list(b)] for r, b in g.items()) for g in state.req_to_blocks],
    }


def _call(call: Call | None) -> dict[str, Any] | None:
    if call is None:
        return None
    return {"begin": call.begin, "end": call.end, "name": call.name, "request": call.request,
            "args": call.args, "result": call.result}  # fmt: skip


def _slots(trace: Any, index: int, call: Call, num_tokens: int) -> list[list[Any]]:
    """Position -> {block_id, slot} per group, from Python's replayed block lists."""
    state, r = trace.state_at(index), trace.tables.find_request(call.request)
    rows = []
    for g, per_req in enumerate(state.req_to_blocks):
        bs = int(trace.config["groups"][g]["block_size"])
        blocks = per_req.get(r, [])
        cells = []
        for pos in range(num_tokens):
            b = blocks[pos // bs] if pos // bs < len(blocks) else None
            slot = -1 if b == state.null_block_id else None if b is None else b * bs + pos % bs
            cells.append(None if b is None else {"block_id": b, "slot": slot})
        rows.append(cells)
    return rows


def _calls_at(trace: Any, index: int) -> dict[str, Any]:
    """What kvlab.viz.calls says about the calls at ``index`` (the JS must say the same)."""
    gcb, alloc = (
        find_call(trace, index, "get_computed_blocks"),
        find_call(trace, index, "allocate_slots"),
    )
    out: dict[str, Any] = {
        "any": _call(find_call(trace, index)),
        "gcb": _call(gcb),
        "alloc": _call(alloc),
    }
    out["fixed_point"] = None if gcb is None else [
        {"seq": r.seq, "iteration": r.iteration, "kv_cache_group_ids": list(r.kv_cache_group_ids),
         "hit_length_in": r.hit_length_in, "hit_length_out": r.hit_length_out, "reused": r.reused,
         "block_ids": None if r.block_ids is None else [list(b) for b in r.block_ids],
         "shortened": r.shortened}
        for r in fixed_point_rows(trace, gcb)
    ]  # fmt: skip
    if alloc is not None:
        lay = slot_layout(alloc, block_size_of(trace))
        out["layout"] = {
            "block_size": lay.block_size, "num_tokens": lay.num_tokens, "num_blocks": lay.num_blocks,
            "segments": [{"name": x.name, "start": x.start, "num_tokens": x.num_tokens,
                          "meaning": x.meaning} for x in lay.segments],
            "num_blocks_to_allocate": lay.num_blocks_to_allocate, "allocated": lay.allocated,
        }  # fmt: skip
        out["slots"] = _slots(trace, index, alloc, lay.num_tokens)
    return out


def _case(name: str, trace: Any, interval: int) -> dict[str, Any]:
    n = len(trace)
    forward = list(range(-1, n, max(1, n // 40)))
    indexes = forward + [n - 1, -1, n // 2, n // 2 - 1, 3, n - 2, 0] + forward[::-3]
    indexes = [i for i in indexes if -1 <= i < n]
    nav = Navigator(trace)
    cursors = range(-1, n)
    kinds = [EventKind.CALL_BEGIN, EventKind.BLOCK_REMOVED, EventKind.STEP, EventKind.LOOKED_UP]
    return {
        "name": name,
        "interval": interval,
        "trace": encode_trace(trace),
        "states": [[i, _canonical(trace.state_at(i))] for i in indexes],
        "moves": {m: [nav.move(m, i) for i in cursors] for m in MOVES},
        "calls": [[i, _calls_at(trace, i)] for i in sorted(set(indexes))],
        "labels": [group_label(trace.config, g) for g in range(len(trace.config["groups"]))],
        "kind_moves": {
            k.name: [[nav.next_kind(i, k) for i in cursors], [nav.prev_kind(i, k) for i in cursors]]
            for k in kinds
        },
    }


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_replay_and_moves_match_python(tmp_path: Path) -> None:
    serving = serving_trace(64, 3000, seed=1)
    # NOTE: the serving trace must exercise evictions, hits and many checkpoints to be useful.
    for kind in (EventKind.BLOCK_REMOVED, EventKind.REMOVE, EventKind.TOUCH):
        assert serving.find(kind) is not None, kind
    three, _ = three_group_trace()
    # NOTE: the three-group trace must shorten the candidate and need a second iteration.
    iterations = [
        three[i].fields["iteration"] for i in three.filter(EventKind.FIXED_POINT_ITERATED)
    ]
    assert max(iterations) >= 1, iterations
    cases = [
        _case("shared_prefix", shared_prefix_trace(), 16),
        _case("hybrid", hybrid_trace(), 16),
        _case("serving", serving, 16),
        _case("three_groups", three, 16),
    ]
    # NOTE: the block lists must be compared, a null block included.
    hybrid_rows = [r for c in cases[1]["calls"] for r in c[1]["fixed_point"] or []]
    assert any(r["block_ids"] and 0 in r["block_ids"][0] for r in hybrid_rows)
    # Both payload layouts (with block lists, and an old trace's without) decode alike.
    payloads = [list(pack_fixed_point(8, r, g, b)) for r, g, b in
                [(False, [1, 2], [[0, 7], [0, 9]]), (True, [0], [[1, 2]]), (True, [2, 1], None),
                 (False, [3], [[]])]]  # fmt: skip
    unpacked = [dict(zip(("hit_length_out", "reused", "kv_cache_group_ids", "block_ids"),
                         unpack_fixed_point(p))) for p in payloads]  # fmt: skip
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"cases": cases, "fixed_point_payloads": [payloads, unpacked]}))
    env = {**os.environ, "KVLAB_REPLAY_FIXTURE": str(fixture)}
    proc = subprocess.run(
        [NODE, "--test", str(TEST_FILE)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout and "# pass 21" in proc.stdout, proc.stdout[-2000:]


def test_views_js_segment_colours_are_the_palettes() -> None:
    from kvlab.viz.assets import static_text

    views = static_text("views.js")
    drawn = dict(
        re.findall(r'(\w+): "(#[0-9a-f]{6})"', views.split("SEGMENT_COLOURS = ")[1].split("}")[0])
    )
    assert drawn == SEGMENT_COLOURS
