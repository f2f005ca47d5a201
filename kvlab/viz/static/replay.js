// kvlab trace replay in the browser: decode the compact trace, rebuild the KV-cache state at
// any event (with checkpoints), step like a debugger. No DOM here: Node runs it in tests.
//
// Mirrors kvlab/trace/replay.py (the state change per event kind) and
// kvlab/viz/navigation.py (the cursor moves); tests/viz checks both agree with Python.
// Input: the dict of kvlab.viz.encode.encode_trace (base64 little-endian numpy columns).

import { checkTraceData, checkedArray, shown } from "./check.js";

export const KIND = {
  STEP: 0, POPLEFT: 1, POPLEFT_N: 2, REMOVE: 3, APPEND: 4, APPEND_N: 5, GET_NEW_BLOCKS: 6,
  TOUCH: 7, FREE_BLOCKS: 8, BLOCK_STORED: 9, BLOCK_REMOVED: 10, ALL_BLOCKS_CLEARED: 11,
  LOOKED_UP: 12, FIXED_POINT_ITERATED: 13, REQ_BLOCKS_ADDED: 14, REQ_BLOCKS_NULLED: 15,
  REQ_FREED: 16, CALL_BEGIN: 17, CALL_END: 18,
};
const VERBATIM = -2147483648;
const WIDE = VERBATIM + 1; // kvlab/trace/events.py::pack_wide: ints beyond int32, as limbs
function unpackWide(p) {
  const out = [];
  for (let pos = 0; pos < p.length; pos += 1 + p[pos]) {
    const n = p[pos];
    if (!(n >= 1 && pos + n < p.length)) throw new Error(`kvlab: damaged trace data: a wide call payload of ${p.length} limbs`);
    let v = BigInt(p[pos + n]);
    for (let k = n - 1; k >= 1; k--) v = (v << 32n) | BigInt(p[pos + k] >>> 0);
    out.push(Number.isSafeInteger(Number(v)) ? Number(v) : v.toString());
  }
  return out;
}
// A {dtype, length, b64} field as a typed array (checked: kvlab/viz/static/check.js).
export function decodeArray(field, where = "array") {
  return checkedArray(field, where);
}

function ragged(r) {
  return { offsets: decodeArray(r.offsets), values: decodeArray(r.values) };
}

// The decoded trace: columns, tables, and per-event parent / matching CALL_BEGIN-END.
export function loadTrace(data) {
  const { c, hashes } = checkTraceData(data);  // NOTE: refuses damaged data, naming the field
  const n = data.num_events;
  const parent = new Int32Array(n), endOf = new Int32Array(n).fill(-1);
  const beginOf = new Int32Array(n).fill(-1), step = new Int32Array(n);
  const stack = [];
  for (let i = 0; i < n; i++) {
    const k = c.kind[i];
    if (k === KIND.CALL_END) {
      const b = stack.length ? stack.pop() : -1;
      parent[i] = b;
      if (b >= 0) { endOf[b] = i; beginOf[i] = b; }
    } else {
      parent[i] = stack.length ? stack[stack.length - 1] : -1;
      if (k === KIND.CALL_BEGIN) stack.push(i);
    }
  }
  for (let r = 0; r < c.step_seq.length; r++) {
    const stop = r + 1 < c.step_seq.length ? c.step_seq[r + 1] : n;
    step.fill(c.step_val[r], Math.min(c.step_seq[r], n), Math.min(stop, n));
  }
  const ini = data.initial;
  return {
    n, c, parent, endOf, beginOf, step, data,
    numBlocks: ini.num_blocks, numGroups: ini.num_groups, nullBlock: ini.null_block_id,
    requests: data.requests, callNames: data.call_names, kinds: data.kinds,
    hashBytes: hashes, keyShift: 2 ** data.key_group_bits,
    tree: { parent: decodeArray(data.hash_tree.parent), position: decodeArray(data.hash_tree.position),
      chains: ragged(data.hash_tree.chains) },
    byKind: new Map(), byCall: new Map(),
  };
}

export function hashHex(T, h) {
  let s = "";
  for (let k = 0; k < 4; k++) s += T.hashBytes[4 * h + k].toString(16).padStart(2, "0");
  return s;
}

export function payload(T, i) {
  return T.c.payload.subarray(T.c.offsets[i], T.c.offsets[i + 1]);
}

