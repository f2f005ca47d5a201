// Node test of kvlab/viz/static/predict.js, the player's predict mode: where a forward step
// stops to ask, that answered questions are never asked again (until reset), the score, and
// that each quiz point's right answer is what the JavaScript replay shows. Run by
// tests/viz/test_predict.py, which writes the fixture (encoded traces and their quiz_points)
// and sets KVLAB_PREDICT_FIXTURE to its path.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

const load = async (name) => import(new URL(`../../../kvlab/viz/static/${name}`, import.meta.url).href);
const replay = await load("replay.js");
const { Quiz } = await load("predict.js");
const fixture = JSON.parse(fs.readFileSync(process.env.KVLAB_PREDICT_FIXTURE, "utf8"));

// Walk the trace from -1 with `move`, answering every question (wrong first when `wrongFirst`
// says so), as the player does: a stop asks, the right pick moves to the reveal.
function walk(T, quiz, move, wrongFirst = () => false) {
  const asked = [];
  let i = -1;
  for (let guard = 0; guard < 4 * T.n + 8; guard++) {
    const j = replay.NAV[move](T, i);
    if (j === i) return { asked, end: i };
    const stop = quiz.intercept(i, j);
    if (!stop) { i = j; continue; }
    asked.push({ reveal: stop.point.reveal, stop: stop.stop, from: i });
    const p = stop.point;
    if (wrongFirst(p) && p.choices.length > 1) {
      const r = quiz.pick(p, (p.answer + 1) % p.choices.length);
      assert.deepEqual(r, { right: false, done: false, first: true });
      assert.equal(quiz.intercept(stop.stop, j)?.point, p, "an unanswered question is asked again");
    }
    assert.equal(quiz.pick(p, p.answer).right, true);
    i = p.reveal;
  }
  throw new Error("the walk did not end");
}

for (const c of fixture.cases) {
  const T = replay.loadTrace(c.trace);

  test(`${c.name}: each right answer is what the JavaScript replay shows`, () => {
    const R = new replay.Replayer(T, 16);
    const kinds = new Set();
    for (const p of c.quiz) {
      const truth = p.values[p.answer], s = R.stateAt(p.ask);
      kinds.add(p.kind);
      if (p.kind === "popleft") {
        assert.deepEqual(s.queue(truth.length).head, truth, `popleft at ${p.reveal}`);
        assert.deepEqual(Array.from(replay.payload(T, p.reveal)), truth);
      } else if (p.kind === "evict") {
        const popped = Array.from(replay.payload(T, p.ask));  // the POPLEFT_N before
        assert.equal(popped.find((b) => s.blockHash[b] >= 0), truth, `evict at ${p.reveal}`);
        assert.equal(T.c.a[p.reveal], truth);
      } else if (p.kind === "window") {
        const nulled = T.c.kind[p.reveal] === replay.KIND.REQ_BLOCKS_NULLED;
        assert.deepEqual(nulled ? Array.from(replay.payload(T, p.reveal)).sort((x, y) => x - y) : [], truth, `window at ${p.reveal}`);
        assert.equal(replay.findCall(T, p.reveal).name, "allocate_slots");
      } else if (p.kind === "fixed_point") {
        const call = replay.findCall(T, p.reveal);
        const row = replay.fixedPointRows(T, call).find((r) => r.seq === p.reveal);
        assert.equal(row.hit_length_out, truth, `fixed point at ${p.reveal}`);
      } else if (p.kind === "preempt") {
        const call = replay.findCall(T, p.reveal);
        assert.equal(call.name, "free");
        assert.equal(call.request, truth, `preempt at ${p.reveal}`);
      } else {
        const call = replay.findCall(T, p.reveal);
        assert.equal(call.name, "get_computed_blocks");
        assert.equal(call.result.num_new_computed_tokens, truth, `hit at ${p.reveal}`);
        assert.equal(call.begin - 1, p.ask);
      }
    }
    assert.ok(kinds.has("popleft") && (kinds.has("hit") || kinds.has("fixed_point")), [...kinds].join());
  });

  test(`${c.name}: stepping into asks every question once, in order, right before its decision`, () => {
    const quiz = new Quiz(c.quiz);
    const { asked, end } = walk(T, quiz, "into", (p) => p.reveal % 2 === 1);
    assert.equal(end, T.n - 1);
    assert.deepEqual(asked.map((a) => a.reveal), c.quiz.map((p) => p.reveal));
    for (const a of asked) assert.equal(a.stop, c.quiz.find((p) => p.reveal === a.reveal).ask);
    const wrong = c.quiz.filter((p) => p.reveal % 2 === 1 && p.choices.length > 1).length;
    assert.deepEqual(quiz.score(), { right: c.quiz.length - wrong, answered: c.quiz.length, total: c.quiz.length });
  });

  test(`${c.name}: stepping over calls asks the same questions, stopping inside the calls`, () => {
    const quiz = new Quiz(c.quiz);
    const { asked } = walk(T, quiz, "over");
    assert.deepEqual(asked.map((a) => a.reveal), c.quiz.map((p) => p.reveal));
    assert.ok(asked.every((a) => a.stop === c.quiz.find((p) => p.reveal === a.reveal).ask));
    assert.ok(asked.some((a) => T.c.depth[a.stop + 1] > 0 && a.from < a.stop), "no stop inside a call");
  });

  test(`${c.name}: answered questions are not asked again, backward or forward, until reset`, () => {
    const quiz = new Quiz(c.quiz);
    walk(T, quiz, "into");
    for (let i = T.n - 1; i > -1; i--) assert.equal(quiz.intercept(i, replay.NAV.back(T, i)), null);
    assert.deepEqual(walk(T, quiz, "into").asked, []);
    assert.deepEqual(walk(T, quiz, "over").asked, []);
    quiz.reset();
    assert.deepEqual(quiz.score(), { right: 0, answered: 0, total: c.quiz.length });
    assert.deepEqual(walk(T, quiz, "over").asked.map((a) => a.reveal), c.quiz.map((p) => p.reveal));
  });

  test(`${c.name}: a cursor inside a decision is asked only when a step would pass it`, () => {
    const quiz = new Quiz(c.quiz);
    const inside = c.quiz.filter((p) => p.reveal - p.ask >= 2);
    for (const p of inside) {
      assert.equal(quiz.intercept(p.ask + 1, p.reveal - 1), null);
      assert.deepEqual(quiz.intercept(p.ask + 1, p.reveal), { point: p, stop: p.ask + 1 });
      // landing on ask asks nothing yet, but the point whose reveal is this one's ask (the popleft
      // question before an evict question at get_new_blocks' POPLEFT_N; fixed-point turns, one's
      // reveal being the next one's ask)
      const before = quiz.intercept(p.ask - 1, p.ask);
      assert.ok(before === null || before.point.reveal === p.ask, p.reveal);
    }
    assert.ok(inside.length > 0 || !c.quiz.some((p) => p.kind === "hit" || p.kind === "preempt"));
    const p = c.quiz[0];
    quiz.showAnswer(p);
    assert.equal(quiz.done(p), true);
    assert.deepEqual(quiz.score(), { right: 0, answered: 1, total: c.quiz.length });
    assert.throws(() => quiz.pick(c.quiz[1], c.quiz[1].choices.length), RangeError);
  });
}

test("no points: the quiz never stops a step", () => {
  const quiz = new Quiz([]);
  assert.equal(quiz.intercept(-1, 100), null);
  assert.deepEqual(quiz.score(), { right: 0, answered: 0, total: 0 });
});
