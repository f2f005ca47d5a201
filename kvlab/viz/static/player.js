// kvlab trace player: an anywidget view (JupyterLab, and static pages through a small model
// shim in kvlab/viz/export.py). Stepping and drawing happen here, in the browser, so the player
// works without a kernel. Synced state (kvlab/viz/widgets.py::TracePlayer): trace_data, index,
// playing, speed, play_mode, views, requests, jump_kind, max_queue, checkpoint_interval, quiz.
// Views: pool grid, free queue, block table, token positions → slots, allocate_slots anatomy,
// hybrid fixed point, hash chains, events (views.js), all computed here from the trace.
// Predict mode (`quiz`, from kvlab/viz/predict.py): a forward step that would show a decision
// stops before it and asks (predict.js decides where); the answer moves on to the decision.

import { KIND, NAV, Replayer, describe, loadTrace, vllmSource, vllmSourceUrl } from "./replay.js";
import { Quiz } from "./predict.js";
import { tr, useLabels } from "./i18n.js";
import {
  blockTitle, drawAllocateSlots, drawBlockTable, drawEvents, drawFixedPoint, drawFreeQueue, drawHashChain, drawPool,
  drawSlotMapping, legend,
} from "./views.js";

const LOADED = new WeakMap();  // trace_data object -> { T, R, firstSeen }

function loaded(model) {
  const data = model.get("trace_data");
  let entry = LOADED.get(data);
  if (!entry) {
    const t0 = performance.now(), T = loadTrace(data);
    const firstSeen = new Int32Array(T.requests.length).fill(-1);
    for (let i = 0; i < T.n; i++) {
      const r = T.c.request[i];
      if (r >= 0 && firstSeen[r] < 0) firstSeen[r] = i;
    }
    const t1 = performance.now(), R = new Replayer(T, model.get("checkpoint_interval"));
    // NOTE: load timings (ms) for benchmarks: decoding, and the replay that builds checkpoints.
    entry = { T, R, firstSeen, timings: { decode_ms: t1 - t0, checkpoints_ms: performance.now() - t1 } };
    LOADED.set(data, entry);
  }
  return entry;
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "cls") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

// Requests whose hash chains are drawn: the `requests` trait, else those holding blocks now,
// else the last few seen up to the cursor.
function chainRequests(model, T, s, firstSeen, index) {
  const wanted = model.get("requests") || [];
  if (wanted.length) return wanted.map((r) => T.requests.indexOf(r)).filter((r) => r >= 0);
  const holding = new Set();
  s.req.forEach((m) => { for (const r of m.keys()) holding.add(r); });
  if (holding.size) return [...holding].sort((a, b) => a - b).slice(0, 8);
  const seen = [];
  firstSeen.forEach((i, r) => { if (i >= 0 && i <= index) seen.push(r); });
  return seen.slice(-4);
}

function toolbar(act) {
  const b = (label, title, move) => el("button", { cls: "kvlab-btn", title, "data-move": move, onclick: () => act(move) }, label);
  return [
    b("|◀", tr("to the initial state (Home)"), "start"),
    b("◀◀", tr("back over a call (Shift+←)"), "back_over"),
    b("◀", tr("one event back (←)"), "back"),
    b(`▶ ${tr("play")}`, tr("play / pause (Space)"), "play"),
    b("▶", tr("step into: one event (→)"), "into"),
    b("▶▶", tr("step over a call (Shift+→)"), "over"),
    b("⤴", tr("step out of the current call (↑)"), "out"),
    b("▶|", tr("to the last event (End)"), "end"),
  ];
}

// How many events of each kind the trace holds (indexed by EventKind value).
function kindCounts(T) {
  const counts = new Int32Array(T.kinds.length);
  for (let i = 0; i < T.n; i++) counts[T.c.kind[i]]++;
  return counts;
}
const fmt = (x) => x.toLocaleString("en-US");
const FORWARD = new Set(["into", "over", "out", "next_kind"]);  // moves that ask before a decision