// events.py::unpack_fixed_point: [hit_length_out, reused | n << 1, group ids.., n counts.., block
// ids..]; n = 0 (an old trace) means no block lists and block_ids null.
export function unpackFixedPoint(p) {
  const n = p[1] >> 1, out = { hit_length_out: p[0], reused: Boolean(p[1] & 1) };
  if (n === 0) return { ...out, kv_cache_group_ids: Array.from(p.subarray(2)), block_ids: null };
  const block_ids = [];
  let pos = 2 + 2 * n;
  for (let j = 0; j < n; j++) { block_ids.push(Array.from(p.subarray(pos, pos + p[2 + n + j]))); pos += p[2 + n + j]; }
  return { ...out, kv_cache_group_ids: Array.from(p.subarray(2, 2 + n)), block_ids };
}

// ---------------------------------------------------------------- state
// Free queue: a doubly linked list over block ids with a fake head (N) and fake tail (N + 1),
// as vLLM's FreeKVCacheBlockQueue. Arrays in `cached` and `req` are never mutated in place
// (replaced on change), so a checkpoint copies the maps shallowly.
// NOTE: a cached-map key that loses its last block is deleted, as in Python's replay.
// NOTE: `shared` holds exactly the keys of `cached` held by two or more blocks (rare), so a
// checkpoint stores those lists alone and rebuilds the rest from blockHash.
export class KVState {
  constructor(N, numGroups) {
    this.N = N;
    this.next = new Int32Array(N + 2).fill(-1);
    this.prev = new Int32Array(N + 2).fill(-1);
    this.next[N] = N + 1; this.prev[N + 1] = N;
    this.inQueue = new Uint8Array(N);
    this.numFree = 0;
    this.refCnt = new Int32Array(N);
    this.blockHash = new Float64Array(N).fill(-1);
    this.cached = new Map();
    this.shared = new Set();
    this.req = Array.from({ length: numGroups }, () => new Map());
  }
  // A checkpoint: typed arrays copied, the lists of shared keys kept (insertion order matters
  // there), the rest of the cached map rebuilt from blockHash on restore.
  snapshot() {
    const dups = new Map();
    for (const code of this.shared) dups.set(code, this.cached.get(code));
    return { N: this.N, next: this.next.slice(), prev: this.prev.slice(), inQueue: this.inQueue.slice(),
      numFree: this.numFree, refCnt: this.refCnt.slice(), blockHash: this.blockHash.slice(), dups,
      req: this.req.map((m) => new Map(m)) };
  }
  static restore(snap) {
    const s = Object.create(KVState.prototype);
    s.N = snap.N; s.next = snap.next.slice(); s.prev = snap.prev.slice();
    s.inQueue = snap.inQueue.slice(); s.numFree = snap.numFree;
    s.refCnt = snap.refCnt.slice(); s.blockHash = snap.blockHash.slice();
    s.req = snap.req.map((m) => new Map(m));
    s.cached = new Map(); s.shared = new Set(snap.dups.keys());
    // NOTE: replay keeps blockHash and cached in step: the keys are exactly the hashed blocks.
    for (let b = 0; b < s.N; b++) {
      const code = s.blockHash[b];
      if (code >= 0 && !s.cached.has(code)) s.cached.set(code, snap.dups.get(code) || [b]);
    }
    return s;
  }
  unlink(x) {
    if (!this.inQueue[x]) throw new Error(`kvlab replay: block ${x} is not in the free queue`);
    const p = this.prev[x], q = this.next[x];
    this.next[p] = q; this.prev[q] = p; this.prev[x] = this.next[x] = -1;
    this.inQueue[x] = 0; this.numFree--;
  }
  append(x) {
    if (this.inQueue[x]) throw new Error(`kvlab replay: block ${x} is already in the free queue`);
    const t = this.N + 1, p = this.prev[t];
    this.next[p] = x; this.prev[x] = p; this.next[x] = t; this.prev[t] = x;
    this.inQueue[x] = 1; this.numFree++;
  }
  store(code, x) {
    const held = this.cached.get(code);
    this.blockHash[x] = code;
    if (held === undefined) this.cached.set(code, [x]);
    else { this.cached.set(code, held.concat([x])); this.shared.add(code); }
  }
  evict(code, x) {
    const held = this.cached.get(code);
    this.blockHash[x] = -1;
    if (held !== undefined && held.length > 1) {
      const rest = held.filter((y) => y !== x);
      this.cached.set(code, rest);
      if (rest.length < 2) this.shared.delete(code);
    } else this.cached.delete(code);
  }
  // Block ids from the head (limit of them) and the last `tailCount` before the tail.
  queue(limit = Infinity, tailCount = 0) {
    const head = [], tail = [], N = this.N;
    for (let x = this.next[N]; x !== N + 1 && head.length < limit; x = this.next[x]) head.push(x);
    if (this.numFree > head.length) {
      const k = Math.min(tailCount, this.numFree - head.length);
      for (let x = this.prev[N + 1]; tail.length < k; x = this.prev[x]) tail.unshift(x);
    }
    return { head, tail, hidden: this.numFree - head.length - tail.length, length: this.numFree };
  }
}

