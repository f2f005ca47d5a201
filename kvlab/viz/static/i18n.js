// kvlab player labels in the learner's language. The player's English strings are listed in
// kvlab/viz/player_strings.py (catalogue messages, translated in kvlab/locale); the widget and
// exported pages send their translations as `labels`, a {english: translation} object ({} for
// English). Every label the player shows goes through tr() / trn() with a literal English
// message (a test reads them from the sources); identifiers (block_id, ref_cnt, popleft ...)
// are not labels. No DOM and no imports here: Node runs it in tests.

let CURRENT = {};

// The labels in force (set by the player before it draws; {} or null = English).
export function useLabels(labels) { CURRENT = labels || {}; }

// `message` in the current language, its {name} placeholders filled from `params`.
export function tr(message, params) {
  const text = Object.prototype.hasOwnProperty.call(CURRENT, message) ? CURRENT[message] : message;
  if (!params) return text;
  return text.replace(/\{(\w+)\}/g, (whole, key) => (key in params ? String(params[key]) : whole));
}

// The singular or plural message for the count n ({n} = n with thousands separators).
export function trn(singular, plural, n, params) {
  return tr(n === 1 ? singular : plural, { ...params, n: n.toLocaleString("en-US") });
}

