// views/live/frame.js against bam_viz.live.frames and bam_viz.live.payloads: tests/js/fixtures/frame.json,
// made by `.venv/bin/python tests/js/make_frame_fixture.py` (its docstring has the cases;
// tests/test_frame_fixture.py fails when it is stale). Each frame's graph outputs go through
// frameFromOutputs, the frames through summaryArrays and insideArrays, by the rules the server sends
// (frame_rules(), the fixture's `rules`), and every number must be Python's.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { frameFromOutputs, insideArrays, summaryArrays } from "../../views/live/frame.js";
import { buffersOf } from "../../views/live/frame_queue.js";

const FIXTURE = JSON.parse(readFileSync(new URL("./fixtures/frame.json", import.meta.url), "utf8"));
const RULES = FIXTURE.rules;
const STATS = RULES.stats;
const numbers = (list) => list.map((v) => (v === null ? NaN : v));
const f32 = (list) => Float32Array.from(numbers(list));

// The inputs are float32. Python computes some numbers in float32 (E[f(z)] as torch's mean, the spread,
// the maps' std and quantiles) where frame.js uses float64, and sums in another order: a few float32 ulps
// apart, ~1e-7 relative. 1e-6 relative allows some ten ulps; 2e-6 absolute covers numbers near 0 (a gap
// is the difference of two probabilities, so its error is theirs, not its own size's).
const RTOL = 1e-6;
const ATOL = 2e-6;

// `zeros`: where Python's number is 0, frame.js's must be 0 too: the page words an exact error (0) apart
// from a small one.
function assertClose(got, want, what, { zeros = false } = {}) {
  assert.equal(got.length, want.length, `${what}: ${got.length} numbers, not ${want.length}`);
  for (let k = 0; k < want.length; k++) {
    const [g, w] = [got[k], want[k]];
    const ok = Number.isNaN(w) ? Number.isNaN(g) : zeros && w === 0 ? g === 0 : Math.abs(g - w) <= ATOL + RTOL * Math.abs(w);
    assert.ok(ok, `${what}[${k}]: ${g} != Python's ${w}`);
  }
}

// A frame's caption rows (make_frame's caption_rows(row_summary) and map_summary) are made from the same
// float32 weights by the same float64 steps, in the same order but for a few sums (numpy's pairwise): the
// token indices must be Python's, each float32 number Python's or its float32 neighbour (a float64 ulp apart
// before rounding), each float64 one within ROWS_RTOL. Far inside the 1e-6 of float32 rounding: a mean not
// rounded to float32 first moves the shares by ~1e-8, which this sees.
const ROWS_RTOL = 1e-12;
const ROW_NUMBERS = ["mean", "se", "lo", "hi", "share"];           // RowSummary's, float32
const MAP_NUMBERS = { stdMax: "std_max", stdMean: "std_mean", mapShare: "share" };   // MapSummary's, float64

function assertRows(got, want, what) {
  const ulp32 = (v) => (v === 0 ? 2 ** -149 : 2 ** (Math.floor(Math.log2(Math.abs(v))) - 23));
  const within = (g, w, tol, name) => {
    assert.equal(g.length, w.length, `${what} ${name}: ${g.length} numbers, not ${w.length}`);
    w.forEach((v, k) => assert.ok(Math.abs(g[k] - v) <= Math.min(1e-6, tol(v)), `${what} ${name}[${k}]: ${g[k]} != Python's ${v}`));
  };
  assert.ok(got.top instanceof Int16Array && got.query instanceof Int32Array && got.key instanceof Int32Array, what);
  assert.deepEqual(Array.from(got.top), want.row_summary.top, `${what} top`);
  assert.deepEqual(Array.from(got.query), want.map_summary.query, `${what} query`);
  assert.deepEqual(Array.from(got.key), want.map_summary.key, `${what} key`);
  for (const name of ROW_NUMBERS) {
    assert.ok(got[name] instanceof Float32Array, `${what} ${name}`);
    within(got[name], want.row_summary[name], ulp32, name);
  }
  for (const [name, python] of Object.entries(MAP_NUMBERS)) {
    assert.ok(got[name] instanceof Float64Array, `${what} ${name}`);
    within(got[name], want.map_summary[python], (v) => ROWS_RTOL * Math.max(Math.abs(v), 1e-3), name);
  }
}

function outputsOf(frame) {
  return Object.fromEntries(Object.entries(frame.outputs).map(([name, { dims, data }]) => [name, { dims, data: f32(data) }]));
}

function frameOf(c, frame, rules = RULES) {
  return frameFromOutputs(outputsOf(frame), rules, {
    softmaxProbs: f32(c.softmax_probs), window: c.window, stochastic: c.stochastic, intervalZ: frame.interval_z,
    layers: c.layers, heads: c.heads,
  });
}