function initialState(T) {
  const ini = T.data.initial;
  const s = new KVState(T.numBlocks, T.numGroups);
  for (const b of decodeArray(ini.free_queue)) s.append(b);
  s.refCnt.set(decodeArray(ini.ref_cnt));
  s.blockHash.set(decodeArray(ini.block_hash));
  const codes = decodeArray(ini.cached.codes), cr = ragged(ini.cached);
  codes.forEach((code, j) => {
    s.cached.set(code, Array.from(cr.values.subarray(cr.offsets[j], cr.offsets[j + 1])));
    if (cr.offsets[j + 1] - cr.offsets[j] > 1) s.shared.add(code);
  });
  ini.req_to_blocks.forEach((g, gi) => {
    const reqs = decodeArray(g.requests), rr = ragged(g);
    reqs.forEach((r, j) => s.req[gi].set(r, Array.from(rr.values.subarray(rr.offsets[j], rr.offsets[j + 1]))));
  });
  return s;
}

// Event kinds that change the state (the others are reads, calls and step markers).
const MUTATES = new Uint8Array(256);
for (const k of ["POPLEFT", "POPLEFT_N", "REMOVE", "APPEND", "APPEND_N", "GET_NEW_BLOCKS", "TOUCH",
  "FREE_BLOCKS", "BLOCK_STORED", "BLOCK_REMOVED", "ALL_BLOCKS_CLEARED", "REQ_BLOCKS_ADDED",
  "REQ_BLOCKS_NULLED", "REQ_FREED"]) MUTATES[KIND[k]] = 1;

// Apply event i to s in place (kvlab/trace/replay.py::_fast_loop, one kind per case).
export function applyEvent(T, s, i) {
  const c = T.c, k = c.kind[i];
  if (!MUTATES[k]) return;
  const g = c.group[i], r = c.request[i], a = c.a[i], b = c.b[i];
  const P = c.payload, o0 = c.offsets[i], o1 = c.offsets[i + 1];
  switch (k) {
    case KIND.POPLEFT: case KIND.REMOVE: s.unlink(a); break;
    case KIND.POPLEFT_N: for (let j = o0; j < o1; j++) s.unlink(P[j]); break;
    case KIND.APPEND: s.append(a); break;
    case KIND.APPEND_N: for (let j = o0; j < o1; j++) s.append(P[j]); break;
    case KIND.GET_NEW_BLOCKS: case KIND.TOUCH: for (let j = o0; j < o1; j++) s.refCnt[P[j]]++; break;
    case KIND.FREE_BLOCKS: for (let j = o0; j < o1; j++) s.refCnt[P[j]]--; break;
    case KIND.BLOCK_STORED: {
      const m = (o1 - o0) >> 1;
      for (let j = o0; j < o0 + m; j++) s.store(P[j + m] * T.keyShift + g, P[j]);
      break;
    }
    case KIND.BLOCK_REMOVED: s.evict(b * T.keyShift + g, a); break;
    case KIND.ALL_BLOCKS_CLEARED: s.cached = new Map(); s.shared = new Set(); s.blockHash.fill(-1); break;
    case KIND.REQ_BLOCKS_ADDED: {
      const old = s.req[g].get(r) || [], blocks = old.slice();
      for (let j = o0; j < o1; j++) blocks.push(P[j]);
      s.req[g].set(r, blocks);
      break;
    }
    case KIND.REQ_BLOCKS_NULLED: {
      const held = s.req[g].get(r);
      if (held === undefined) throw new Error(`kvlab replay: request ${r} holds no blocks in group ${g} at event ${i}`);
      const blocks = held.slice();
      for (let j = o0; j < o1; j++) blocks[P[j]] = T.nullBlock;
      s.req[g].set(r, blocks);
      break;
    }
    case KIND.REQ_FREED: s.req[g].delete(r); break;
    default: throw new Error(`kvlab replay: unknown event kind ${k} at event ${i}`);
  }
}

