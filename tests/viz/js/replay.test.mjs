// Node test of kvlab/viz/static/replay.js: the JavaScript replay and cursor moves must give
// what Python gives. Run by tests/viz/test_player_js.py, which writes the fixture (traces,
// Python's KVState at scrambled indexes, Python's Navigator results) and sets
// KVLAB_REPLAY_FIXTURE to its path.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

const fixture = JSON.parse(fs.readFileSync(process.env.KVLAB_REPLAY_FIXTURE, "utf8"));
const source = fs.readFileSync(new URL("../../../kvlab/viz/static/replay.js", import.meta.url), "utf8");
const replay = await import("data:text/javascript," + encodeURIComponent(source));

// The JS state in the form tests/viz/test_player_js.py::_canonical gives for a Python KVState.
function canonical(s) {
  const sorted = (entries) => entries.sort((x, y) => x[0] - y[0]);
  return {
    free_queue: s.queue().head,
    ref_cnt: Array.from(s.refCnt),
    block_hash: Array.from(s.blockHash),
    cached: sorted([...s.cached].map(([code, ids]) => [code, Array.from(ids)])),
    req_to_blocks: s.req.map((m) => sorted([...m].map(([r, ids]) => [r, Array.from(ids)]))),
  };
}

for (const c of fixture.cases) {
  test(`${c.name}: replayed state equals Python's state_at at every asked index`, () => {
    const T = replay.loadTrace(c.trace);
    const R = new replay.Replayer(T, c.interval);
    assert.equal(T.n, c.trace.num_events);
    for (const [i, expected] of c.states) assert.deepEqual(canonical(R.stateAt(i)), expected, `event ${i}`);
  });

  test(`${c.name}: every checkpoint exists once loaded, and a first jump anywhere is right`, () => {
    const T = replay.loadTrace(c.trace);
    const R = new replay.Replayer(T, c.interval);
    const keys = [...R.checkpoints.keys()].sort((x, y) => x - y);
    const want = Array.from({ length: Math.floor(T.n / R.interval) + 1 }, (_, k) => k * R.interval);
    assert.deepEqual(keys, want);
    for (const [i, expected] of c.states.slice().reverse()) assert.deepEqual(canonical(R.stateAt(i)), expected, `event ${i}`);
    for (const [i, expected] of c.states.filter((_, k) => k % 5 === 0)) {
      assert.deepEqual(canonical(new replay.Replayer(T, c.interval).stateAt(i)), expected, `first jump to ${i}`);
    }
  });

  test(`${c.name}: cursor moves equal Python's Navigator`, () => {
    const T = replay.loadTrace(c.trace);
    for (const [move, targets] of Object.entries(c.moves)) {
      const got = targets.map((_, k) => replay.NAV[move](T, k - 1));
      assert.deepEqual(got, targets, move);
    }
    for (const [kind, [next, prev]] of Object.entries(c.kind_moves)) {
      assert.deepEqual(next.map((_, k) => replay.NAV.next_kind(T, k - 1, replay.KIND[kind])), next, `next ${kind}`);
      assert.deepEqual(prev.map((_, k) => replay.NAV.prev_kind(T, k - 1, replay.KIND[kind])), prev, `prev ${kind}`);
    }
  });

  test(`${c.name}: a step outside the trace is refused`, () => {
    const R = new replay.Replayer(replay.loadTrace(c.trace), c.interval);
    assert.throws(() => R.stateAt(c.trace.num_events), RangeError);
    assert.throws(() => R.stateAt(-2), RangeError);
  });
}
