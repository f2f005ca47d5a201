// kvlab player views: pool grid (canvas), free queue, block table, hash chain (SVG), events.
// Each view redraws one container from a trace T and a replayed state s (replay.js).
// Colours are kvlab/viz/palette.py's (tests/viz checks the hex values match).

import { shown } from "./check.js";
import { blockSizeOf, findCall, fixedPointRows, hashHex, slotLayout, slotMapping } from "./replay.js";
import { tr, trn } from "./i18n.js";

export const COLOURS = {
  null: ["#3a3a3a", "#ffffff"], in_use: ["#1d4ed8", "#ffffff"], shared: ["#7e22ce", "#ffffff"],
  in_transit: ["#0f766e", "#ffffff"], evictable: ["#f59e0b", "#000000"], free: ["#d4d4d4", "#000000"],
  hit: "#15803d", miss: "#dc2626",
};
export const SEGMENT_COLOURS = { comp: "#475569", new_comp: "#15803d", ext_comp: "#0e7490", new: "#1d4ed8", lookahead: "#a855f7" };
export const GROUP_COLOURS = ["#1d4ed8", "#ea580c", "#059669", "#db2777", "#7c3aed", "#65a30d"];
export const LABELS = {
  null: "null_block", in_use: "in use (ref_cnt 1)", shared: "shared (ref_cnt ≥ 2)",
  evictable: "free, cached: evictable", free: "free, empty", in_transit: "in transit (mid-operation)",
};
// LABELS in the player's language (null_block is vLLM's name: never translated).
export function statusLabel(st) {
  const text = { null: "null_block", in_use: tr("in use (ref_cnt 1)"), shared: tr("shared (ref_cnt ≥ 2)"),
    evictable: tr("free, cached: evictable"), free: tr("free, empty"), in_transit: tr("in transit (mid-operation)") };
  return text[st] ?? st;
}
// What each allocate_slots segment holds (replay.js SEGMENTS' meanings), in the player's language.
function segmentMeaning(name) {
  return { comp: tr("already computed, blocks held"), new_comp: tr("prefix-cache hit (touch)"),
    ext_comp: tr("KV from a connector"), new: tr("computed this step"), lookahead: tr("draft slots, never cached") }[name];
}
// replay.js groupLabel in the player's language: "group 1 · SlidingWindow (window 8)".
function groupText(config, g) {
  const spec = config.groups?.[g];
  if (!spec) return tr("group {g}", { g });
  const name = String(spec.spec ?? "?").replace(/Spec$/, "");
  return spec.sliding_window ? tr("group {g} · {spec} (window {window})", { g, spec: name, window: spec.sliding_window })
    : tr("group {g} · {spec}", { g, spec: name });
}
const GLYPH = { null: "∅", evictable: "•", in_transit: "↔", in_use: "", shared: "", free: "" };

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "style") Object.assign(el.style, v); else if (k === "cls") el.className = v; else el.setAttribute(k, v);
  }
  for (const c of children) el.append(c);
  return el;
}

export function blockStatus(T, s, b) {
  if (b === T.nullBlock) return "null";
  if (s.refCnt[b] > 0) return s.refCnt[b] >= 2 ? "shared" : "in_use";
  if (!s.inQueue[b]) return "in_transit";
  return s.blockHash[b] >= 0 ? "evictable" : "free";
}

// kv_cache_group_id holding or caching each block (-1: none).
export function ownerGroups(T, s) {
  const owner = new Int16Array(T.numBlocks).fill(-1);
  for (let b = 0; b < T.numBlocks; b++) if (s.blockHash[b] >= 0) owner[b] = s.blockHash[b] % T.keyShift;
  s.req.forEach((m, g) => { for (const blocks of m.values()) for (const b of blocks) owner[b] = g; });
  if (T.nullBlock >= 0) owner[T.nullBlock] = -1;
  return owner;
}

function hashOf(T, s, b) {
  const code = s.blockHash[b];
  return code < 0 ? null : Math.floor(code / T.keyShift);
}