// stateAt(i): the state right after event i (i = -1: initial). The returned object belongs to
// the replayer (read it, do not change it). All checkpoints (one every `interval` events) are
// built by one replay when the replayer is made, so that the first jump anywhere costs at most
// one interval of events, like every later one; stepping forward from the last answer replays
// only the new events.
export class Replayer {
  constructor(T, interval = 1024, maxCheckpoints = 128) {
    this.T = T;
    this.interval = Math.max(16, interval | 0, Math.ceil(T.n / maxCheckpoints));
    this.checkpoints = new Map();
    const s = initialState(T), step = this.interval;
    this.checkpoints.set(0, s.snapshot());
    for (let at = 0; at < T.n; at++) {
      applyEvent(T, s, at);
      if ((at + 1) % step === 0) this.checkpoints.set(at + 1, s.snapshot());
    }
    this.cursor = { pos: T.n, state: s };  // NOTE: the final state, ready for a jump to the end
  }
  stateAt(i) {
    if (!(i >= -1 && i < this.T.n)) throw new RangeError(`kvlab: event ${i} outside [-1, ${this.T.n})`);
    const pos = i + 1;
    let at = Math.floor(pos / this.interval) * this.interval, s;
    const cur = this.cursor;
    if (cur && at <= cur.pos && cur.pos <= pos) ({ pos: at, state: s } = cur);
    else s = KVState.restore(this.checkpoints.get(at));
    this.cursor = null;
    for (; at < pos; at++) applyEvent(this.T, s, at);
    this.cursor = { pos, state: s };
    return s;
  }
}
// ---------------------------------------------------------------- navigation
// The cursor moves of kvlab/viz/navigation.py (same names, same results).
function clamp(T, i) { return Math.max(-1, Math.min(i, T.n - 1)); }
function rowsOf(T, kind) {
  if (!T.byKind.has(kind)) {
    const rows = [];
    for (let i = 0; i < T.n; i++) if (T.c.kind[i] === kind) rows.push(i);
    T.byKind.set(kind, Int32Array.from(rows));
  }
  return T.byKind.get(kind);
}
function bisect(rows, x, right) {
  let lo = 0, hi = rows.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (right ? rows[mid] <= x : rows[mid] < x) lo = mid + 1; else hi = mid; }
  return lo;
}
export const NAV = {
  into: (T, i) => clamp(T, i + 1),
  over(T, i) {
    const j = clamp(T, i + 1);
    return j > i && T.c.kind[j] === KIND.CALL_BEGIN && T.endOf[j] >= 0 ? T.endOf[j] : j;
  },
  out(T, i) {
    const j = clamp(T, i + 1);
    if (j === i || T.c.kind[j] === KIND.CALL_END) return j;
    const b = T.parent[j];
    if (b < 0) return i;  // outside every call: nothing to step out of
    return T.endOf[b] >= 0 ? T.endOf[b] : j;
  },
  back: (T, i) => clamp(T, i - 1),
  back_over(T, i) {
    if (i >= 0 && T.c.kind[i] === KIND.CALL_END && T.beginOf[i] >= 0) return clamp(T, T.beginOf[i] - 1);
    return clamp(T, i - 1);
  },
  next_kind(T, i, kind) {
    const rows = rowsOf(T, kind), j = bisect(rows, i, true);
    return j < rows.length ? rows[j] : i;
  },
  prev_kind(T, i, kind) {
    const rows = rowsOf(T, kind), j = bisect(rows, i, false) - 1;
    return j >= 0 ? rows[j] : i;
  },
};

