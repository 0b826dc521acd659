// views/live/engine.js: the noise a frame graph gets, and a frame run by onnxruntime-web's WASM backend
// on tests/js/fixtures/engine.onnx (made, with engine.json, by `.venv/bin/python tests/js/make_engine_fixture.py`;
// its docstring has the graph's formulas). The runtime comes from node_modules/ (`npm ci`, run by `make install`).
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";

import { createSession, noiseFeeds, noiseShapes, runFrame } from "../../views/live/engine.js";
import { uniforms } from "../../views/live/random.js";

const fixture = (name) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url));
const MANIFEST = JSON.parse(fixture("engine.json").toString("utf8"));
const RUNTIME = new URL("../../node_modules/onnxruntime-web/package.json", import.meta.url);
const NO_RUNTIME = !existsSync(RUNTIME) && "node_modules/onnxruntime-web is missing: run `npm ci` (`make install`)";

const T = 5;
const S = 3;
const SEED = 2n ** 63n - 25n;
const states = Float32Array.from({ length: T * MANIFEST.hidden }, (_, k) => (k % 7) / 4 - 0.5);   // (1, T, 4)

// What the fixture's graph computes, in float64 from the same uniforms.
function expected(seed, beta) {
  const u0 = uniforms(seed, 0, S * 2 * T);                                                      // (S, 2, T)
  const u1 = uniforms(seed, 1, S * 3);                                                          // (S, 3)
  const out = [];
  for (let s = 0; s < S; s++) {
    for (let t = 0; t < T; t++) {
      let row = 0;
      for (let h = 0; h < MANIFEST.hidden; h++) row += states[t * MANIFEST.hidden + h];
      out.push(row + beta * (u0[(s * 2) * T + t] + u0[(s * 2 + 1) * T + t]));
    }
  }
  return { out, gate: [...u1].map((u) => -Math.log(u) * beta) };
}

function assertClose(got, want, what) {
  assert.equal(got.length, want.length, what);
  for (let i = 0; i < want.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) <= 1e-6 * (1 + Math.abs(want[i])), `${what}[${i}]: ${got[i]} != ${want[i]}`);
  }
}

test("noise shapes: S and T filled in, the rest as the manifest has them", () => {
  assert.deepEqual(noiseShapes(MANIFEST, S, T), [{ name: "noise_0", dims: [3, 2, 5] }, { name: "noise_1", dims: [3, 3] }]);
  assert.throws(() => noiseShapes({ noise: [{ name: "n", dims: ["L"] }] }, S, T), /dim "L" of n/);
  assert.throws(() => noiseShapes(MANIFEST, -1, T), RangeError);
  assert.throws(() => noiseShapes(MANIFEST, S, 2.5), RangeError);
});

test("noise feeds: draw site i is the i-th noise input, its uniforms random.js's stream i of the seed", () => {
  const feeds = noiseFeeds(MANIFEST, S, T, SEED);
  assert.deepEqual(Object.keys(feeds), ["noise_0", "noise_1"]);
  assert.deepEqual(feeds.noise_0, { data: uniforms(SEED, 0, 30), dims: [3, 2, 5] });
  assert.deepEqual(feeds.noise_1, { data: uniforms(SEED, 1, 9), dims: [3, 3] });
  assert.notDeepEqual(noiseFeeds(MANIFEST, S, T, 1).noise_0.data, feeds.noise_0.data);
});

// A runtime and a session that hand back what they were fed: what runFrame feeds, without WASM.
function echo(inputNames) {
  const ort = { Tensor: class { constructor(type, data, dims) { Object.assign(this, { type, data, dims }); } } };
  const session = { inputNames, outputNames: inputNames, run: async (feeds) => feeds };
  return { ort, session };
}

test("a frame's feeds: states (1, T, hidden) and hyper in the manifest's order, where the graph reads them", async () => {
  const { ort, session } = echo(["states", "hyper", "noise_0", "noise_1"]);
  const manifest = { ...MANIFEST, hyper: ["beta", "shape_k"] };
  const out = await runFrame(ort, session, manifest, { states: [...states], T, S, seed: 7, hyper: { shape_k: 3, beta: 0.5 } });
  assert.deepEqual(out.states, { data: states, dims: [1, T, 4] });
  assert.deepEqual(out.hyper, { data: new Float32Array([0.5, 3]), dims: [2] });
  assert.deepEqual(out.noise_1, { data: uniforms(7, 1, 9), dims: [3, 3] });
  const noStates = echo(["noise_0", "noise_1"]);
  assert.deepEqual(Object.keys(await runFrame(noStates.ort, noStates.session, MANIFEST, { T, S, seed: 7 })), ["noise_0", "noise_1"]);
});

test("a frame that does not fit its graph is refused before it runs", async () => {
  const { ort, session } = echo(["states", "hyper", "noise_0", "noise_1"]);
  const frame = { states, T, S, seed: 7, hyper: { beta: 1 } };
  await assert.rejects(runFrame(ort, session, MANIFEST, { ...frame, T: 4 }), /not T \* hidden = 16/);
  await assert.rejects(runFrame(ort, session, MANIFEST, { ...frame, hyper: {} }), /beta is undefined/);
  await assert.rejects(runFrame(ort, session, MANIFEST, { ...frame, seed: -1 }), RangeError);
  const fewer = echo(["states", "hyper", "noise_0"]);
  await assert.rejects(runFrame(fewer.ort, fewer.session, MANIFEST, frame), /noise noise_1 not in the graph/);
  const more = echo(["states", "hyper", "noise_0", "noise_1", "mask"]);
  await assert.rejects(runFrame(more.ort, more.session, MANIFEST, frame), /inputs mask unfed/);
});

test("onnxruntime-web runs the fixture's graph on the frame's uniforms", { skip: NO_RUNTIME }, async () => {
  const ort = await import("onnxruntime-web");
  ort.env.wasm.numThreads = 1;
  const session = await createSession(ort, new Uint8Array(fixture("engine.onnx")));
  try {
    assert.deepEqual(session.inputNames, ["states", "hyper", "noise_0", "noise_1"]);
    for (const [seed, beta] of [[SEED, 1.5], [0, -0.25]]) {
      const got = await runFrame(ort, session, MANIFEST, { states, T, S, seed, hyper: { beta } });
      const want = expected(seed, beta);
      assert.deepEqual(Object.keys(got), ["out", "gate"]);
      assert.deepEqual(got.out.dims, [S, T]);
      assert.deepEqual(got.gate.dims, [S, 3]);
      assert.ok(got.out.data instanceof Float32Array);
      assertClose(got.out.data, want.out, `out at seed ${seed}`);
      assertClose(got.gate.data, want.gate, `gate at seed ${seed}`);
    }
  } finally {
    await session.release();
  }
});
