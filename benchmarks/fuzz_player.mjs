// The player's decoder under fuzzing (benchmarks/fuzz_js.py drives it): one input per request.
//
// Protocol: stdin carries frames `u32 length (big-endian) | bytes`; each input is parsed as JSON
// (the player gets its trace_data as a parsed object: a page's JSON or the widget's state), then
// handed to what the player does on load and on every move (decode, checkpoints, states, event
// lines, calls, slot mapping, cursor moves). One JSON line answers each frame:
//   {"outcome": "skip" | "result" | "error" | "disallowed", "message": ..., "blocks": [[id, n]]}
// "error" is an Error whose message starts with "kvlab" (the decoder's documented refusals);
// "blocks" are the V8 block-coverage ranges of kvlab's static/*.js that ran, with hit counts
// (the driver turns them into libFuzzer features).
import inspector from "node:inspector";
import { pathToFileURL } from "node:url";
import path from "node:path";

const STATIC = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../kvlab/viz/static");
const R = await import(pathToFileURL(path.join(STATIC, "replay.js")).href);

const session = new inspector.Session();
session.connect();
const post = (method, params = {}) => new Promise((ok, fail) =>
  session.post(method, params, (err, res) => (err ? fail(err) : ok(res))));
await post("Profiler.enable");
await post("Profiler.startPreciseCoverage", { callCount: true, detailed: true });

function exercise(data) {
  const T = R.loadTrace(data);
  const first = new Int32Array(T.requests.length).fill(-1);
  for (let i = 0; i < T.n; i++) { const r = T.c.request[i]; if (r >= 0 && first[r] < 0) first[r] = i; }
  const rep = new R.Replayer(T, 16);
  const picks = new Set([-1, 0, T.n >> 1, T.n - 1, T.n - 2]);
  for (const i of picks) {
    if (i < -1 || i >= T.n) continue;
    const s = rep.stateAt(i);
    s.queue(32, 4);
    R.describe(T, i);
    R.vllmSource(T, i);
    for (const name of [null, "allocate_slots", "get_computed_blocks"]) {
      const call = R.findCall(T, i, name);
      if (!call) continue;
      if (call.name === "allocate_slots") R.slotLayout(call, R.blockSizeOf(T));
      R.fixedPointRows(T, call);
      if (call.requestIndex >= 0) R.slotMapping(T, s, call.requestIndex, 0, 64);
    }
    for (const move of ["into", "over", "out", "back", "back_over"]) R.NAV[move](T, i);
    R.NAV.next_kind(T, i, R.KIND.CALL_BEGIN);
    R.NAV.prev_kind(T, i, R.KIND.BLOCK_STORED);
    for (let g = 0; g < T.numGroups && g < 4; g++) R.groupLabel(T.data.config, g);
  }
  for (let i = 0; i < T.n && i < 256; i++) R.describe(T, i);
}

async function one(bytes) {
  let data;
  try {
    data = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return { outcome: "skip" };
  }
  let out;
  try {
    exercise(data);
    out = { outcome: "result" };
  } catch (e) {
    const kvlab = e instanceof Error && /^kvlab[: ]/.test(e.message);
    const where = (e && e.stack ? String(e.stack).split("\n").find((l) => l.includes("/static/")) : "") || "";
    out = { outcome: kvlab ? "error" : "disallowed",
      message: `${e && e.name}: ${String(e && e.message).slice(0, 300)}`, where: where.trim() };
  }
  const { result } = await post("Profiler.takePreciseCoverage");
  const blocks = [];
  for (const script of result) {
    if (!script.url.includes("/kvlab/viz/static/")) continue;
    const file = script.url.slice(script.url.lastIndexOf("/") + 1);
    for (const fn of script.functions) {
      for (const r of fn.ranges) if (r.count > 0) blocks.push([`${file}:${r.startOffset}`, r.count]);
    }
  }
  out.blocks = blocks;
  return out;
}

let buf = Buffer.alloc(0);
const queue = [];
let busy = false;
async function drain() {
  if (busy) return;
  busy = true;
  while (queue.length) process.stdout.write(JSON.stringify(await one(queue.shift())) + "\n");
  busy = false;
}
process.stdin.on("data", (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
    const n = buf.readUInt32BE(0);
    queue.push(buf.subarray(4, 4 + n));
    buf = buf.subarray(4 + n);
  }
  drain();
});
