import assert from "node:assert/strict";
import { test } from "node:test";

import { frameIntervalZ, frameSamples, nearestIndex, nearestReady, sliderIndex, sliderValue } from "../../views/live/indices.js";
import { PYTHON } from "./python.mjs";

test("the nearest grid value is bam_viz.core.grids.nearest_index's", () => {
  for (const [values, v, log, python] of PYTHON.nearest) {
    assert.equal(nearestIndex(values, v, log), python, `${v} on ${values} (log ${log})`);
  }
  assert.equal(nearestIndex([], 3, true), 0);
  assert.equal(nearestIndex([1, 2], NaN, true), 0);
});

test("a chart's slider index: the browser's value, else the server's", () => {
  const slider = { name: "shape_k", scale: "log", values: [0.5, 1, 3, 10], current: 2 };
  assert.equal(sliderIndex(slider, { shape_k: 8 }), 3);
  assert.equal(sliderIndex(slider, {}), 2);
  assert.equal(sliderIndex({ ...slider, current: 9 }, {}), 3);
  assert.equal(sliderIndex({ ...slider, current: "x" }, {}), 0);
  assert.equal(sliderIndex(null, {}), 0);
  assert.equal(sliderValue(slider, 1), 1);
  assert.equal(sliderValue(null, 1), undefined);
});

test("the ready frame nearest to the one wanted, right first", () => {
  assert.equal(nearestReady(2, [true, false, false, true, false], 5), 3);
  assert.equal(nearestReady(2, [true, false, false, false, false], 5), 0);
  assert.equal(nearestReady(1, [true, false, true], 3), 2);
  assert.equal(nearestReady(1, [false, false, false], 3), -1);
  assert.equal(nearestReady(1, null, 3), 1);
});

test("a frame's samples: a preview's own, else the header's", () => {
  const h = { n_samples: 32, frame_samples: [32, 8, 0] };
  assert.equal(frameSamples(h, 0), 32);
  assert.equal(frameSamples(h, 1), 8);
  assert.equal(frameSamples(h, 2), 32);
  assert.equal(frameSamples({ n_samples: 16 }, 1), 16);
  assert.equal(frameSamples({}, 0), 0);
  assert.equal(frameSamples(null, 0), 0);
});

test("a frame's interval multiplier is the header's, NaN where Python sent none", () => {
  const h = { frame_interval_z: [2.04, 2.36, null] };
  assert.equal(frameIntervalZ(h, 0), 2.04);
  assert.equal(frameIntervalZ(h, 1), 2.36);
  assert.ok(Number.isNaN(frameIntervalZ(h, 2)));
  assert.ok(Number.isNaN(frameIntervalZ(h, 3)));
  assert.ok(Number.isNaN(frameIntervalZ({ n_samples: 32 }, 0)));
});