// ---------------------------------------------------------------- describing events
export function callArgs(T, i) {
  const c = T.c, name = T.callNames[c.group[i]] ?? `call#${c.group[i]}`;
  const spec = T.data.call_specs[name], isEnd = c.kind[i] === KIND.CALL_END;
  const p = Array.from(payload(T, i));
  if (c.a[i] === VERBATIM || c.a[i] === WIDE || !spec) return { name, values: c.a[i] === WIDE ? unpackWide(p) : p, names: null };
  const names = isEnd ? spec.result : spec.args;
  const packed = [c.a[i], c.b[i], ...p];
  const order = isEnd || spec.pack === null ? names.map((_, j) => j) : spec.pack;
  const values = new Array(names.length).fill(0);
  order.forEach((j, pos) => { values[j] = packed[pos] ?? 0; });
  return { name, values, names };
}

function list(p, max = 12) {
  const a = Array.from(p);
  return a.length > max ? `[${a.slice(0, max).join(", ")}, … (${a.length})]` : `[${a.join(", ")}]`;
}

// One line per event, close to Python's str(trace[i]).
// sources.py: the vLLM 0.22.1 file::function each event mirrors (tests/viz/test_sources.py keeps the
// two the same). Calls point at the KVCacheManager method they bracket.
export const VLLM_SOURCES = {
 "kinds": {
  "STEP": "vllm/v1/core/sched/scheduler.py::Scheduler.schedule",
  "POPLEFT": "vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.popleft",
  "POPLEFT_N": "vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.popleft_n",
  "REMOVE": "vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.remove",
  "APPEND": "vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.append",
  "APPEND_N": "vllm/v1/core/kv_cache_utils.py::FreeKVCacheBlockQueue.append_n",
  "GET_NEW_BLOCKS": "vllm/v1/core/block_pool.py::BlockPool.get_new_blocks",
  "TOUCH": "vllm/v1/core/block_pool.py::BlockPool.touch",
  "FREE_BLOCKS": "vllm/v1/core/block_pool.py::BlockPool.free_blocks",
  "BLOCK_STORED": "vllm/v1/core/block_pool.py::BlockPool.cache_full_blocks",
  "BLOCK_REMOVED": "vllm/v1/core/block_pool.py::BlockPool._maybe_evict_cached_block",
  "ALL_BLOCKS_CLEARED": "vllm/v1/core/block_pool.py::BlockPool.reset_prefix_cache",
  "LOOKED_UP": "vllm/v1/core/block_pool.py::BlockPool.get_cached_block",
  "FIXED_POINT_ITERATED": "vllm/v1/core/kv_cache_coordinator.py::HybridKVCacheCoordinator.find_longest_cache_hit",
  "REQ_BLOCKS_ADDED": "vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.allocate_new_blocks",
  "REQ_BLOCKS_NULLED": "vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.remove_skipped_blocks",
  "REQ_FREED": "vllm/v1/core/single_type_kv_cache_manager.py::SingleTypeKVCacheManager.free"
 },
 "calls": {
  "get_computed_blocks": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.get_computed_blocks",
  "allocate_slots": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.allocate_slots",
  "free": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.free",
  "remove_skipped_blocks": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.remove_skipped_blocks",
  "evict_blocks": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.evict_blocks",
  "reset_prefix_cache": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.reset_prefix_cache",
  "cache_blocks": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.cache_blocks",
  "new_step_starts": "vllm/v1/core/kv_cache_manager.py::KVCacheManager.new_step_starts"
 }
};
export function vllmSource(T, i) {
  if (i < 0) return null;
  const k = T.c.kind[i];
  if (k === KIND.CALL_BEGIN || k === KIND.CALL_END) return VLLM_SOURCES.calls[callName(T, T.c.kind[i] === KIND.CALL_END && T.beginOf[i] >= 0 ? T.beginOf[i] : i)] ?? null;
  return VLLM_SOURCES.kinds[T.kinds[k]] ?? null;
}
export const vllmSourceUrl = (where) => `https://github.com/vllm-project/vllm/blob/v0.22.1/${where.split("::")[0]}`;

