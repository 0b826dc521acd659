import assert from "node:assert/strict";
import { test } from "node:test";

import { entropyBar } from "../../views/live/entropy.js";
import { readArrays, readHeader, row } from "../../views/live/payload.js";
import { PYTHON } from "./python.mjs";

// A summary payload's header and frame 0's stats by name, as SummaryView.stats reads them.
function frame(bytes64) {
  const data = new Uint8Array(Buffer.from(bytes64, "base64"));
  const { header, blobStart } = readHeader(data);
  const values = row(readArrays(data, header, blobStart).stats, header.stats.length, 0);
  return { h: header, st: Object.fromEntries(header.stats.map((name, k) => [name, values[k]])) };
}

test("the entropy bar draws the payload's total H[E p] and parts, as bam_viz.plots.wording.entropy_parts", () => {
  assert.ok(PYTHON.entropy.length >= 4);
  for (const want of PYTHON.entropy) {
    const { h, st } = frame(want.base64);
    const bar = entropyBar(h, st, 0);
    assert.equal(bar.total, want.total);
    assert.ok(bar.total <= h.entropy_bound + 1e-6, `${bar.total} > ln K = ${h.entropy_bound}`);
    assert.deepEqual(bar.segments, [
      { key: "aleatoric", v: want.aleatoric, x0: 0, x1: want.aleatoric },
      { key: "epistemic", v: want.epistemic, x0: want.aleatoric, x1: want.total },
    ]);
    assert.equal(bar.note, want.note);
  }
});

test("the bias-corrected MI is said beside the bar, not stacked on it", () => {
  const [symmetric, two, , deterministic] = PYTHON.entropy;
  const { h, st } = frame(symmetric.base64);
  assert.ok(st.expected_entropy + st.mi > h.entropy_bound + 0.05);     // stacked, it would pass ln 2
  const bar = entropyBar(h, st, 0);
  assert.ok(bar.total <= h.entropy_bound + 1e-6 && bar.note.includes("0.370"));
  // two samples (no jackknife) and a deterministic model: the headline's MI is the plug-in, no note
  for (const c of [two, deterministic]) assert.equal(entropyBar(...Object.values(frame(c.base64)), 0).note, "");
  // a frame not made: NaN throughout, nothing drawn, nothing said
  const empty = entropyBar(h, Object.fromEntries(h.stats.map((n) => [n, NaN])), 0);
  assert.ok(Number.isNaN(empty.total) && empty.segments.every((s) => Number.isNaN(s.v)) && empty.note === "");
});
