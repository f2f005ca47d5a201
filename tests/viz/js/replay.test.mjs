// Node test of kvlab/viz/static/replay.js: the JavaScript replay, cursor moves and call views
// (find_call, fixed_point_rows, slot_layout, token positions -> slots) must give what Python gives. Run by tests/viz/test_player_js.py, which writes the fixture (traces,
// Python's KVState at scrambled indexes, Python's Navigator results) and sets
// KVLAB_REPLAY_FIXTURE to its path.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

const fixture = JSON.parse(fs.readFileSync(process.env.KVLAB_REPLAY_FIXTURE, "utf8"));
const replay = await import(new URL("../../../kvlab/viz/static/replay.js", import.meta.url).href);

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

// The first allocate_slots call of a trace (for the error checks).
function want0(c, T) { return replay.findCall(T, T.n - 1, "allocate_slots"); }

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

  test(`${c.name}: calls, fixed-point rows, slot layout and slots equal kvlab.viz.calls`, () => {
    const T = replay.loadTrace(c.trace);
    const R = new replay.Replayer(T, c.interval);
    const plain = (call) => call && { begin: call.begin, end: call.end, name: call.name, request: call.request,
      args: call.args, result: call.result };
    let rows = 0, layouts = 0;
    for (const [i, want] of c.calls) {
      assert.deepEqual(plain(replay.findCall(T, i)), want.any, `find_call(${i})`);
      const gcb = replay.findCall(T, i, "get_computed_blocks"), alloc = replay.findCall(T, i, "allocate_slots");
      assert.deepEqual(plain(gcb), want.gcb, `get_computed_blocks at ${i}`);
      assert.deepEqual(plain(alloc), want.alloc, `allocate_slots at ${i}`);
      assert.deepEqual(gcb && replay.fixedPointRows(T, gcb), want.fixed_point, `fixed_point_rows at ${i}`);
      rows += want.fixed_point?.length ?? 0;
      if (!alloc) continue;
      const layout = replay.slotLayout(alloc, replay.blockSizeOf(T));
      assert.deepEqual(layout, want.layout, `slot_layout at ${i}`);
      const slots = replay.slotMapping(T, R.stateAt(i), alloc.requestIndex, 0, layout.num_tokens);
      assert.deepEqual(slots, want.slots, `slots at ${i}`);
      layouts += layout.num_tokens > 0;
    }
    assert.ok(layouts > 0, "no allocate_slots layout was compared");
    if (T.numGroups > 1) assert.ok(rows > 0, "no fixed-point row was compared");
    assert.deepEqual(c.labels.map((_, g) => replay.groupLabel(T.data.config, g)), c.labels);
    assert.throws(() => replay.findCall(T, T.n), RangeError);
    assert.throws(() => replay.slotLayout(want0(c, T), 0), /block_size must be >= 1/);
  });

  test(`${c.name}: a step outside the trace is refused`, () => {
    const R = new replay.Replayer(replay.loadTrace(c.trace), c.interval);
    assert.throws(() => R.stateAt(c.trace.num_events), RangeError);
    assert.throws(() => R.stateAt(-2), RangeError);
  });
}

test("fixed-point payloads (with block lists, and an old trace's without) decode as in Python", () => {
  const [payloads, want] = fixture.fixed_point_payloads;
  assert.deepEqual(payloads.map((p) => replay.unpackFixedPoint(Int32Array.from(p))), want);
});
