"""The player's JavaScript replay (kvlab/viz/static/replay.js) against Python, under Node.

Writes a fixture (encoded traces, Python's ``state_at`` at scrambled indexes, every cursor
move of ``Navigator``) and runs ``node --test tests/viz/js/replay.test.mjs`` on it. Skips
cleanly where Node (>= 18) is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _viz_traces import hybrid_trace, serving_trace, shared_prefix_trace

from kvlab.trace import EventKind, KVState
from kvlab.viz import Navigator, encode_trace
from kvlab.viz.navigation import MOVES

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
    cases = [
        _case("shared_prefix", shared_prefix_trace(), 16),
        _case("hybrid", hybrid_trace(), 16),
        _case("serving", serving, 16),
    ]
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"cases": cases}))
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
    assert "# fail 0" in proc.stdout and "# pass 12" in proc.stdout, proc.stdout[-2000:]
