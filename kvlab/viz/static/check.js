// Checks an encoded trace (kvlab/viz/encode.py::encode_trace) before the player trusts it.
// A page's copy of a trace can be damaged (truncated JSON edited by hand, a stranger's export):
// every field the decoder and the replay rely on is checked here, with the rules of
// kvlab/trace/fileformat_checks.py, and a damaged one is refused with an Error whose message
// starts with "kvlab: damaged trace data:", naming the field and what is allowed. No DOM: Node
// runs it (tests/viz, benchmarks/fuzz_js.py).

const CTORS = { "|u1": Uint8Array, "<u1": Uint8Array, "|i1": Int8Array, "<i1": Int8Array,
  "<i2": Int16Array, "<u2": Uint16Array, "<i4": Int32Array, "<u4": Uint32Array, "<f8": Float64Array };
const MAX_LENGTH = 2 ** 30;  // elements of one array (a typed array of more cannot be made)
const MAX_GROUPS = 1024;
const NUM_KINDS = 19;  // kvlab/trace/events.py::EventKind
// Kinds (by number) whose columns name blocks, requests, groups (fileformat_checks.py's lists).
const BLOCK_A = [1, 3, 4, 10], BLOCK_PAYLOAD = [2, 5, 6, 7, 8, 14], REQUEST_KINDS = [14, 15, 16];
const GROUP_KINDS = [9, 10, 14, 15, 16], CALL_KINDS = [17, 18];

// A string from the trace file (request id, call name, spec name) as the player shows it: the
// controls that reorder or hide text (C0/C1, bidi overrides and isolates, zero-width, lone
// surrogates) as visible escapes, at most `limit` characters (kvlab/trace/untrusted.py::shown,
// the same rule). The player inserts text as DOM text nodes, never as HTML.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]/g;
export function shown(text, limit = 120) {
  let s = String(text);
  const n = s.length;
  if (n > limit) s = s.slice(0, limit);
  s = s.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
  return n > limit ? `${s}… (${n} characters)` : s;
}

// The field names and values quoted from the data go through `shown` too.
function fail(what) { throw new Error(`kvlab: damaged trace data: ${shown(what, 1000)}`); }
const isInt = (v) => Number.isInteger(v);

function bytesOf(text, where) {
  if (typeof text !== "string") fail(`${where}.b64 must be a base64 string`);
  try {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const bin = atob(text), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  } catch {
    return fail(`${where}.b64 is not base64`);
  }
}

// One {dtype, length, b64} field as a typed array; its bytes must hold `length` items.
export function checkedArray(field, where) {
  if (field === null || typeof field !== "object") fail(`${where} must be {dtype, length, b64}`);
  const Ctor = CTORS[field.dtype];
  if (!Ctor) fail(`${where}.dtype ${String(field.dtype).slice(0, 20)} is not one of ${Object.keys(CTORS).join(" ")}`);
  if (!isInt(field.length) || field.length < 0 || field.length > MAX_LENGTH) fail(`${where}.length must be an int in [0, 2**30]`);
  const bytes = bytesOf(field.b64, where);
  if (bytes.length < field.length * Ctor.BYTES_PER_ELEMENT) fail(`${where} holds ${bytes.length} bytes, its length ${field.length} needs ${field.length * Ctor.BYTES_PER_ELEMENT}`);
  return new Ctor(bytes.buffer, 0, field.length);
}

function inRange(values, lo, hi, where) {
  for (let i = 0; i < values.length; i++) {
    if (!(values[i] >= lo && values[i] < hi)) fail(`${where}: allowed [${lo}, ${hi}), got ${values[i]} at ${i}`);
  }
}

function checkRagged(r, rows, lo, hi, where) {
  if (r === null || typeof r !== "object") fail(`${where} must be {offsets, values}`);
  const offsets = checkedArray(r.offsets, `${where}.offsets`), values = checkedArray(r.values, `${where}.values`);
  if (offsets.length !== rows + 1 || offsets[0] !== 0 || offsets[rows] !== values.length) fail(`${where}.offsets: allowed ${rows + 1} offsets from 0 to ${values.length}`);
  for (let i = 0; i < rows; i++) if (offsets[i + 1] < offsets[i]) fail(`${where}.offsets must not decrease`);
  inRange(values, lo, hi, `${where}.values`);
  return { offsets, values };
}