const framesOf = (c) => c.frames.map((f) => (f ? frameOf(c, f) : null));

test("the cases are the maker's", () => {
  assert.deepEqual(FIXTURE.cases.map((c) => c.name), ["weibull K=2", "dirichlet K=3", "categorical K=2",
    "categorical K=2, one sample twice", "mc-dropout K=3", "softmax K=3"]);
});

for (const c of FIXTURE.cases) {
  test(`${c.name}: each frame's stats, samples, spread and maps are make_frame's`, () => {
    c.frames.forEach((frame, i) => {
      if (!frame) return;
      const got = frameOf(c, frame);
      assert.ok(got.stats instanceof Float64Array);
      assertClose(got.stats, numbers(frame.stats), `frame ${i} stats`, { zeros: true });
      assert.deepEqual(got.pSamples, f32(frame.outputs.sample_probs.data), `frame ${i} samples`);
      assertClose(got.spread, numbers(frame.spread), `frame ${i} spread`);
      assert.deepEqual(Object.keys(got.maps), Object.keys(frame.maps), `frame ${i} layers with maps`);
      for (const [layer, maps] of Object.entries(frame.maps)) {
        assert.ok(got.maps[layer] instanceof Float32Array);
        assertClose(got.maps[layer], f32(maps), `frame ${i} maps of layer ${layer}`);
      }
    });
  });

  test(`${c.name}: each frame's caption rows are make_frame's caption_rows(row_summary) and map_summary`, () => {
    c.frames.forEach((frame, i) => {
      if (!frame) return;
      const got = frameOf(c, frame);
      assert.deepEqual(Object.keys(got.rows), Object.keys(frame.rows), `frame ${i} layers with rows`);
      assert.deepEqual(Object.keys(frame.rows), Object.keys(frame.maps), `frame ${i}: rows where maps are`);
      for (const [layer, want] of Object.entries(frame.rows)) assertRows(got.rows[layer], want, `frame ${i} layer ${layer}`);
    });
  });

  test(`${c.name}: the summary's arrays are _summary_arrays', for every class`, () => {
    const frames = framesOf(c);
    c.summary.forEach((want, target) => {
      const got = summaryArrays(frames, RULES, target, frames.length, c.n_samples, c.classes);
      assert.deepEqual(Object.keys(got), Object.keys(want));
      assert.deepEqual(got.stats.shape, [frames.length, STATS.length]);
      assert.deepEqual(got.class_probs.shape, [frames.length, 4, c.classes]);
      for (const [name, array] of Object.entries(got)) {
        assert.ok(array.data instanceof Float32Array && array.scale === 1, name);
        assertClose(array.data, f32(want[name]), `class ${target} ${name}`);
      }
    });
  });

  test(`${c.name}: the inside arrays are inside_payload's`, () => {
    const frames = framesOf(c);
    for (const want of c.inside) {
      const got = insideArrays(frames, RULES, {
        layer: want.layer, head: want.head, query: want.query, window: c.window, softmax: f32(want.softmax),
        layers: c.layers, heads: c.heads, nSamples: c.n_samples,
      });
      const where = `layer ${want.layer} head ${want.head} query ${want.query}`;
      for (const name of ["maps", "post_row", "spread"]) {
        assert.deepEqual(got[name].shape, want[name].dims, `${where} ${name}`);
        assertClose(got[name].data, f32(want[name].data), `${where} ${name}`);
      }
    }
  });
}

test("the cases reach every rule: previews, frames not made, exact, too few samples, no drawn attention", () => {
  const made = FIXTURE.cases.flatMap((c) => c.frames.filter(Boolean).map((f) => ({ c, f })));
  const column = (f, name, C) => Array.from({ length: C }, (_, k) => f.stats[k * STATS.length + STATS.indexOf(name)]);
  assert.ok(FIXTURE.cases.some((c) => c.frames.includes(null)));
  assert.ok(made.some(({ c, f }) => f.outputs.sample_probs.dims[0] < c.n_samples));
  assert.ok(made.some(({ c, f }) => c.stochastic && column(f, "p_se", c.classes).every((v) => v === 0)));
  assert.ok(made.some(({ c, f }) => column(f, "mi_se", c.classes).every((v) => v === null)));
  assert.ok(made.some(({ c, f }) => f.outputs.sample_probs.dims[0] < 3 && column(f, "mi_se", c.classes).every((v) => v === 0)));
  assert.ok(made.some(({ c, f }) => c.stochastic && !("loo_probs" in f.outputs)));
  assert.ok(made.some(({ c }) => !c.stochastic));
  assert.ok(FIXTURE.cases.some((c) => c.inside.some((s) => !c.window.includes(s.query))));
  // rows: a window short of the sentence, and a repeated sample's (SE 0, lo = hi, every sd 0)
  assert.ok(made.some(({ c, f }) => Object.keys(f.rows).length && c.window.length < c.tokens));
  const rows = made.flatMap(({ f }) => Object.values(f.rows));
  assert.ok(rows.some((r) => r.row_summary.se.every((v) => v === 0)
    && r.row_summary.lo.every((v, k) => v === r.row_summary.hi[k]) && r.map_summary.std_max.every((v) => v === 0)));
  assert.ok(rows.some((r) => r.row_summary.se.some((v) => v > 0) && r.row_summary.lo.some((v, k) => v < r.row_summary.hi[k])));
});