export function blockTitle(T, s, b) {
  const st = blockStatus(T, s, b), hsh = hashOf(T, s, b);
  return tr("block {b}: {status}, ref_cnt {ref_cnt}", { b, status: statusLabel(st), ref_cnt: s.refCnt[b] })
    + (hsh === null ? "" : tr(", block_hash {hash}", { hash: hashHex(T, hsh) }));
}

export function cellSize(n) { return n <= 128 ? 40 : n <= 512 ? 26 : n <= 2048 ? 13 : 8; }

export function drawPool(canvas, T, s, width) {
  const N = T.numBlocks, cell = cellSize(N), cols = Math.max(1, Math.floor(width / cell));
  const rows = Math.ceil(N / cols), dpr = globalThis.devicePixelRatio || 1;
  if (canvas.width !== cols * cell * dpr || canvas.height !== rows * cell * dpr) {
    // NOTE: resizing reallocates the backing store; only do it when the grid's shape changes.
    canvas.style.width = `${cols * cell}px`; canvas.style.height = `${rows * cell}px`;
    canvas.width = cols * cell * dpr; canvas.height = rows * cell * dpr;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, cols * cell, rows * cell);
  const owner = T.numGroups > 1 ? ownerGroups(T, s) : null, gap = cell >= 13 ? 2 : 1;
  ctx.textAlign = "center"; ctx.textBaseline = "middle";
  for (let b = 0; b < N; b++) {
    const x = (b % cols) * cell, y = Math.floor(b / cols) * cell, st = blockStatus(T, s, b);
    ctx.fillStyle = COLOURS[st][0];
    ctx.fillRect(x + gap / 2, y + gap / 2, cell - gap, cell - gap);
    if (owner && owner[b] >= 0) {
      ctx.fillStyle = GROUP_COLOURS[owner[b] % GROUP_COLOURS.length];
      ctx.fillRect(x + gap / 2, y + gap / 2, cell - gap, Math.max(2, cell / 8));
    }
    if (cell >= 26) {
      ctx.fillStyle = COLOURS[st][1];
      ctx.font = `bold ${cell >= 40 ? 14 : 10}px system-ui, sans-serif`;
      ctx.fillText(st === "null" ? "∅" : String(b), x + cell / 2, y + cell / 2 + 1);
      if (s.refCnt[b] > 0 && st !== "null") {
        ctx.font = `bold ${cell >= 40 ? 10 : 8}px system-ui, sans-serif`;
        ctx.fillText(String(s.refCnt[b]), x + cell - 7, y + 8);
      }
    }
  }
  return { cols, cell };
}

export function legend(numGroups, config) {
  const items = ["in_use", "shared", "evictable", "free", "null", "in_transit"].map((st) =>
    h("span", { cls: "kvlab-legend-item" },
      h("span", { cls: "kvlab-swatch", style: { background: COLOURS[st][0], color: COLOURS[st][1] } }, GLYPH[st] || "7"),
      statusLabel(st)));
  if (numGroups > 1) {
    for (let g = 0; g < numGroups; g++) {
      const spec = (config.groups?.[g]?.spec ?? "").replace(/Spec$/, "");
      items.push(h("span", { cls: "kvlab-legend-item" },
        h("span", { cls: "kvlab-stripe", style: { background: GROUP_COLOURS[g % GROUP_COLOURS.length] } }),
        tr("group {g} {spec}", { g, spec })));
    }
  }
  return h("div", { cls: "kvlab-legend" }, ...items);
}

function chip(T, s, b) {
  const st = blockStatus(T, s, b), hsh = hashOf(T, s, b);
  const el = h("span", { cls: "kvlab-chip", title: blockTitle(T, s, b),
    style: { background: COLOURS[st][0], color: COLOURS[st][1] } }, String(b) + (GLYPH[st] || ""));
  if (hsh !== null) el.append(h("small", {}, hashHex(T, hsh)));
  return el;
}