const stringList = (v, where) => {
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) fail(`${where} must be a list of strings`);
  return v;
};

// The top-level fields, the columns, the initial state and the hash tree (see the module note).
export function checkTraceData(data) {
  if (data === null || typeof data !== "object") fail("not an object");
  if (data.format !== "kvlab-trace/1") throw new Error(`kvlab: unknown trace format ${shown(data.format, 40)}; allowed: kvlab-trace/1`);
  const n = data.num_events;
  if (!isInt(n) || n < 0 || n >= 2 ** 31) fail("num_events must be an int in [0, 2**31)");
  const requests = stringList(data.requests, "requests"), calls = stringList(data.call_names, "call_names");
  const kinds = stringList(data.kinds, "kinds");
  if (kinds.length < NUM_KINDS) fail(`kinds must name the ${NUM_KINDS} event kinds`);
  if (data.call_specs === null || typeof data.call_specs !== "object") fail("call_specs must be an object");
  for (const [name, spec] of Object.entries(data.call_specs)) {
    if (spec === null || typeof spec !== "object") fail(`call_specs.${name} must be an object`);
    stringList(spec.args, `call_specs.${name}.args`);
    stringList(spec.result, `call_specs.${name}.result`);
    if (spec.pack !== null && !(Array.isArray(spec.pack) && spec.pack.every((j) => isInt(j) && j >= 0 && j < spec.args.length))) fail(`call_specs.${name}.pack must be null or arg positions`);
  }
  if (data.config === null || typeof data.config !== "object" || Array.isArray(data.config)) fail("config must be an object");
  const groups = data.config.groups;
  if (groups !== undefined && groups !== null && !(Array.isArray(groups) && groups.every((g) => g !== null && typeof g === "object"))) fail("config.groups must be a list of objects");
  if (!isInt(data.key_group_bits) || data.key_group_bits < 0 || data.key_group_bits > 31) fail("key_group_bits must be an int in [0, 31]");
  if (data.columns === null || typeof data.columns !== "object") fail("columns must be an object");
  const c = {};
  for (const name of ["kind", "depth", "group", "request", "a", "b", "offsets", "payload", "step_seq", "step_val"]) {
    c[name] = checkedArray(data.columns[name], `columns.${name}`);
  }
  const hashes = checkedArray(data.hashes, "hashes");
  if (hashes.length % 4) fail("hashes must hold 4 bytes per hash");
  const nh = hashes.length / 4;
  const ini = checkInitial(data.initial, requests.length, nh);
  checkColumns(c, n, ini, requests.length, calls.length, nh);
  const tree = data.hash_tree;
  if (tree === null || typeof tree !== "object") fail("hash_tree must be an object");
  const parent = checkedArray(tree.parent, "hash_tree.parent"), position = checkedArray(tree.position, "hash_tree.position");
  if (parent.length !== nh || position.length !== nh) fail(`hash_tree.parent / position: allowed one entry per hash (${nh})`);
  inRange(parent, -2, nh, "hash_tree.parent");
  checkRagged(tree.chains, requests.length, 0, nh, "hash_tree.chains");
  return { c, hashes, ini };
}