export function describe(T, i) {
  if (i < 0) return "initial state (before event 0)";
  const c = T.c, k = c.kind[i], name = T.kinds[k], p = payload(T, i);
  const req = c.request[i] >= 0 ? ` req=${shown(T.requests[c.request[i]])}` : "";
  let body = "";
  if (k === KIND.CALL_BEGIN || k === KIND.CALL_END) {
    const { name: call, values, names } = callArgs(T, i);
    const args = names ? names.map((n, j) => `${n}=${values[j]}`).join(", ") : list(values);
    body = k === KIND.CALL_BEGIN ? ` ${shown(call)}(${args})` : ` ${shown(call)} → (${args})`;
  } else if (k === KIND.POPLEFT || k === KIND.REMOVE || k === KIND.APPEND) body = ` block_id=${c.a[i]}`;
  else if (k === KIND.BLOCK_STORED) {
    const m = p.length >> 1;
    body = ` group=${c.group[i]} block_ids=${list(p.subarray(0, m))} hashes=[${Array.from(p.subarray(m)).map((h) => hashHex(T, h)).join(", ")}]`;
  } else if (k === KIND.BLOCK_REMOVED) body = ` group=${c.group[i]} block_id=${c.a[i]} hash=${hashHex(T, c.b[i])}`;
  else if (k === KIND.LOOKED_UP) body = ` group=${c.group[i]} hash=${hashHex(T, c.a[i])} ${c.b[i] >= 0 ? `hit block ${c.b[i]}` : "miss"}`;
  else if (k === KIND.FIXED_POINT_ITERATED) {
    const f = unpackFixedPoint(p), blocks = f.block_ids ? ` blocks=${f.block_ids.map((b) => list(b)).join(" ")}` : "";
    body = ` iteration=${c.a[i]} groups=${list(f.kv_cache_group_ids)} ${c.b[i]} → ${f.hit_length_out} tokens${f.reused ? " (reused)" : ""}${blocks}`;
  }
  else if (k === KIND.STEP) body = ` ${c.a[i]}`;
  else if (k === KIND.REQ_BLOCKS_NULLED) body = ` group=${c.group[i]} indices=${list(p)}`;
  else if (k === KIND.REQ_FREED) body = ` group=${c.group[i]}`;
  else if (p.length || k === KIND.REQ_BLOCKS_ADDED) body = `${k === KIND.REQ_BLOCKS_ADDED ? ` group=${c.group[i]}` : ""} block_ids=${list(p)}`;
  return `#${i} ${name}${req}${body}`;
}

// ---------------------------------------------------------------- calls
// What one KVCacheManager call did, from the trace alone (kvlab/viz/calls.py, same rules and
// the same numbers): the call at a cursor, allocate_slots' token layout, the hybrid fixed
// point's turns, and token positions -> slots from a replayed state.
export const SEGMENTS = [
  ["comp", "num_computed_tokens", "already computed, blocks held"],
  ["new_comp", "num_new_computed_tokens", "prefix-cache hit (touch)"],
  ["ext_comp", "num_external_computed_tokens", "KV from a connector"],
  ["new", "num_new_tokens", "computed this step"],
  ["lookahead", "num_lookahead_tokens", "draft slots, never cached"],
];

function callName(T, begin) { return T.callNames[T.c.group[begin]] ?? `call#${T.c.group[begin]}`; }

// kvlab/trace/view.py::decode_call: a CALL_BEGIN's args or a CALL_END's result, by name.
function namedValues(T, i) {
  const c = T.c, isEnd = c.kind[i] === KIND.CALL_END, name = callName(T, i), spec = T.data.call_specs[name];
  if (c.a[i] === VERBATIM || c.a[i] === WIDE || !spec) {
    const p = Array.from(payload(T, i));
    const values = c.a[i] === VERBATIM ? p : c.a[i] === WIDE ? unpackWide(p) : [c.a[i], c.b[i], ...p];
    const names = spec ? (isEnd ? spec.result : spec.args) : null;
    if (names && names.length && names.length === values.length) return Object.fromEntries(names.map((n, j) => [n, values[j]]));
    if (name === "evict_blocks" && !isEnd) return { block_ids: values };
    return values.length ? { [isEnd ? "result" : "args"]: values } : {};
  }
  const { values, names } = callArgs(T, i);
  return Object.fromEntries(names.map((n, j) => [n, values[j]]));
}

// The call whose CALL_BEGIN is `begin`: {begin, end (-1 unfinished), name, request (id or
// null), args, result ({} while unfinished)}, like kvlab.trace.Call.
export function callAt(T, begin) {
  const end = T.endOf[begin], r = T.c.request[begin];
  return { begin, end, name: callName(T, begin), request: r >= 0 ? T.requests[r] : null, requestIndex: r,
    args: namedValues(T, begin), result: end >= 0 ? namedValues(T, end) : {} };
}

