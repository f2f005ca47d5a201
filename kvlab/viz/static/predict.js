// kvlab trace player, "predict, then reveal": where a forward move must stop to ask, the
// answers given and the score. No DOM and no imports here: Node runs it in tests.
//
// The quiz points come from Python (kvlab/viz/predict.py::quiz_points, the `quiz` state):
// { kind, ask, reveal, question, choices, values, answer, explanation }. A forward move that
// would leave point.ask (the state right before the decision) stops there and the player asks;
// once the right choice is picked (or the answer is shown) the cursor moves to point.reveal.
// Answered points are never asked again (stepping back and forward included) until reset().

export class Quiz {
  constructor(points) {
    this.points = (points || []).slice().sort((x, y) => x.reveal - y.reveal);
    this.reveals = this.points.map((p) => p.reveal);
    this.reset();
  }
  reset() {
    this.answers = new Map();  // reveal -> { picks: [choice indexes], done, right }
  }
  get size() { return this.points.length; }
  // Where a forward move from cursor i to j (> i) must stop and ask: the first unanswered point
  // the move enters (i <= ask < j: stop at ask), or the one the cursor is inside and the move
  // would leave past its reveal (ask < i < reveal <= j: stop at i). null: move freely.
  // NOTE: points never overlap ([ask, reveal] windows in order), so ask grows with reveal.
  intercept(i, j) {
    if (!(j > i)) return null;
    let lo = 0, hi = this.reveals.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (this.reveals[mid] <= i) lo = mid + 1; else hi = mid; }
    for (let k = lo; k < this.points.length && this.points[k].ask < j; k++) {
      const p = this.points[k];
      if (this.done(p)) continue;
      if (i <= p.ask) return { point: p, stop: p.ask };
      if (j >= p.reveal) return { point: p, stop: i };
    }
    return null;
  }
  done(point) { return Boolean(this.answers.get(point.reveal)?.done); }
  // Record a pick. right: this pick is the answer; done: the point is answered (right pick).
  pick(point, choice) {
    if (!(Number.isInteger(choice) && choice >= 0 && choice < point.choices.length)) {
      throw new RangeError(`kvlab: choice ${choice} outside [0, ${point.choices.length})`);
    }
    const a = this.entry(point);
    if (a.done) return { right: choice === point.answer, done: true, first: false };
    const first = a.picks.length === 0, right = choice === point.answer;
    a.picks.push(choice);
    if (right) { a.done = true; a.right = first; }
    return { right, done: a.done, first };
  }
  // Give up: the point counts as answered, not as right.
  showAnswer(point) {
    const a = this.entry(point);
    a.done = true;
  }
  entry(point) {
    if (!this.answers.has(point.reveal)) this.answers.set(point.reveal, { picks: [], done: false, right: false });
    return this.answers.get(point.reveal);
  }
  // right: answered right at the first pick; answered: points done; total: points in the trace.
  score() {
    let right = 0, answered = 0;
    for (const a of this.answers.values()) { if (a.done) answered++; if (a.right) right++; }
    return { right, answered, total: this.points.length };
  }
}
