import assert from "node:assert/strict";
import { test } from "node:test";

import { classRows, shownClasses } from "../../views/live/classes.js";
import { PYTHON } from "./python.mjs";

test("the classes drawn one by one are bam_viz.plots.classes.shown_classes's", () => {
  assert.ok(PYTHON.shown_classes.length >= 8);
  for (const [probs, target, most, top, rest] of PYTHON.shown_classes) {
    const got = shownClasses(probs.map((p) => (p === null ? NaN : p)), target, most);
    assert.deepEqual(got, { top, rest }, JSON.stringify([probs.length, target, most]));
    assert.ok(got.top.includes(target));
  }
});

test("a payload's frame becomes rows: names as text, the target marked, the rest summed", () => {
  const C = 12;
  const probs = Array.from({ length: C }, (_, c) => (c + 1) / 78);         // sums to 1
  const data = new Float32Array(2 * 4 * C).fill(NaN);
  for (let c = 0; c < C; c++) {
    data[4 * C + c] = probs[c];                                         // frame 1: E[f(z)]
    data[4 * C + C + c] = probs[c] / 2;                                 // 5%
    data[4 * C + 2 * C + c] = probs[c] * 2;                             // 95%
    data[4 * C + 3 * C + c] = probs[c];                                 // f(softmax)
  }
  const classes = Array.from({ length: C }, (_, c) => `c${c}`);
  classes[0] = "zero\u200bwidth";
  const h = { classes, target: 0, labels: { class_rest: "the other {n} classes" } };
  const rows = classRows(h, { data, shape: [2, 4, C], scale: 1 }, 1, 5);
  assert.deepEqual(rows.map((r) => r.name), ["c11", "c10", "c9", "zero\\u200bwidth", "the other 8 classes"]);
  assert.deepEqual(rows.map((r) => r.target), [false, false, false, true, false]);
  assert.ok(Math.abs(rows[4].mc - probs.slice(1, 9).reduce((a, b) => a + b, 0)) < 1e-6);
  assert.ok(rows[4].rest && Number.isNaN(rows[4].lo) && Math.abs(rows[0].hi - 2 * probs[11]) < 1e-6);
  assert.ok(classRows(h, { data, shape: [2, 4, C], scale: 1 }, 0, 5).every((r) => !Number.isFinite(r.mc) || r.rest));
});