function beginsNamed(T, name) {
  if (name === null) return rowsOf(T, KIND.CALL_BEGIN);
  if (!T.byCall.has(name)) T.byCall.set(name, rowsOf(T, KIND.CALL_BEGIN).filter((b) => callName(T, b) === name));
  return T.byCall.get(name);
}

// calls.py::find_call: the innermost call named `name` enclosing `index`, else the last such
// call that began at or before it (null when there is none; name null = any call).
export function findCall(T, index, name = null) {
  if (!(index >= -1 && index < T.n)) throw new RangeError(`kvlab: event ${index} outside [-1, ${T.n})`);
  if (index < 0) return null;
  for (let j = T.c.kind[index] === KIND.CALL_BEGIN ? index : T.parent[index]; j >= 0; j = T.parent[j]) {
    if (name === null || callName(T, j) === name) return callAt(T, j);
  }
  const begins = beginsNamed(T, name), k = bisect(begins, index, true) - 1;
  return k >= 0 ? callAt(T, begins[k]) : null;
}

// Tokens per block of a group (trace config; group 0's, then hash_block_size, then 16).
export function blockSizeOf(T, group = 0) {
  const cfg = T.data.config, groups = cfg.groups || [];
  return Number(groups[group]?.block_size || groups[0]?.block_size || cfg.hash_block_size || 16);
}

// calls.py::slot_layout: the five spans of an allocate_slots call, left to right (tokens).
export function slotLayout(call, blockSize) {
  if (call.name !== "allocate_slots") throw new Error(`kvlab: slotLayout needs an allocate_slots call, got ${shown(call.name)}`);
  if (!(blockSize >= 1)) throw new Error(`kvlab: block_size must be >= 1 (tokens), got ${blockSize}`);
  let pos = 0;
  const segments = SEGMENTS.map(([name, arg, meaning]) => {
    const seg = { name, start: pos, num_tokens: call.args[arg] ?? 0, meaning };
    pos += seg.num_tokens;
    return seg;
  });
  const done = Object.keys(call.result).length > 0;
  return { block_size: blockSize, segments, num_tokens: pos, num_blocks: Math.ceil(pos / blockSize),
    num_blocks_to_allocate: call.result.num_blocks_to_allocate ?? -1,
    allocated: done ? Boolean(call.result.allocated) : null };
}

// calls.py::fixed_point_rows: the FIXED_POINT_ITERATED turns inside `call` (empty: unitary).
export function fixedPointRows(T, call) {
  const stop = call.end >= 0 ? call.end : T.n - 1, rows = rowsOf(T, KIND.FIXED_POINT_ITERATED), out = [];
  for (let k = bisect(rows, call.begin, false); k < rows.length && rows[k] <= stop; k++) {
    const i = rows[k], f = unpackFixedPoint(payload(T, i));
    out.push({ seq: i, iteration: T.c.a[i], kv_cache_group_ids: f.kv_cache_group_ids, hit_length_in: T.c.b[i],
      hit_length_out: f.hit_length_out, reused: f.reused, block_ids: f.block_ids, shortened: f.hit_length_out < T.c.b[i] });
  }
  return out;
}

// Token positions [from, to) of request index `r` -> {block_id, slot} per group, from the
// block list in state `s` (slot = block_id * block_size + position % block_size; null where
// the request holds no block there yet; a null_block gives slot -1).
export function slotMapping(T, s, r, from, to) {
  return s.req.map((m, g) => {
    const blocks = m.get(r) || [], bs = blockSizeOf(T, g), cells = [];
    for (let pos = from; pos < to; pos++) {
      const b = blocks[Math.floor(pos / bs)];
      cells.push(b === undefined ? null : { block_id: b, slot: b === T.nullBlock ? -1 : b * bs + (pos % bs) });
    }
    return cells;
  });
}

// snapshot.py::group_label: "group 1 · SlidingWindow (window 8)".
export function groupLabel(config, g) {
  const spec = config.groups?.[g];
  if (!spec) return `group ${g}`;
  const extra = spec.sliding_window ? ` (window ${spec.sliding_window})` : "";
  return `group ${g} · ${shown(String(spec.spec ?? "?").replace(/Spec$/, ""))}${extra}`;
}