test("each error's NaN rule reads its own samples_needed: the gap's past S leaves p's SE", () => {
  const c = FIXTURE.cases[0];
  const frame = c.frames[0];
  const S = frame.outputs.sample_probs.dims[0];
  const before = frameOf(c, frame).stats;
  const after = frameOf(c, frame, { ...RULES, samples_needed: { ...RULES.samples_needed, gap: S + 1 } }).stats;
  const at = (name, k) => k * STATS.length + STATS.indexOf(name);
  for (let k = 0; k < c.classes; k++) {
    assert.ok(Number.isFinite(before[at("gap_se", k)]) && before[at("gap_se", k)] > 0, `class ${k}: a gap SE to lose`);
    assert.ok(Number.isNaN(after[at("gap_se", k)]), `class ${k} gap_se`);
    for (const name of ["p_se", "gap_softmax_se", "mi_se"]) {
      assert.ok(Number.isFinite(after[at(name, k)]), `class ${k} ${name}`);
      assert.equal(after[at(name, k)], before[at(name, k)], `class ${k} ${name}`);
    }
  }
});

test("rules frame.js cannot follow are refused", () => {
  const c = FIXTURE.cases[0];
  const frame = c.frames[0];
  const { gap, ...needed } = RULES.samples_needed;
  assert.ok(gap);
  assert.throws(() => frameOf(c, frame, { ...RULES, samples_needed: needed }), /lack samples_needed\.gap/);
  assert.throws(() => frameOf(c, frame, { ...RULES, mi_rounding: undefined }), /lack mi_rounding/);
  assert.throws(() => frameOf(c, frame, null), /lack stats, map_samples/);
  assert.throws(() => frameOf(c, frame, { ...RULES, stats: [...STATS, "p_new"] }), /p_new/);
  assert.throws(() => summaryArrays([null], { ...RULES, quantiles: null }, 0, 1, 6, 2), /lack quantiles/);
  assert.throws(() => insideArrays([null], { ...RULES, map_panels: undefined }, {}), /lack map_panels/);
});

test("outputs that do not fit each other are refused", () => {
  const c = FIXTURE.cases[0];
  const frame = c.frames[0];
  const options = { softmaxProbs: f32(c.softmax_probs), window: c.window, stochastic: true, intervalZ: 2, layers: c.layers, heads: c.heads };
  const outputs = outputsOf(frame);
  const made = (o, opts) => frameFromOutputs(o, RULES, opts);
  assert.throws(() => made({ ...outputs, loo_probs: { dims: [2, 2], data: new Float32Array(4) } }, options), /loo_probs/);
  assert.throws(() => made(outputs, { ...options, softmaxProbs: [1] }), /softmaxProbs/);
  assert.throws(() => made(outputs, { ...options, heads: 3 }), /weights_1/);
  assert.throws(() => made(outputs, { ...options, layers: 2 }), /past the model's 2 layers/);
  assert.throws(() => made(outputs, { ...options, window: [0, 9] }), /window/);
  assert.throws(() => summaryArrays([null], RULES, 2, 1, 6, 2), /target/);
});

// frame_worker.js posts each reduced frame with buffersOf(frame) as its transfer list: every typed array
// moves (none copied, the worker keeps none), and the page receives the same numbers.
test("a reduced frame posted with its buffers arrives whole and leaves the worker nothing", () => {
  const c = FIXTURE.cases[0];
  const frame = frameOf(c, c.frames.find((f) => f));
  const want = structuredClone(frame);
  const buffers = buffersOf(frame);
  const arrays = [];
  const walk = (v) => (ArrayBuffer.isView(v) ? arrays.push(v) : v && typeof v === "object" && Object.values(v).forEach(walk));
  walk(frame);
  assert.ok(arrays.length > 10 && buffers.length === new Set(arrays.map((a) => a.buffer)).size);
  const got = structuredClone(frame, { transfer: buffers });
  assert.deepEqual(got, want);
  assert.ok(arrays.every((a) => a.buffer.byteLength === 0), "every array of the worker's frame is transferred");
});