// The free queue, fake head to fake tail; returns the block ids drawn (head part, tail part).
export function drawFreeQueue(box, T, s, maxBlocks) {
  const tailCount = Math.max(1, Math.floor(maxBlocks / 4));
  const q = s.numFree <= maxBlocks ? s.queue(maxBlocks, 0) : s.queue(maxBlocks - tailCount, tailCount);
  const row = h("div", { cls: "kvlab-queue" },
    h("span", { cls: "kvlab-evict" }, `${tr("evicts first")} ◀`), h("span", { cls: "kvlab-end" }, tr("fake head")));
  for (const b of q.head) row.append(h("span", { cls: "kvlab-link" }, "⇄"), chip(T, s, b));
  if (q.hidden > 0) row.append(h("span", { cls: "kvlab-link" }, "⇄"), h("span", { cls: "kvlab-gap" }, tr("… {n} more …", { n: q.hidden })));
  for (const b of q.tail) row.append(h("span", { cls: "kvlab-link" }, "⇄"), chip(T, s, b));
  row.append(h("span", { cls: "kvlab-link" }, "⇄"), h("span", { cls: "kvlab-end" }, tr("fake tail")),
    h("span", { cls: "kvlab-append" }, `◀ ${tr("free_blocks appends")}`));
  box.replaceChildren(h("div", { cls: "kvlab-title" },
    tr("free_block_queue · {blocks} · popleft takes from the left", { blocks: trn("{n} block", "{n} blocks", q.length) })), row);
  return q;
}

export function drawBlockTable(box, T, s, maxRows = 24, maxCols = 32) {
  const rows = [];
  s.req.forEach((m, g) => { for (const [r, blocks] of m) rows.push([r, g, blocks]); });
  rows.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const title = h("div", { cls: "kvlab-title" }, tr("block table (req_to_blocks) · {rows}", { rows: trn("{n} row", "{n} rows", rows.length) }));
  if (!rows.length) return box.replaceChildren(title, h("div", { cls: "kvlab-dim" }, tr("no request holds blocks")));
  const width = Math.min(maxCols, Math.max(...rows.map((r) => r[2].length)));
  const head = h("tr", {}, h("th", {}, tr("request")), ...(T.numGroups > 1 ? [h("th", {}, tr("group"))] : []),
    ...Array.from({ length: width }, (_, j) => h("th", {}, String(j))));
  const table = h("table", { cls: "kvlab-table" }, head);
  for (const [r, g, blocks] of rows.slice(0, maxRows)) {
    const line = h("tr", {}, h("th", {}, shown(T.requests[r])), ...(T.numGroups > 1 ? [h("td", {}, String(g))] : []));
    for (let j = 0; j < width; j++) {
      const b = blocks[j];
      if (b === undefined) { line.append(h("td")); continue; }
      const st = blockStatus(T, s, b);
      line.append(h("td", { title: blockTitle(T, s, b), style: { background: COLOURS[st][0], color: COLOURS[st][1] } },
        st === "null" ? "∅" : String(b)));
    }
    if (blocks.length > width) line.append(h("td", { cls: "kvlab-dim" }, `+${blocks.length - width}`));
    table.append(line);
  }
  const more = rows.length > maxRows ? [h("div", { cls: "kvlab-dim" }, trn("… {n} more row", "… {n} more rows", rows.length - maxRows))] : [];
  box.replaceChildren(title, table, ...more);
}

