// kvlab playground: edit a scenario, run the exact kvlab.core in Pyodide, replay its trace.
//
// The page (written by kvlab/playground/build.py) holds a JSON blob #kvlab-playground-data:
// strings {lang: {english: translation}}, player labels, presets, the scenario defaults and
// limits. This script builds the editor, loads Pyodide (pyodide/) and kvlab (kvlab-playground.zip)
// while showing what it loads, runs `kvlab.playground.browser.run_json` on Run and hands its
// answer to the trace player (player.js: window.kvlabPlayer, the same code as export_html's).
// Share puts the scenario in the URL (#s=base64url(JSON)); ?preset=nb03 opens a preset;
// ?lang=zh shows the page in Chinese. Every label is looked up by t with a literal English
// message (kvlab/playground/strings.py lists them; a test compares the two).
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("kvlab-playground-data").textContent);
  const params = new URLSearchParams(location.search);
  const LANG = params.get("lang") === "zh" ? "zh" : "en";
  const STRINGS = DATA.strings[LANG] || {};
  function t(message, values) {
    const text = Object.prototype.hasOwnProperty.call(STRINGS, message) ? STRINGS[message] : message;
    return values ? text.replace(/\{(\w+)\}/g, (w, k) => (k in values ? String(values[k]) : w)) : text;
  }
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "cls") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v === true) e.setAttribute(k, "");
      else if (v !== false && v !== null && v !== undefined) e.setAttribute(k, v);
    }
    e.append(...children.filter((c) => c !== null && c !== undefined));
    return e;
  }
  const field = (label, input, help) => el("label", { cls: "pg-field" }, el("span", {}, label), input,
    help ? el("small", { cls: "pg-help" }, help) : null);

  // ------------------------------------------------------------------ word ids (preview)
  // kvlab/playground/scenario.py::word_ids: crc32 of each word's UTF-8 bytes mod VOCAB_SIZE;
  // each CJK ideograph or kana is a word by itself.
  const CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff";
  const WORD = new RegExp(`[${CJK}]|[^\\s${CJK}]+`, "gu");
  const CRC = new Uint32Array(256).map((_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c;
  });
  function crc32(bytes) {
    let c = 0xffffffff;
    for (const b of bytes) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  }
  const wordIds = (text) => (text.match(WORD) || []).map((w) => crc32(new TextEncoder().encode(w)) % DATA.vocab_size);
  function idCount(text) {
    let n = 0;
    for (const piece of text.split(/[\s,]+/).filter(Boolean)) {
      const m = /^([+-]?\d+)\.\.([+-]?\d+)$/.exec(piece);
      n += m ? Math.max(Number(m[2]) - Number(m[1]) + 1, 0) : 1;
    }
    return n;
  }

  // ------------------------------------------------------------------ scenario <-> URL
  function b64url(text) {
    let bin = "";
    for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function unb64url(code) {
    const bin = atob(code.replace(/-/g, "+").replace(/_/g, "/"));
    return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  }
  function topLocation() {  // the site's page when the playground sits in its iframe
    try { return window.top !== window && window.top.location.href ? window.top.location : location; }
    catch (e) { return location; }
  }
  function shareUrl(scenario) {
    const where = topLocation(), query = new URLSearchParams(where.search);
    query.delete("preset");
    if (where === location && LANG === "zh") query.set("lang", "zh");
    const search = query.toString() ? `?${query}` : "";
    return `${where.origin === "null" ? "file://" : where.origin}${where.pathname}${search}#s=${b64url(JSON.stringify(scenario))}`;
  }
  function initialScenario() {
    const hash = new URLSearchParams(topLocation().hash.slice(1) || location.hash.slice(1));
    if (hash.get("s")) {
      try { return { scenario: JSON.parse(unb64url(hash.get("s"))), preset: "" }; }
      catch (e) { return { scenario: DATA.presets[DATA.default_preset].scenario, preset: "", error: t("The link's scenario could not be read; the default scenario is shown.") }; }
    }
    const name = params.get("preset") || new URLSearchParams(topLocation().search).get("preset") || DATA.default_preset;
    const preset = DATA.presets[name] ? name : DATA.default_preset;
    return { scenario: DATA.presets[preset].scenario, preset,
      error: preset === name ? null : t("There is no preset {name}; the default scenario is shown.", { name }) };
  }

  // ------------------------------------------------------------------ the editor
  const D = DATA.defaults;
  const ui = {};
  const num = (value) => el("input", { type: "number", value: String(value), cls: "pg-num" });
  function intOrRaw(input) {
    const v = input.value.trim();
    return /^[+-]?\d+$/.test(v) ? Number(v) : v;
  }
  function requestRow(r) {
    const cells = {
      id: el("input", { value: r.id ?? "", cls: "pg-id", "aria-label": t("request id") }),
      prompt: el("textarea", { rows: "2", cls: "pg-prompt", "aria-label": t("prompt") }),
      output: el("input", { value: Array.isArray(r.output) ? r.output.join(" ") : (r.output ?? ""), cls: "pg-output",
        "aria-label": t("output tokens") }),
      arrival: el("input", { type: "number", value: String(r.arrival ?? 0), min: "0", cls: "pg-small", "aria-label": t("arrival step") }),
      max_tokens: el("input", { type: "number", value: String(r.max_tokens ?? 4), min: "1", cls: "pg-small", "aria-label": "max_tokens" }),
    };
    cells.prompt.value = Array.isArray(r.prompt) ? r.prompt.join(" ") : (r.prompt ?? "");
    const preview = el("small", { cls: "pg-help pg-preview" });
    const update = () => {
      const words = ui.text.value === "words";
      const ids = words ? wordIds(cells.prompt.value) : null;
      const n = words ? ids.length : idCount(cells.prompt.value);
      preview.textContent = `${(n === 1 ? t("{n} token", { n }) : t("{n} tokens", { n }))}${words && n ? `: ${ids.slice(0, 24).join(" ")}${n > 24 ? " …" : ""}` : ""}`;
    };
    cells.prompt.addEventListener("input", update);
    const row = el("tr", { cls: "pg-request" },
      el("td", {}, cells.id), el("td", {}, cells.prompt, preview), el("td", {}, cells.output),
      el("td", { cls: "pg-sched" }, cells.arrival), el("td", { cls: "pg-sched" }, cells.max_tokens),
      el("td", {}, el("button", { type: "button", cls: "pg-btn pg-remove", title: t("remove this request"),
        onclick: () => { row.remove(); } }, "✕")));
    row.cells_ = cells; row.update_ = update;
    return row;
  }
  function designOf(layers) {
    if (layers.length === 1 && layers[0] === "full") return "full";
    if (layers.length === 1) return "window";
    return "hybrid";
  }
  function buildEditor(root) {
    ui.preset = el("select", { cls: "pg-select", "aria-label": t("preset") },
      ...Object.entries(DATA.presets).map(([name, p]) => el("option", { value: name }, p.title[LANG] || p.title.en)));
    ui.presetText = el("p", { cls: "pg-help pg-preset-text" });
    ui.blocks = num(D.num_gpu_blocks); ui.blockSize = num(D.block_size); ui.maxLen = num(D.max_model_len);
    ui.design = el("select", { cls: "pg-select" }, el("option", { value: "full" }, t("full attention")),
      el("option", { value: "window" }, t("sliding window")), el("option", { value: "hybrid" }, t("hybrid: full + sliding window")));
    ui.window = num(8); ui.groups = el("input", { value: "full, 8", cls: "pg-groups" });
    ui.caching = el("input", { type: "checkbox" });
    ui.hash = el("select", { cls: "pg-select" }, ...DATA.hash_names.map((h) => el("option", { value: h }, h)));
    ui.text = el("select", { cls: "pg-select" }, el("option", { value: "ids" }, t("token ids")),
      el("option", { value: "words" }, t("words")));
    ui.rows = el("tbody");
    ui.driver = el("select", { cls: "pg-select" },
      el("option", { value: "scheduler" }, t("the scheduler (continuous batching)")),
      el("option", { value: "calls" }, t("KVCacheManager calls (as in the notebooks)")));
    ui.seqs = num(D.max_num_seqs); ui.budget = num(D.max_num_batched_tokens);
    ui.reserve = el("input", { type: "checkbox" }); ui.chunked = el("input", { type: "checkbox" });
    ui.calls = el("textarea", { rows: "7", cls: "pg-calls", spellcheck: "false", "aria-label": t("calls, one per line") });
    ui.predict = Object.fromEntries(DATA.predict_kinds.map((k) => [k, el("input", { type: "checkbox", value: k })]));
    const windowField = field(t("window (tokens)"), ui.window), groupsField = field(t("groups, in order"), ui.groups,
      t("per KV cache group: full, or a window in tokens; e.g. full, 8, 12"));
    const showDesign = () => { windowField.hidden = ui.design.value !== "window"; groupsField.hidden = ui.design.value !== "hybrid"; };
    ui.design.addEventListener("change", showDesign);
    const schedBox = el("fieldset", { cls: "pg-box" }, el("legend", {}, t("Preemption pressure")),
      field("max_num_seqs", ui.seqs), field(t("token budget per step (max_num_batched_tokens)"), ui.budget),
      field(t("reserve the whole prompt on admission (scheduler_reserve_full_isl)"), ui.reserve),
      field(t("chunked prefill (enable_chunked_prefill)"), ui.chunked),
      el("small", { cls: "pg-help" }, t("A smaller pool, budget or reservation makes requests wait and running ones get preempted.")));
    const callsBox = el("fieldset", { cls: "pg-box" }, el("legend", {}, t("Calls, one per line")), ui.calls,
      el("small", { cls: "pg-help" }, t("admit R · prefill R · decode R [N] · lookup R · free R · evict BLOCK_ID ... · reset")));
    const showDriver = () => {
      const sched = ui.driver.value === "scheduler";
      schedBox.hidden = !sched; callsBox.hidden = sched;
      root.querySelectorAll(".pg-sched").forEach((c) => { c.hidden = !sched; });
    };
    ui.driver.addEventListener("change", showDriver);
    ui.text.addEventListener("change", () => ui.rows.querySelectorAll("tr").forEach((r) => r.update_()));
    ui.run = el("button", { type: "button", cls: "pg-btn pg-run", disabled: true, onclick: () => run() }, `▶ ${t("Run")}`);
    ui.share = el("button", { type: "button", cls: "pg-btn", onclick: share }, t("Share"));
    ui.link = el("input", { cls: "pg-link", readonly: true, "aria-label": t("share link") });
    ui.link.hidden = true;
    const table = el("table", { cls: "pg-requests" }, el("thead", {}, el("tr", {},
      el("th", {}, t("request id")), el("th", {}, t("prompt")), el("th", {}, t("output tokens")),
      el("th", { cls: "pg-sched" }, t("arrival step")), el("th", { cls: "pg-sched" }, "max_tokens"), el("th", {}))), ui.rows);
    root.append(
      el("div", { cls: "pg-row" }, field(t("preset"), ui.preset), el("button", { type: "button", cls: "pg-btn",
        onclick: () => { fill(DATA.presets[ui.preset.value].scenario, ui.preset.value); } }, t("load preset"))),
      ui.presetText,
      el("div", { cls: "pg-grid" },
        el("fieldset", { cls: "pg-box" }, el("legend", {}, t("Block pool")), field("num_gpu_blocks", ui.blocks),
          field("block_size", ui.blockSize), field("max_model_len", ui.maxLen)),
        el("fieldset", { cls: "pg-box" }, el("legend", {}, t("Cache design")), field(t("attention"), ui.design),
          windowField, groupsField, field(t("prefix caching (enable_caching)"), ui.caching), field(t("hash function"), ui.hash))),
      el("fieldset", { cls: "pg-box" }, el("legend", {}, t("Requests")),
        el("div", { cls: "pg-row" }, field(t("prompts are written as"), ui.text),
          el("button", { type: "button", cls: "pg-btn", onclick: () => { ui.rows.append(requestRow({ id: nextId() })); showDriver(); } }, t("add a request"))),
        table,
        el("small", { cls: "pg-help" }, t("Token ids: integers separated by spaces or commas; a..b is the range a to b. Words: each word becomes the id crc32(word) mod 49152; a Chinese character is a word by itself. Past its output tokens a request generates token 7."))),
      el("div", { cls: "pg-grid" }, el("fieldset", { cls: "pg-box" }, el("legend", {}, t("Driver")), ui.driver), schedBox, callsBox),
      el("div", { cls: "pg-row" }, el("span", {}, t("Predict mode asks before:")),
        ...Object.entries(ui.predict).map(([k, box]) => el("label", { cls: "pg-check" }, box, k))),
      el("div", { cls: "pg-row" }, ui.run, ui.share, ui.link));
    ui.showDesign = showDesign; ui.showDriver = showDriver;
  }
  function nextId() {
    const taken = new Set([...ui.rows.querySelectorAll(".pg-id")].map((i) => i.value));
    let k = 0;
    while (taken.has(`r${k}`)) k++;
    return `r${k}`;
  }
  function fill(s, presetName) {
    const v = { ...D, ...s };
    ui.blocks.value = v.num_gpu_blocks; ui.blockSize.value = v.block_size; ui.maxLen.value = v.max_model_len;
    const layers = Array.isArray(v.layers) && v.layers.length ? v.layers : ["full"];
    ui.design.value = designOf(layers);
    if (ui.design.value === "window") ui.window.value = layers[0];
    ui.groups.value = layers.join(", ");
    ui.caching.checked = v.enable_caching !== false; ui.hash.value = v.hash;
    ui.text.value = v.text === "words" ? "words" : "ids";
    ui.rows.replaceChildren(...(v.requests || []).map(requestRow));
    ui.rows.querySelectorAll("tr").forEach((r) => r.update_());
    ui.driver.value = v.driver === "calls" ? "calls" : "scheduler";
    ui.seqs.value = v.max_num_seqs; ui.budget.value = v.max_num_batched_tokens;
    ui.reserve.checked = v.scheduler_reserve_full_isl !== false; ui.chunked.checked = v.enable_chunked_prefill !== false;
    ui.calls.value = Array.isArray(v.calls) ? v.calls.join("\n") : (v.calls || "");
    for (const [k, box] of Object.entries(ui.predict)) box.checked = (v.predict || []).includes(k);
    const preset = DATA.presets[presetName];
    if (preset) ui.preset.value = presetName;
    ui.presetText.textContent = preset ? (preset.description[LANG] || preset.description.en) : "";
    ui.showDesign(); ui.showDriver();
  }
  function scenario() {
    let layers = ["full"];
    if (ui.design.value === "window") layers = [intOrRaw(ui.window)];
    if (ui.design.value === "hybrid") {
      layers = ui.groups.value.split(/[\s,]+/).filter(Boolean).map((x) => (/^\d+$/.test(x) ? Number(x) : x));
    }
    const driver = ui.driver.value;
    const requests = [...ui.rows.querySelectorAll("tr")].map((row) => {
      const c = row.cells_, r = { id: c.id.value.trim(), prompt: c.prompt.value, output: c.output.value,
        max_tokens: intOrRaw(c.max_tokens) };
      if (driver === "scheduler") r.arrival = intOrRaw(c.arrival);
      return r;
    });
    const s = { num_gpu_blocks: intOrRaw(ui.blocks), block_size: intOrRaw(ui.blockSize), max_model_len: intOrRaw(ui.maxLen),
      layers, enable_caching: ui.caching.checked, hash: ui.hash.value, text: ui.text.value, requests, driver,
      predict: Object.entries(ui.predict).filter(([, b]) => b.checked).map(([k]) => k) };
    if (driver === "calls") s.calls = ui.calls.value;
    else Object.assign(s, { max_num_seqs: intOrRaw(ui.seqs), max_num_batched_tokens: intOrRaw(ui.budget),
      scheduler_reserve_full_isl: ui.reserve.checked, enable_chunked_prefill: ui.chunked.checked });
    return s;
  }

  // ------------------------------------------------------------------ Python
  const status = el("div", { cls: "pg-status", role: "status", "aria-live": "polite" });
  const bar = el("progress", { max: "4", value: "0", cls: "pg-progress" });
  const errorBox = el("div", { cls: "pg-error", role: "alert" });
  const notes = el("ul", { cls: "pg-notes" });
  const summary = el("p", { cls: "pg-summary" });
  const playerBox = el("div", { id: "kvlab-player", cls: "pg-player" });
  errorBox.hidden = true;
  const STAGES = [
    () => t("Loading the Python interpreter (Pyodide, about 13 MB)…"),
    () => t("Unpacking kvlab.core and cbor2…"),
    () => t("Importing kvlab.core…"),
    () => t("Running the scenario…"),
  ];
  const t0 = performance.now(), timings = {};  // ms since the script started, per stage
  function stage(k) { timings[`stage${k}`] = performance.now() - t0; bar.value = k; bar.hidden = false; status.textContent = STAGES[k](); }
  async function startPython() {
    if (location.protocol === "file:") {
      throw new Error(t("The playground runs Python in your browser, which browsers allow only for pages served over http(s). Serve this folder (kvlab playground --serve, or python3 -m http.server) and open it from there."));
    }
    stage(0);
    // NOTE: kvlab's zip downloads while Pyodide starts.
    const zip = fetch(new URL("kvlab-playground.zip", location.href)).then((r) => {
      if (!r.ok) throw new Error(`kvlab-playground.zip: HTTP ${r.status}`);
      return r.arrayBuffer();
    });
    const py = await loadPyodide({ indexURL: new URL("pyodide/", location.href).href });
    stage(1);
    py.unpackArchive(await zip, "zip", { extractDir: "/lib/kvlab-playground" });
    stage(2);
    py.runPython("import sys; sys.path.insert(0, '/lib/kvlab-playground'); import kvlab.playground.browser");
    return py.pyimport("kvlab.playground.browser").run_json;
  }
  let runJson = null, cleanup = null, firstRunMs = null;
  const ready = startPython().then((fn) => { runJson = fn; ui.run.disabled = false; return fn; }, (err) => {
    bar.hidden = true;
    status.textContent = "";
    showError(t("Python could not start in this page."), String(err && err.message || err));
    throw err;
  });
  function showError(title, message, detail) {
    errorBox.replaceChildren(el("b", {}, title), el("pre", { cls: "pg-message" }, message),
      detail ? el("details", {}, el("summary", {}, t("details (Python traceback)")), el("pre", {}, detail)) : null);
    errorBox.hidden = false;
  }
  class StaticModel {  // the widget model stand-in (kvlab/viz/export.py's)
    constructor(state) { this.state = state; this.handlers = {}; }
    get(k) { return this.state[k]; }
    set(k, v) { const old = this.state[k]; this.state[k] = v; if (old !== v) (this.handlers[`change:${k}`] || []).slice().forEach((f) => f()); }
    on(ev, f) { (this.handlers[ev] = this.handlers[ev] || []).push(f); }
    off(ev, f) { this.handlers[ev] = (this.handlers[ev] || []).filter((g) => g !== f); }
    save_changes() {} send() {}
  }
  async function run(given) {
    const s = given || scenario();
    const fn = await ready;
    stage(3);
    errorBox.hidden = true; notes.replaceChildren(); summary.textContent = "";
    await new Promise((r) => setTimeout(r, 0));  // let the status paint before Python runs
    const started = performance.now();
    const answer = JSON.parse(fn(JSON.stringify(s), LANG));
    const ms = performance.now() - started;
    api.last = { scenario: s, answer };
    bar.hidden = true;
    if (cleanup) { cleanup(); cleanup = null; }
    playerBox.replaceChildren();
    if (!answer.ok) {
      showError(t("This scenario cannot run:"), answer.error, answer.detail);
      status.textContent = t("Ready. Fix the scenario and run again.");
      return answer;
    }
    const state = { ...answer.player, labels: DATA.player_labels[LANG] || {} };
    cleanup = window.kvlabPlayer.render({ model: new StaticModel(state), el: playerBox });
    notes.replaceChildren(...[linkWarning, ...answer.notes].filter(Boolean).map((n) => el("li", {}, n)));
    linkWarning = null;  // said once, under the run it concerns
    summary.textContent = t("{events} events, {steps} scheduler steps, run in {ms} ms.",
      { events: answer.num_events.toLocaleString("en-US"), steps: answer.num_steps, ms: Math.round(ms) });
    if (firstRunMs === null) { firstRunMs = performance.now() - t0; timings.first_run = firstRunMs; timings.run = ms; }
    status.textContent = t("Ready (first run {s} s after opening the page).", { s: (firstRunMs / 1000).toFixed(1) });
    return answer;
  }
  async function share() {
    const url = shareUrl(scenario());
    ui.link.value = url; ui.link.hidden = false; ui.link.select();
    try { await navigator.clipboard.writeText(url); status.textContent = t("Link copied: it opens this scenario and runs it."); }
    catch (e) { status.textContent = t("Copy the link above: it opens this scenario and runs it."); }
    return url;
  }

  // ------------------------------------------------------------------ the page
  const root = document.getElementById("kvlab-playground");
  const editor = el("div", { cls: "pg-editor" });
  const other = LANG === "zh" ? "en" : "zh";
  const langLink = el("a", { href: "#", cls: "pg-lang", onclick: (e) => {
    e.preventDefault();
    const q = new URLSearchParams(location.search);
    q.set("lang", other);
    location.href = `${location.pathname}?${q}#s=${b64url(JSON.stringify(scenario()))}`;
  } }, other === "zh" ? "中文" : "English");
  document.documentElement.lang = LANG === "zh" ? "zh-Hans" : "en";
  document.title = t("kvlab playground");
  root.append(el("header", { cls: "pg-header" }, el("h1", {}, t("kvlab playground")), langLink),
    el("p", { cls: "pg-intro" }, t("Edit a scenario and run it: the exact kvlab.core that makes vLLM 0.22.1's KV-cache decisions runs here, in your browser (Python through Pyodide, nothing is sent anywhere). The trace player below replays every decision.")),
    el("div", { cls: "pg-statusbar" }, bar, status), editor, errorBox, summary, notes, playerBox);
  buildEditor(editor);
  const first = initialScenario();
  fill(first.scenario, first.preset);
  let linkWarning = first.error || null;
  if (first.error) showError(t("This link needs a look:"), first.error);
  if (window.parent !== window && typeof ResizeObserver !== "undefined") {  // the site's frame grows with the page
    new ResizeObserver(() => window.parent.postMessage({ kvlabPlaygroundHeight: document.documentElement.scrollHeight }, "*"))
      .observe(document.body);
  }
  const api = { ready, run, scenario, fill, share, wordIds, last: null, lang: LANG, timings };
  window.kvlabPlayground = api;
  ready.then(() => run(), () => {});
})();
