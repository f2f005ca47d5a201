// Node test of kvlab/viz/static/i18n.js, the player's label lookup: with the Chinese labels
// (kvlab.viz.player_labels("zh"), written by tests/viz/test_player_i18n.py to the file named by
// KVLAB_LABELS_FIXTURE) tr() / trn() return Chinese with the placeholders filled; with {} (English)
// they return the English source strings.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

const { tr, trn, useLabels } = await import("data:text/javascript," + encodeURIComponent(
  fs.readFileSync(new URL("../../../kvlab/viz/static/i18n.js", import.meta.url), "utf8")));
const fixture = JSON.parse(fs.readFileSync(process.env.KVLAB_LABELS_FIXTURE, "utf8"));

test("zh: every label the player uses comes back in Chinese", () => {
  useLabels(fixture.zh);
  assert.equal(tr("free, cached: evictable"), "空闲、已缓存：可驱逐");
  assert.equal(tr("BlockPool · {n} blocks · {free} in the free queue", { n: 10, free: 7 }),
    "BlockPool · 10 个块 · 空闲队列中 7 个");
  assert.equal(tr("event {i} of {n}", { i: "3", n: "1,781" }), "事件 3 / 共 1,781 个");
  for (const english of fixture.keys) {
    const zh = tr(english);
    assert.notEqual(zh, english, `no Chinese for ${JSON.stringify(english)}`);
    assert.match(zh, /[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]/, `not Chinese: ${JSON.stringify(zh)}`);
  }
});

test("zh: trn picks one Chinese form, with thousands separators", () => {
  useLabels(fixture.zh);
  assert.equal(trn("{n} block", "{n} blocks", 1), "1 个块");
  assert.equal(trn("{n} block", "{n} blocks", 1781), "1,781 个块");
  assert.equal(trn("… {n} more row", "… {n} more rows", 3), "… 还有 3 行");
});

test("en ({} or null): the English source, placeholders filled, plurals by count", () => {
  for (const labels of [{}, null, undefined]) {
    useLabels(labels);
    assert.equal(tr("free, cached: evictable"), "free, cached: evictable");
    assert.equal(tr("step {step}", { step: 4 }), "step 4");
    assert.equal(trn("{n} block", "{n} blocks", 1), "1 block");
    assert.equal(trn("{n} block", "{n} blocks", 0), "0 blocks");
    assert.equal(trn("{n} token", "{n} tokens", 1781), "1,781 tokens");
  }
});

test("a placeholder without a value stays visible; switching back to zh works", () => {
  useLabels({});
  assert.equal(tr("event {i} of {n}", { i: 1 }), "event 1 of {n}");
  useLabels(fixture.zh);
  assert.equal(tr("step {step}", { step: 2 }), "第 2 步");
});