function checkInitial(ini, numRequests, nh) {
  if (ini === null || typeof ini !== "object") fail("initial must be an object");
  const N = ini.num_blocks, G = ini.num_groups, nul = ini.null_block_id;
  if (!isInt(N) || N < 1 || N > MAX_LENGTH) fail("initial.num_blocks must be an int >= 1");
  if (!isInt(G) || G < 0 || G > MAX_GROUPS) fail(`initial.num_groups must be an int in [0, ${MAX_GROUPS}]`);
  if (!isInt(nul) || nul < -1 || nul >= N) fail(`initial.null_block_id must be -1 or an int in [0, ${N})`);
  const refCnt = checkedArray(ini.ref_cnt, "initial.ref_cnt"), blockHash = checkedArray(ini.block_hash, "initial.block_hash");
  if (refCnt.length !== N || blockHash.length !== N) fail(`initial.ref_cnt / block_hash: allowed one entry per block (${N})`);
  const queue = checkedArray(ini.free_queue, "initial.free_queue");
  inRange(queue, 0, N, "initial.free_queue");
  if (new Set(queue).size !== queue.length) fail("initial.free_queue: block ids must be distinct");
  if (ini.cached === null || typeof ini.cached !== "object") fail("initial.cached must be an object");
  const codes = checkedArray(ini.cached.codes, "initial.cached.codes");
  checkRagged(ini.cached, codes.length, 0, N, "initial.cached");
  if (!Array.isArray(ini.req_to_blocks) || ini.req_to_blocks.length !== G) fail(`initial.req_to_blocks: allowed one entry per group (${G})`);
  ini.req_to_blocks.forEach((g, gi) => {
    if (g === null || typeof g !== "object") fail(`initial.req_to_blocks[${gi}] must be an object`);
    const reqs = checkedArray(g.requests, `initial.req_to_blocks[${gi}].requests`);
    inRange(reqs, 0, numRequests, `initial.req_to_blocks[${gi}].requests`);
    checkRagged(g, reqs.length, 0, N, `initial.req_to_blocks[${gi}]`);
  });
  return { N, G, nh };
}

function checkColumns(c, n, ini, numRequests, numCalls, nh) {
  for (const name of ["kind", "depth", "group", "request", "a", "b"]) {
    if (c[name].length !== n) fail(`columns.${name} has ${c[name].length} rows, num_events is ${n}`);
  }
  const off = c.offsets, P = c.payload;
  if (off.length !== n + 1 || off[0] !== 0 || off[n] !== P.length) fail(`columns.offsets: allowed ${n + 1} offsets from 0 to ${P.length}`);
  if (c.step_seq.length !== c.step_val.length) fail("columns.step_seq / step_val: allowed one value per step");
  const N = ini.N, G = Math.max(ini.G, 1);
  for (let i = 0; i < n; i++) {
    const k = c.kind[i], where = `event ${i}`;
    if (!(k >= 0 && k < NUM_KINDS)) fail(`${where}: kind ${k} is not an event kind (0..${NUM_KINDS - 1})`);
    if (off[i + 1] < off[i]) fail("columns.offsets must not decrease");
    const r = c.request[i], g = c.group[i], a = c.a[i], b = c.b[i];
    if (!(r >= -1 && r < numRequests) || (REQUEST_KINDS.includes(k) && r < 0)) fail(`${where}: request ${r} outside [0, ${numRequests})`);
    if (GROUP_KINDS.includes(k) && !(g >= 0 && g < G)) fail(`${where}: group ${g} outside [0, ${G})`);
    if (CALL_KINDS.includes(k) && !(g >= 0 && g < numCalls)) fail(`${where}: call id ${g} outside [0, ${numCalls})`);
    if (BLOCK_A.includes(k) && !(a >= 0 && a < N)) fail(`${where}: block_id ${a} outside [0, ${N})`);
    if ((k === 10 && !(b >= 0 && b < nh)) || (k === 12 && !(a >= 0 && a < nh))) fail(`${where}: hash index outside [0, ${nh})`);
    const lo = off[i], hi = off[i + 1];
    if (BLOCK_PAYLOAD.includes(k)) inRange(P.subarray(lo, hi), 0, N, `${where}: payload block ids`);
    if (k === 9) {
      if ((hi - lo) % 2) fail(`${where}: BLOCK_STORED payload: allowed n block ids then n hash indexes`);
      const m = (hi - lo) / 2;
      inRange(P.subarray(lo, lo + m), 0, N, `${where}: BLOCK_STORED block ids`);
      inRange(P.subarray(lo + m, hi), 0, nh, `${where}: BLOCK_STORED hash indexes`);
    }
    if (k === 15) inRange(P.subarray(lo, hi), 0, 2 ** 31, `${where}: REQ_BLOCKS_NULLED indices`);
  }
}