// Hash chains of the chosen requests (indexes), merged into a tree; green = cached (hit).
export function drawHashChain(box, T, s, reqs, maxNodes = 240, maxDepth = 40) {
  const { offsets, values } = T.tree.chains, kids = new Map(), ends = new Map();
  for (const r of reqs) {
    const chain = values.subarray(offsets[r], offsets[r + 1]);
    if (!chain.length) continue;
    let parent = -1;
    for (const hsh of chain.subarray(0, maxDepth)) {
      if (!kids.has(parent)) kids.set(parent, []);
      if (!kids.get(parent).includes(hsh)) kids.get(parent).push(hsh);
      parent = hsh;
    }
    ends.set(parent, [...(ends.get(parent) || []), shown(T.requests[r], 40)]);
  }
  const title = h("div", { cls: "kvlab-title" }, tr("hash chains (block_hash) · green: cached, a lookup hits · red: not cached"));
  if (!kids.size) return box.replaceChildren(title, h("div", { cls: "kvlab-dim" }, tr("no known hash chain for these requests")));
  const W = 92, H = 30, DX = 112, DY = 40, place = new Map();
  let row = 0;
  const visit = (node, depth) => {  // leaves get consecutive rows; a parent sits on its first child's row
    const children = kids.get(node) || [];
    const y = row;
    if (place.size >= maxNodes) return y;
    if (node >= 0) place.set(node, { x: depth * DX, y });
    if (!children.length) row++;
    children.forEach((c) => visit(c, depth + 1));
    return y;
  };
  visit(-1, -1);
  const svgNS = "http://www.w3.org/2000/svg", svg = document.createElementNS(svgNS, "svg");
  const add = (tag, attrs, text) => {
    const el = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    svg.append(el);
    return el;
  };
  let maxX = 0;
  for (const [node, p] of place) {
    const parent = T.tree.parent[node], pp = place.get(parent);
    if (pp) add("line", { x1: pp.x + W, y1: pp.y * DY + H / 2, x2: p.x, y2: p.y * DY + H / 2, stroke: "#555", "stroke-width": 2 });
    let cached = false;
    for (let g = 0; g < Math.max(T.numGroups, 1); g++) cached ||= s.cached.has(node * T.keyShift + g);
    add("rect", { x: p.x, y: p.y * DY, width: W, height: H, rx: 6, fill: cached ? COLOURS.hit : COLOURS.miss });
    add("text", { x: p.x + W / 2, y: p.y * DY + H / 2 + 5, "text-anchor": "middle", fill: "#fff", class: "kvlab-hex" },
      hashHex(T, node) + (cached ? " ✓" : " ✗"));
    if (ends.has(node)) add("text", { x: p.x + W + 8, y: p.y * DY + H / 2 + 5, class: "kvlab-req" }, ends.get(node).join(", "));
    maxX = Math.max(maxX, p.x + W + 80);
  }
  svg.setAttribute("width", maxX); svg.setAttribute("height", row * DY + 4);
  box.replaceChildren(title, svg);
}

export function drawEvents(box, T, index, describe, before = 6, after = 6) {
  const list = h("div", { cls: "kvlab-events" });
  for (let i = Math.max(index - before, 0); i <= Math.min(index + after, T.n - 1); i++) {
    const depth = T.c.depth[i], k = T.kinds[T.c.kind[i]];
    const cls = i === index ? "kvlab-ev kvlab-current" : k.startsWith("CALL") || k === "STEP" ? "kvlab-ev kvlab-call" : "kvlab-ev";
    list.append(h("div", { cls, style: { paddingLeft: `${0.5 + 1.5 * depth}em` }, "data-index": String(i) },
      `${tr("step {step}", { step: T.step[i] })} · ${describe(T, i)}`));
  }
  if (index < 0) list.prepend(h("div", { cls: "kvlab-ev kvlab-current" }, tr("initial state (before event 0)")));
  box.replaceChildren(list);
  // Keep the cursor's line in view, once the frame is laid out anyway (reading offsetTop now
  // would force an extra layout on every step).
  const current = list.querySelector(".kvlab-current");
  const scroll = () => { list.scrollTop = Math.max(0, current.offsetTop - list.offsetTop - list.clientHeight / 3); };
  if (current) (globalThis.requestAnimationFrame ?? ((f) => f()))(scroll);
}

// ---------------------------------------------------------------- calls
function dim(text) { return h("div", { cls: "kvlab-dim" }, text); }

// The hybrid fixed point of the get_computed_blocks call at (or last before) `index`: rows are
// iterations, columns attention groups, a cell "in → out" candidate hit length (tokens), red
// with ✂ where that group shortened it, over the block ids each group's hit holds after the turn
// ([∅ ∅ 7 8], ∅ = null_block); turns after the cursor are faded, the cursor's outlined.
// terminal_calls.py::_hit_blocks_text: one bracket per group, "[∅ ∅ 7 8]".
function hitBlocksText(blockIds, nullBlock) {
  return blockIds.map((bs) => `[${bs.map((b) => (b === nullBlock ? "∅" : String(b))).join(" ")}]`).join(" ");
}

