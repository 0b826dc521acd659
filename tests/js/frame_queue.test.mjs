// views/live/frame_queue.js: what the frame worker decides between two frames, and what it checks
// before it loads a graph or runs a sentence. The worker itself runs in chromium (tests/test_browser_frames.py).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  buffersOf, carried, FrameQueue, MAX_NOISE_BYTES, nearestFirst, noiseBytes, oneLine, sameOrigin, sentenceProblem, transferable, wasmThreads,
} from "../../views/live/frame_queue.js";

test("nearest first is bam_viz.live.grid.nearest_first's order (tests/test_live.py's cases)", () => {
  assert.deepEqual(nearestFirst(5, 2), [2, 3, 1, 4, 0]);
  assert.deepEqual(nearestFirst(4, 0), [0, 1, 2, 3]);
  assert.deepEqual(nearestFirst(5, 2, -1), [2, 1, 3, 0, 4]);
  assert.deepEqual([...nearestFirst(61, 37)].sort((a, b) => a - b), [...Array(61).keys()]);
  assert.deepEqual([...nearestFirst(61, 37, -4)].sort((a, b) => a - b), [...Array(61).keys()]);
  assert.deepEqual(nearestFirst(1, 0), [0]);
});

test("a queue makes the current frame first, then outward, each frame once", () => {
  const q = new FrameQueue(5, 2);
  const made = [];
  for (let i = q.next(); i >= 0; i = q.next()) { made.push(i); q.done(i); }
  assert.deepEqual(made, [2, 3, 1, 4, 0]);
  assert.ok(q.finished);
  assert.equal(q.next(), -1);
});

test("a move reorders what is left, the side it moved to first; what is made stays made", () => {
  const q = new FrameQueue(7, 3);
  q.done(q.next());                           // 3
  q.moveTo(1);                                // moved left: 1, 0, 2, then 4 ...
  const made = [];
  for (let i = q.next(); i >= 0; i = q.next()) { made.push(i); q.done(i); }
  assert.deepEqual(made, [1, 0, 2, 4, 5, 6]);
  const right = new FrameQueue(7, 3);
  right.moveTo(5);
  assert.equal(right.next(), 5);
  right.done(5);
  assert.equal(right.next(), 6);              // the side it moved to first
  right.moveTo(5);                            // no move: the last side is kept
  assert.equal(right.next(), 6);
});

test("a queue refuses frames it does not have", () => {
  assert.throws(() => new FrameQueue(0, 0), RangeError);
  assert.throws(() => new FrameQueue(3, 3), /frame 0 \.\. 2, not 3/);
  assert.throws(() => new FrameQueue(3, 1).moveTo(-1), RangeError);
  assert.throws(() => new FrameQueue(3, 1).done(1.5), RangeError);
});

