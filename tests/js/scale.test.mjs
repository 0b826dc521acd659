import assert from "node:assert/strict";
import { test } from "node:test";

import {
  colourMap, linearTicks, logTicks, niceStep, parseColour, relativeRange, scale,
} from "../../views/live/scale.js";
import { PYTHON } from "./python.mjs";

const values = (ticks) => ticks.map((t) => t.v);
const labels = (ticks) => ticks.map((t) => t.label);

test("log ticks: 1-2-5 in each decade where there is room, else decades", () => {
  assert.deepEqual(values(logTicks(0.2, 1000, 600)), [0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]);
  assert.deepEqual(labels(logTicks(0.2, 1000, 600)).slice(0, 4), ["0.2", "0.5", "1", "2"]);
  assert.deepEqual(values(logTicks(0.2, 1000, 200)), [1, 10, 100, 1000]);
  assert.deepEqual(values(logTicks(1e-3, 1e6, 150)), [0.001, 1, 1000, 1e6]);                // every 3rd decade
  assert.deepEqual(labels(logTicks(1e-3, 1e6, 150)), ["0.001", "1", "1000", "10⁶"]);
  assert.deepEqual(values(logTicks(2, 4, 300)), [2, 2.5, 3, 3.5, 4]);                         // inside a decade: linear
  assert.deepEqual(logTicks(0, 10, 300), []);
  assert.deepEqual(logTicks(5, 5, 300), []);
});

test("linear ticks are nice steps inside the range", () => {
  assert.deepEqual(labels(linearTicks(0, 1, 4)), ["0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
  assert.deepEqual(labels(linearTicks(0, 0.5, 5)), ["0", "0.1", "0.2", "0.3", "0.4", "0.5"]);
  assert.deepEqual(values(linearTicks(-3, 7, 2)), [0, 5]);
  assert.deepEqual(linearTicks(1, 1), []);
  assert.equal(niceStep(7, 5), 1);
  assert.equal(niceStep(12, 5), 2);
  assert.equal(niceStep(30, 5), 5);
  assert.equal(niceStep(0.9, 3), 0.2);
});

test("scales map data to pixels and back, in logs on a log scale", () => {
  const s = scale(1, 100, 0, 200, true);
  assert.equal(s(10), 100);
  assert.ok(Math.abs(s.invert(100) - 10) < 1e-12);
  const t = scale(0, 1, 300, 100);
  assert.equal(t(0.5), 200);
  assert.equal(t.invert(100), 1);
});

test("relative colour ranges: the values' own, or a small one around a single value", () => {
  assert.deepEqual(relativeRange([3, NaN, 1, 2]), [1, 3]);
  assert.deepEqual(relativeRange([NaN]), [0, 1]);
  const [lo, hi] = relativeRange([2, 2]);
  assert.ok(lo < 2 && hi > 2 && Math.abs(lo + hi - 4) < 1e-12);
});

test("colour maps interpolate the payload's Plotly colour scales", () => {
  assert.deepEqual(parseColour("#1f77b4"), [31, 119, 180]);
  assert.deepEqual(parseColour("rgba(44,160,44,0.18)"), [44, 160, 44]);
  const weight = colourMap(PYTHON.style.inside.scales.weight);
  assert.equal(weight.css(0), "rgb(247,251,255)");
  assert.equal(weight.css(1), "rgb(8,48,107)");
  const viridis = colourMap(PYTHON.style.inside.scales.value);
  assert.deepEqual([...viridis.lut.slice(0, 3)], [0x44, 0x01, 0x54]);
  assert.deepEqual([...viridis.lut.slice(255 * 3)], [0xfd, 0xe7, 0x25]);
  const mid = colourMap([[0, "rgb(0,0,0)"], [1, "rgb(255,255,255)"]]);
  assert.equal(mid.css(0.5), "rgb(128,128,128)");
});