export function drawFixedPoint(box, T, index) {
  const call = findCall(T, index, "get_computed_blocks");
  if (!call) return box.replaceChildren(dim(tr("no get_computed_blocks call yet")));
  const rows = fixedPointRows(T, call), head = tr("get_computed_blocks [{request}] at event #{begin}", { request: shown(call.request), begin: call.begin });
  if (!rows.length) return box.replaceChildren(dim(tr("{head}: one attention type, no fixed point", { head })));
  const keyOf = (ids) => ids.join(","), columns = [...new Map(rows.map((r) => [keyOf(r.kv_cache_group_ids), r.kv_cache_group_ids])).values()];
  const table = h("table", { cls: "kvlab-table kvlab-fixed" }, h("tr", {}, h("th", {}, tr("iteration")),
    ...columns.map((ids) => h("th", {}, ids.map((g) => groupText(T.data.config, g)).join(", ")))));
  for (const it of [...new Set(rows.map((r) => r.iteration))].sort((a, b) => a - b)) {
    const line = h("tr", {}, h("th", {}, String(it)));
    for (const ids of columns) {
      const r = rows.find((x) => x.iteration === it && keyOf(x.kv_cache_group_ids) === keyOf(ids));
      if (!r) { line.append(h("td")); continue; }
      const cls = [r.seq > index ? "kvlab-future" : "", r.seq === index ? "kvlab-here" : ""].join(" ").trim();
      const style = r.shortened ? { background: COLOURS.miss, color: "#ffffff" } : {};
      const blocks = r.block_ids ? [h("div", { cls: "kvlab-hitblocks" }, hitBlocksText(r.block_ids, T.nullBlock))] : [];
      line.append(h("td", { cls, style, "data-seq": String(r.seq), title: tr("event #{seq}", { seq: r.seq }) },
        `${r.hit_length_in} → ${r.hit_length_out}` + (r.shortened ? " ✂" : "") + (r.reused ? ` ${tr("(reused)")}` : ""), ...blocks));
    }
    table.append(line);
  }
  const done = call.end >= 0 && call.end <= index;
  const result = done ? tr("result: num_new_computed_tokens = {n}", { n: call.result.num_new_computed_tokens }) : tr("converging…");
  box.replaceChildren(h("div", { cls: "kvlab-title" }, tr("hybrid fixed point · {head}", { head })), table,
    dim(tr("tokens · ✂ this group shortened the candidate · (reused) full attention truncated its earlier hit · [ids] the hit's blocks, ∅ = null_block · {result}", { result })));
}

function callTitle(call, layout) {
  const res = layout.allocated === null ? tr("unfinished")
    : tr("{outcome}, num_blocks_to_allocate = {n}", { outcome: layout.allocated ? tr("allocated") : tr("refused (None)"), n: layout.num_blocks_to_allocate });
  return tr("allocate_slots [{request}] at event #{begin} · {result}", { request: shown(call.request), begin: call.begin, result: res });
}

