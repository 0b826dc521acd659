import assert from "node:assert/strict";
import { test } from "node:test";

import { fill, pageStyle } from "../../views/live/style.js";
import { PYTHON } from "./python.mjs";

test("the header's style gets its colour scales as lookup tables, once", () => {
  const style = pageStyle(PYTHON.style.inside);
  assert.deepEqual(Object.keys(style.maps), ["weight", "std", "value"]);
  assert.equal(style.maps.std.css(0), "rgb(255,245,235)");
  assert.deepEqual(style.deterministicRgb, [224, 224, 224]);
  assert.equal(style.colours.posterior, PYTHON.style.inside.colours.posterior);
  assert.equal(pageStyle(structuredClone(PYTHON.style.inside)), style);
  assert.notEqual(pageStyle(PYTHON.style.summary), style);
});

test("a payload without a style is refused, not drawn with guesses", () => {
  assert.throws(() => pageStyle(undefined), /no style/);
  assert.throws(() => pageStyle({ kl_decades: 6 }), /no style/);
});

test("the gap's sentences are bam_viz.plots.captions.gap_sentence's", () => {
  const sentences = PYTHON.style.summary.gap_sentence;
  for (const [told, halfWidth, python] of PYTHON.gap_sentence) {
    assert.equal(fill(told ? sentences.distinguishable : sentences.indistinguishable, { half_width: halfWidth }), python);
  }
  assert.equal(fill("{a} and {b}", { a: 1 }), "1 and {b}");
});