test("the runtime and the graph come from the page's origin only", () => {
  const here = "http://127.0.0.1:8501/app/static/live/js/0123456789abcdef/frame_worker.js";
  assert.equal(sameOrigin("/app/static/ort/abc/ort.wasm.min.mjs", here, "the runtime"),
    "http://127.0.0.1:8501/app/static/ort/abc/ort.wasm.min.mjs");
  assert.equal(sameOrigin("../../graphs/x/frame.onnx", here, "g"), "http://127.0.0.1:8501/app/static/live/graphs/x/frame.onnx");
  assert.throws(() => sameOrigin("//cdn.example.org/ort.mjs", here, "the runtime"), /the runtime's URL .* not of this page's origin/);
  assert.throws(() => sameOrigin("http://127.0.0.1:9999/ort.mjs", here, "the runtime"), /not of this page's origin/);
  assert.throws(() => sameOrigin("data:text/javascript,1", here, "the runtime"), /not of this page's origin/);
  assert.throws(() => sameOrigin("http://[bad", here, "the frame graph"), /the frame graph's URL .* is not a URL/);
});

test("threads: as asked in an isolated page, one with a note in another", () => {
  assert.deepEqual(wasmThreads(2, true), { threads: 2, note: "" });
  assert.deepEqual(wasmThreads(1, false), { threads: 1, note: "" });
  const fallback = wasmThreads(4, false);
  assert.equal(fallback.threads, 1);
  assert.match(fallback.note, /not 4: the page is not cross-origin isolated/);
  for (const bad of [0, 1.5, "2", undefined]) assert.throws(() => wasmThreads(bad, true), RangeError);
});

const MANIFEST = { hidden: 4, n_samples: 3, hyper: ["beta"], noise: [{ name: "noise_0", dims: [3, 2, "T", "T"] }, { name: "noise_1", dims: ["S", 5] }] };

test("a sentence is checked before it runs: its arrays, its samples, its memory", () => {
  const ok = { states: new Float32Array(8), T: 2, S: 3, values: [{ beta: 1 }] };
  assert.equal(noiseBytes(MANIFEST, 3, 2), 4 * (3 * 2 * 2 * 2 + 3 * 5));
  assert.equal(sentenceProblem(MANIFEST, ok), "");
  assert.match(sentenceProblem(MANIFEST, { ...ok, states: new Float32Array(7) }), /hold 7 numbers, not T \* hidden = 2 \* 4/);
  assert.match(sentenceProblem(MANIFEST, { ...ok, states: [0, 0, 0, 0, 0, 0, 0, 0] }), /not T \* hidden/);
  assert.match(sentenceProblem(MANIFEST, { ...ok, T: 0 }), /one token or more/);
  assert.match(sentenceProblem(MANIFEST, { ...ok, S: 4 }), /draws 3 samples a frame, not 4/);
  assert.match(sentenceProblem(MANIFEST, { ...ok, values: [] }), /one frame or more/);
  const T = 3000;                          // 24 * T * T bytes of noise: 206 MB, over a 100 MB limit
  const long = { ...ok, T, states: new Float32Array(T * 4) };
  assert.equal(sentenceProblem(MANIFEST, long), "");
  assert.match(sentenceProblem(MANIFEST, long, 100 * 2 ** 20), /a sentence of 3000 tokens is too long for the browser: .* 206 MB, over 100 MB/);
  assert.ok(MAX_NOISE_BYTES >= noiseBytes({ noise: Array(3).fill({ dims: [32, 12, "T", "T"] }) }, 32, 128));   // bam-wc's longest
});

test("an error is its first line, after what failed", () => {
  assert.equal(oneLine("frame 2 failed", new Error("bad_alloc\n  at wasm-function[12]")), "frame 2 failed: bad_alloc");
  assert.equal(oneLine("the load failed", "no such file"), "the load failed: no such file");
  assert.equal(oneLine("the load failed", new RangeError("")), "the load failed: RangeError");
  assert.equal(oneLine("the load failed", undefined), "the load failed");
});

test("outputs are posted with their buffers; a shared or partial view is copied first", () => {
  const own = new Float32Array([1, 2]);
  const shared = new Float32Array(new SharedArrayBuffer(8));
  shared.set([3, 4]);
  const part = new Float32Array(new ArrayBuffer(16), 4, 2);
  part.set([5, 6]);
  const { outputs, buffers } = transferable({ a: { data: own, dims: [2] }, b: { data: shared, dims: [1, 2] }, c: { data: part, dims: [2] } });
  assert.equal(outputs.a.data, own);
  assert.notEqual(outputs.b.data, shared);
  assert.deepEqual([...outputs.b.data], [3, 4]);
  assert.ok(outputs.b.data.buffer instanceof ArrayBuffer);
  assert.deepEqual([...outputs.c.data], [5, 6]);
  assert.equal(outputs.c.data.buffer.byteLength, 8);
  assert.deepEqual(outputs.b.dims, [1, 2]);
  assert.deepEqual(buffers, [own.buffer, outputs.b.data.buffer, outputs.c.data.buffer]);
  const twice = transferable({ a: { data: own, dims: [2] }, b: { data: own, dims: [2] } });   // one buffer, listed once
  assert.equal(new Set(twice.buffers).size, 2);
});

test("buffersOf lists each owned buffer of nested typed arrays once, never a shared or partial one", () => {
  const own = new Float64Array([1, 2]);
  const shared = new Float32Array(new SharedArrayBuffer(8));
  const part = new Float32Array(new ArrayBuffer(16), 4, 2);
  const other = new Int16Array([3]);
  const found = buffersOf({ a: own, rows: { 3: { b: own, c: other, d: shared, e: part } }, n: 4, s: "x", z: null });
  assert.deepEqual(found, [own.buffer, other.buffer]);
});

test("a grid of the same base keeps the frames at the same values, whatever their order or index", () => {
  const old = [{ shape_k: 1 }, { shape_k: 2 }, { shape_k: 3 }];
  const frames = ["one", null, "three"];
  const typed = [{ shape_k: 1 }, { shape_k: 1.5 }, { shape_k: 2 }, { shape_k: 3 }];
  assert.deepEqual(carried(old, frames, typed), ["one", null, null, "three"]);
  const two = [{ a: 1, b: 2 }];
  assert.deepEqual(carried(two, ["x"], [{ b: 2, a: 1 }, { a: 1, b: 3 }]), ["x", null]);
  assert.deepEqual(carried([], [], [{ shape_k: 1 }]), [null]);
});

test("frames the page has already are never made, and a queue of only those is finished", () => {
  const q = new FrameQueue(5, 2, [2, 3]);
  const order = [];
  for (let i = q.next(); i >= 0; i = q.next()) { order.push(i); q.done(i); }
  assert.deepEqual(order, [1, 4, 0]);
  assert.ok(new FrameQueue(2, 0, [0, 1]).finished);
  assert.throws(() => new FrameQueue(2, 0, [2]), /a made frame is a frame 0 \.\. 1, not 2/);
});