// allocate_slots' layout (comp | new_comp | ext_comp | new | lookahead) drawn to scale in
// blocks: every block the same width, white ticks at block boundaries, a ruler of block indexes.
export function drawAllocateSlots(box, T, index, maxWidth = 960) {
  const call = findCall(T, index, "allocate_slots");
  if (!call) return box.replaceChildren(dim(tr("no allocate_slots call yet")));
  const layout = slotLayout(call, blockSizeOf(T)), bs = layout.block_size, nb = Math.max(layout.num_blocks, 1);
  const px = Math.max(3, Math.min(64, Math.floor(maxWidth / nb))), bar = h("div", { cls: "kvlab-slots", style: { width: `${nb * px}px` } });
  for (const seg of layout.segments) {
    if (!seg.num_tokens) continue;
    bar.append(h("div", { cls: "kvlab-seg", "data-segment": seg.name, title: tr("{name}: tokens {first}..{last}", { name: seg.name, first: seg.start, last: seg.start + seg.num_tokens - 1 }),
      style: { left: `${(seg.start / bs) * px}px`, width: `${(seg.num_tokens / bs) * px}px`, background: SEGMENT_COLOURS[seg.name] } }));
  }
  bar.append(h("div", { cls: "kvlab-ticks", style: { backgroundSize: `${px}px 100%` } }));
  const every = Math.ceil(28 / px), ruler = h("div", { cls: "kvlab-ruler", style: { width: `${nb * px}px` } });
  for (let b = 0; b < nb; b += every) ruler.append(h("span", { style: { left: `${b * px}px` } }, String(b)));
  const legendRow = h("div", { cls: "kvlab-legend" }, ...layout.segments.map((seg) => h("span", { cls: "kvlab-legend-item" },
    h("span", { cls: "kvlab-swatch", style: { background: SEGMENT_COLOURS[seg.name], color: "#ffffff" } }, seg.name),
    tr("{tokens}: {meaning}", { tokens: trn("{n} token", "{n} tokens", seg.num_tokens), meaning: segmentMeaning(seg.name) }))));
  box.replaceChildren(h("div", { cls: "kvlab-title" }, callTitle(call, layout)), bar, ruler, legendRow,
    dim(tr("block_size = {size} · {tokens} in {blocks} · ruler = logical block index", { size: trn("{n} token", "{n} tokens", bs),
      tokens: trn("{n} token", "{n} tokens", layout.num_tokens), blocks: trn("{n} block", "{n} blocks", layout.num_blocks) })));
}

// Token positions → slots of the allocate_slots call's request at `index`, one row per group,
// from the request's block list in the replayed state `s`. At most `maxCols` positions: all of
// them when they fit, else a window that starts at the tokens computed this step.
export function drawSlotMapping(box, T, s, index, maxCols = 48) {
  const call = findCall(T, index, "allocate_slots");
  if (!call) return box.replaceChildren(dim(tr("no allocate_slots call yet")));
  const layout = slotLayout(call, blockSizeOf(T)), total = layout.num_tokens;
  const newStart = layout.segments[3].start, from = total <= maxCols ? 0 : Math.max(0, Math.min(newStart, total - maxCols));
  const to = Math.min(total, from + maxCols), rows = slotMapping(T, s, call.requestIndex, from, to);
  const segOf = (pos) => layout.segments.find((seg) => seg.start <= pos && pos < seg.start + seg.num_tokens);
  const head = h("tr", {}, h("th", {}, tr("position")));
  for (let pos = from; pos < to; pos++) {
    const seg = segOf(pos);
    head.append(h("th", { title: seg?.name ?? "", style: seg ? { background: SEGMENT_COLOURS[seg.name], color: "#ffffff" } : {} }, String(pos)));
  }
  const table = h("table", { cls: "kvlab-table kvlab-slotmap" }, head);
  rows.forEach((cells, g) => {
    const line = h("tr", { "data-group": String(g) }, h("th", {}, T.numGroups > 1 ? groupText(T.data.config, g) : tr("slot")));
    cells.forEach((cell, k) => {
      if (cell === null) return line.append(h("td", { cls: "kvlab-dim", title: tr("no block yet") }, "·"));
      const st = blockStatus(T, s, cell.block_id), pos = from + k;
      line.append(h("td", { title: tr("position {pos} → block {block_id}, offset {offset}", { pos, block_id: cell.block_id, offset: pos % blockSizeOf(T, g) }),
        style: { background: COLOURS[st][0], color: COLOURS[st][1] } },
      cell.slot < 0 ? "∅" : String(cell.slot), h("small", {}, `b${cell.block_id}`)));
    });
    table.append(line);
  });
  const span = total === 0 ? tr("no tokens") : tr("positions {first}..{last} of {total}", { first: from, last: to - 1, total });
  box.replaceChildren(h("div", { cls: "kvlab-title" }, tr("token positions → slots · request {request} · {span}", { request: shown(call.request), span })), table,
    dim(tr("slot = block_id × block_size + position % block_size · · = no block yet · ∅ = null_block (outside the window)")));
}