function render({ model, el: root }) {
  // NOTE: labels are module state shared by the players of a page; each entry point that
  // writes text sets this player's own first (pages may mix languages).
  const labels = () => useLabels(model.get("labels"));
  labels();
  const { T, R, firstSeen, timings } = loaded(model);
  let timer = null, lastDrawn = null, frame = null, poolWidth = 0, shownOrder = null;
  const caption = el("div", { cls: "kvlab-caption" });
  const source = el("div", { cls: "kvlab-source kvlab-dim" });
  const scrubber = el("input", { type: "range", min: "-1", max: String(T.n - 1), step: "1", cls: "kvlab-scrubber",
    "aria-label": tr("event index") });
  // "jump to" offers only the kinds this trace holds (with their counts), else says "none".
  const counts = kindCounts(T), present = T.kinds.map((k, v) => ({ k, n: counts[v] })).filter((x) => x.n > 0);
  const kindSelect = el("select", { cls: "kvlab-select", "aria-label": tr("event kind to jump to") },
    ...(present.length ? present.map(({ k, n }) => el("option", { value: k }, `${k} (${fmt(n)})`))
      : [el("option", { value: "" }, tr("none"))]));
  kindSelect.disabled = present.length === 0;
  const speed = el("select", { cls: "kvlab-select", "aria-label": tr("events per second") },
    ...[1, 2, 4, 8, 16, 60, 240].map((v) => el("option", { value: String(v) }, `${v}/s`)));
  const mode = el("select", { cls: "kvlab-select", "aria-label": tr("what play steps") },
    el("option", { value: "over" }, tr("play steps over calls")), el("option", { value: "into" }, tr("play steps into calls")));
  const panels = Object.fromEntries(["pool", "free_queue", "block_table", "slot_mapping", "allocate_slots",
    "fixed_point", "hash_chain", "events"].map((name) => [name, el("div", { cls: "kvlab-panel", "data-view": name })]));
  for (const name of ["hash_chain", "slot_mapping", "allocate_slots"]) panels[name].classList.add("kvlab-scroll");
  const canvas = el("canvas", { cls: "kvlab-pool" });
  const poolTitle = el("div", { cls: "kvlab-title" });
  panels.pool.append(poolTitle, canvas, legend(T.numGroups, T.data.config));
  let grid = { cols: 1, cell: 8 };
  let quiz = new Quiz(model.get("quiz")), asking = null, revealed = null, choiceButtons = [];
  const quizBox = el("div", { cls: "kvlab-quiz", role: "group", "aria-label": tr("predict, then reveal") });
  const feedback = el("div", { cls: "kvlab-quiz-feedback", "aria-live": "polite" });
  const score = el("span", { cls: "kvlab-score" });
  const resetQuiz = el("button", { cls: "kvlab-btn", title: tr("ask every question again"),
    onclick: () => { quiz.reset(); asking = revealed = null; drawQuiz(); } }, `↺ ${tr("reset quiz")}`);
  quizBox.hidden = true;

  function go(j) {
    if (j === model.get("index")) return;
    model.set("index", j);
    model.save_changes();
    draw();
  }
  function setPlaying(on) {
    if (on && asking) { nudge(); on = false; }
    if (model.get("playing") !== on) { model.set("playing", on); model.save_changes(); }
    clearInterval(timer); timer = null;
    labels();
    play.textContent = on ? `❚❚ ${tr("pause")}` : `▶ ${tr("play")}`;
    if (on) timer = setInterval(() => {
      const i = model.get("index"), j = NAV[model.get("play_mode")](T, i);
      if (j === i) setPlaying(false); else if (forward(i, j)) setPlaying(false);
    }, 1000 / Math.max(model.get("speed"), 0.1));
  }
  // A forward move: stop before an unanswered decision and ask it (true), else move.
  function forward(i, j) {
    const stop = quiz.intercept(i, j);
    if (!stop) { go(j); return false; }
    asking = { point: stop.point, at: stop.stop };
    revealed = null;
    if (stop.stop !== i) go(stop.stop); else draw(true);  // events ahead hidden while asking
    return true;
  }
  function act(move) {
    const i = model.get("index");
    const ahead = move === "play" ? !model.get("playing") : FORWARD.has(move);
    if (asking && ahead) return nudge();  // answer first; backward moves and seeks are free
    if (move === "play") return setPlaying(!model.get("playing"));
    if (move === "start") return go(-1);
    if (move === "end") return go(T.n - 1);
    if (move === "next_kind" || move === "prev_kind") {
      if (!kindSelect.value) return;  // the trace holds no events
      model.set("jump_kind", kindSelect.value); model.save_changes();
      const j = NAV[move](T, i, KIND[kindSelect.value]);
      return move === "next_kind" ? forward(i, j) : go(j);
    }
    const j = NAV[move](T, i);
    if (FORWARD.has(move)) forward(i, j); else go(j);
  }
  // ---------------------------------------------------------------- predict mode
  function pick(k) {
    labels();
    const point = asking.point, r = quiz.pick(point, k), button = choiceButtons[k];
    if (!r.right) {
      button.classList.add("kvlab-wrong"); button.disabled = true;
      feedback.className = "kvlab-quiz-feedback kvlab-quiz-wrong";
      feedback.textContent = tr("✗ Not {choice}. Try again, or show the answer.", { choice: point.choices[k] });
      drawScore();
      wrap.focus({ preventScroll: true });  // the disabled button lost the focus: keys still work
      return;
    }
    reveal(r.first ? tr("✓ Right") : tr("✓ Right (not at the first try)"));
  }
  function reveal(verdict) {
    const point = asking.point;
    asking = null;
    revealed = { point, verdict };
    go(point.reveal);
    wrap.focus({ preventScroll: true });  // the clicked button is gone: keys still step
  }
  function nudge() {
    labels();
    feedback.className = "kvlab-quiz-feedback kvlab-quiz-wrong";
    feedback.textContent = tr("Pick an answer first (keys 1–{n}), show the answer, or step back (←).", { n: asking.point.choices.length });
  }
  // The question shows while the cursor stays where it was asked, the answer while it stays on
  // the decision; any other move puts them away (an unanswered question is asked again later).
  function drawQuiz() {
    labels();
    const i = model.get("index");
    if (asking && asking.at !== i) asking = null;
    if (revealed && revealed.point.reveal !== i) revealed = null;
    const shown = asking || revealed;
    quizBox.hidden = !shown;
    drawScore();
    if (!shown) return;
    const point = shown.point, a = quiz.answers.get(point.reveal) || { picks: [] };
    choiceButtons = point.choices.map((label, k) => el("button", { cls: "kvlab-btn kvlab-choice", "data-choice": String(k),
      onclick: () => asking && pick(k) }, `${k + 1}. ${label}`));
    a.picks.forEach((k) => { if (k !== point.answer) { choiceButtons[k].classList.add("kvlab-wrong"); choiceButtons[k].disabled = true; } });
    feedback.className = "kvlab-quiz-feedback"; feedback.textContent = "";
    const giveUp = el("button", { cls: "kvlab-btn kvlab-show-answer", onclick: () => { if (asking) { quiz.showAnswer(asking.point); reveal(tr("The answer")); } } },
      tr("show answer"));
    if (revealed) {
      choiceButtons.forEach((b) => { b.disabled = true; });
      choiceButtons[point.answer].classList.add("kvlab-right");
      feedback.className = "kvlab-quiz-feedback kvlab-quiz-reveal";
      feedback.textContent = tr("{verdict}: {choice}. {explanation}",
        { verdict: revealed.verdict, choice: point.choices[point.answer], explanation: point.explanation });
    }
    quizBox.replaceChildren(el("div", { cls: "kvlab-quiz-question" }, el("b", {}, `${revealed ? tr("Revealed:") : tr("Predict:")} `), point.question),
      el("div", { cls: "kvlab-toolbar" }, ...choiceButtons, ...(revealed ? [] : [giveUp])), feedback);
  }
  function drawScore() {
    const { right, answered, total } = quiz.score();
    score.textContent = tr("predict: {right} right of {answered} answered · {left} to go", { right, answered, left: total - answered });
  }
  const buttons = toolbar(act), play = buttons[3];

  function draw(force = false) {
    const i = model.get("index");
    if (i === lastDrawn && !force) return;
    lastDrawn = i;
    labels();
    const s = R.stateAt(i), views = new Set(model.get("views"));
    caption.replaceChildren(el("b", {}, tr("event {i} of {n}", { i: fmt(i), n: fmt(T.n) })),
      ` · ${tr("step {step}", { step: i >= 0 ? T.step[i] : 0 })} · `,
      el("code", {}, describe(T, i)));
    const mirrored = vllmSource(T, i);  // the vLLM function this event mirrors
    source.replaceChildren(...(mirrored ? [`${tr("mirrors")} `, el("a", { href: vllmSourceUrl(mirrored), target: "_blank", rel: "noopener",
      title: tr("this event's vLLM 0.22.1 source on GitHub") }, mirrored)] : []));
    scrubber.value = String(i);
    for (const [name, box] of Object.entries(panels)) box.hidden = !views.has(name);
    const order = model.get("views").join();
    if (order !== shownOrder) {  // panels stand in the order of `views`
      shownOrder = order;
      for (const name of model.get("views")) if (panels[name]) wrap.append(panels[name]);
    }
    if (views.has("pool")) {
      poolTitle.textContent = tr("BlockPool · {n} blocks · {free} in the free queue", { n: T.numBlocks, free: s.numFree });
      // NOTE: the width comes from the ResizeObserver below; reading clientWidth here would
      // force a layout on every step. 880 px until the page has laid the player out.
      grid = drawPool(canvas, T, s, poolWidth || 880);
    }
    if (views.has("free_queue")) drawFreeQueue(panels.free_queue, T, s, model.get("max_queue"));
    if (views.has("block_table")) drawBlockTable(panels.block_table, T, s);
    if (views.has("slot_mapping")) drawSlotMapping(panels.slot_mapping, T, s, i);
    if (views.has("allocate_slots")) drawAllocateSlots(panels.allocate_slots, T, i, Math.max(240, (poolWidth || 880) - 8));
    if (views.has("fixed_point")) drawFixedPoint(panels.fixed_point, T, i);
    if (views.has("hash_chain")) drawHashChain(panels.hash_chain, T, s, chainRequests(model, T, s, firstSeen, i));
    drawQuiz();
    // NOTE: while a question is asked the events list stops at the cursor: the next event is the answer.
    if (views.has("events")) drawEvents(panels.events, T, i, describe, 6, asking ? 0 : 6);
  }

  canvas.addEventListener("mousemove", (e) => {
    labels();
    const r = canvas.getBoundingClientRect();
    const b = Math.floor((e.clientY - r.top) / grid.cell) * grid.cols + Math.floor((e.clientX - r.left) / grid.cell);
    if (b >= 0 && b < T.numBlocks) canvas.title = blockTitle(T, R.stateAt(model.get("index")), b);
  });
  scrubber.addEventListener("input", () => {
    cancelAnimationFrame(frame);
    frame = requestAnimationFrame(() => go(Number(scrubber.value)));
  });
  speed.addEventListener("change", () => { model.set("speed", Number(speed.value)); model.save_changes(); if (model.get("playing")) setPlaying(true); });
  mode.addEventListener("change", () => { model.set("play_mode", mode.value); model.save_changes(); });
  const keys = { ArrowRight: "into", ArrowLeft: "back", ArrowUp: "out", Home: "start", End: "end", " ": "play" };
  const wrap = el("div", { cls: "kvlab-player", tabindex: "0" });
  wrap.addEventListener("keydown", (e) => {
    if (e.target.tagName === "SELECT" || e.target.tagName === "INPUT") return;  // their own keys
    const k = Number(e.key) - 1;  // keys 1..n pick a choice while a question is asked
    if (asking && Number.isInteger(k) && k >= 0 && k < asking.point.choices.length) {
      e.preventDefault();
      if (!choiceButtons[k].disabled) pick(k);
      return;
    }
    const move = e.shiftKey && e.key === "ArrowRight" ? "over" : e.shiftKey && e.key === "ArrowLeft" ? "back_over" : keys[e.key];
    if (move) { e.preventDefault(); act(move); }
  });
  const wanted = model.get("jump_kind") || "CALL_BEGIN";
  kindSelect.value = present.some((x) => x.k === wanted) ? wanted : present.length ? present[0].k : "";
  speed.value = String(model.get("speed")); mode.value = model.get("play_mode");
  wrap.append(
    el("div", { cls: "kvlab-toolbar" }, ...buttons, mode, speed),
    scrubber,
    el("div", { cls: "kvlab-toolbar" }, el("span", {}, `${tr("jump to")} `), kindSelect,
      el("button", { cls: "kvlab-btn", "data-move": "prev_kind", onclick: () => act("prev_kind") }, `◀ ${tr("previous")}`),
      el("button", { cls: "kvlab-btn", "data-move": "next_kind", onclick: () => act("next_kind") }, `${tr("next")} ▶`)),
    el("div", { cls: "kvlab-toolbar kvlab-quiz-bar", hidden: "" }, score, resetQuiz),
    caption, quizBox, source, ...Object.values(panels));
  const quizBar = wrap.querySelector(".kvlab-quiz-bar");
  const onQuiz = () => {
    quiz = new Quiz(model.get("quiz")); asking = revealed = null;
    quizBar.hidden = !(model.get("predict") || []).length; drawQuiz();
  };
  quizBar.hidden = !(model.get("predict") || []).length;
  root.replaceChildren(wrap);
  // Testing hook (browser tests, benchmarks): the decoded trace, the replayer, the moves.
  const hook = { T, R, model, act, draw, seek: go, timings: { ...timings }, state: () => R.stateAt(model.get("index")),
    quiz: () => quiz, asking: () => asking && asking.point };
  root.kvlabPlayer = hook;

  const redraw = () => draw(true);
  const onPlaying = () => setPlaying(model.get("playing"));
  const onIndex = () => draw();
  model.on("change:index", onIndex);
  model.on("change:playing", onPlaying);
  model.on("change:quiz", onQuiz); model.on("change:predict", onQuiz);
  for (const name of ["views", "requests", "max_queue"]) model.on(`change:${name}`, redraw);
  // A new language redraws everything: the player is built again in it.
  const onLabels = () => { cleanup(); cleanup = render({ model, el: root }); };
  model.on("change:labels", onLabels);
  const t0 = performance.now();
  draw(true);
  hook.timings.first_draw_ms = performance.now() - t0;
  if (model.get("playing")) setPlaying(true);
  // Redraw the grid when the page gives the player another width (or first lays it out).
  const resize = typeof ResizeObserver === "undefined" ? null : new ResizeObserver((entries) => {
    const width = Math.floor(entries[entries.length - 1].contentRect.width);
    if (width > 0 && width !== poolWidth) { poolWidth = width; draw(true); }
  });
  resize?.observe(panels.pool);
  let cleanup = () => {
    clearInterval(timer); resize?.disconnect();
    model.off("change:index", onIndex); model.off("change:playing", onPlaying); model.off("change:quiz", onQuiz); model.off("change:predict", onQuiz);
    for (const name of ["views", "requests", "max_queue"]) model.off(`change:${name}`, redraw);
    model.off("change:labels", onLabels);
  };
  return () => cleanup();
}

export default { render };
