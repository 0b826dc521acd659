import assert from "node:assert/strict";
import { test } from "node:test";

import { offsetOf, readArrays, readHeader, row, toBytes } from "../../views/live/payload.js";
import { PYTHON } from "./python.mjs";

const bytes = () => new Uint8Array(Buffer.from(PYTHON.wire.base64, "base64"));

test("the header of bytes from bam_viz.live.wire.pack", () => {
  const { header, blobStart } = readHeader(bytes());
  const { arrays, ...rest } = header;
  assert.deepEqual(rest, PYTHON.wire.header);
  assert.deepEqual(Object.keys(arrays), Object.keys(PYTHON.wire.arrays));
  assert.equal(blobStart % 4, 0);
});

test("the arrays of bytes from bam_viz.live.wire.pack, as wire.unpack reads them", () => {
  const data = bytes();
  const { header, blobStart } = readHeader(data);
  const a = readArrays(data, header, blobStart);
  for (const [name, want] of Object.entries(PYTHON.wire.arrays)) {
    assert.deepEqual(a[name].shape, want.shape, name);
    if (want.codes) {                                        // u2: value = code / 65535
      assert.deepEqual([...a[name].data], want.codes);
      assert.equal(a[name].scale, 1 / 65535);
    } else {
      assert.deepEqual([...a[name].data].map((v) => (Number.isNaN(v) ? null : v)), want.values, name);
      assert.equal(a[name].scale, 1);
    }
  }
  assert.deepEqual(row(a.stats, 3, 0), [0.5, -1.25, PYTHON.wire.arrays.stats.values[2]]);
  assert.deepEqual(row(a.maps, 3, 1).map((v) => Math.round(v * 65535)), PYTHON.wire.arrays.maps.codes.slice(3));
});

test("bytes that start anywhere in a buffer, and arrays at unaligned offsets, read the same", () => {
  const data = bytes();
  const shifted = new Uint8Array(data.byteLength + 1);
  shifted.set(data, 1);
  const view = toBytes(new DataView(shifted.buffer, 1, data.byteLength));
  const { header, blobStart } = readHeader(view);
  assert.deepEqual([...readArrays(view, header, blobStart).stats.data].slice(0, 2), [0.5, -1.25]);
  // a float32 array at offset 2 of the blob: copied out rather than viewed
  const spec = { arrays: { x: { offset: 2, shape: [1], dtype: "f4" } } };
  const raw = new Uint8Array(4 + 2 + 4);
  new DataView(raw.buffer).setFloat32(6, 1.5, true);
  assert.deepEqual([...readArrays(raw, spec, 4).x.data], [1.5]);
});

test("an array running past the bytes is left out; a short or broken payload throws", () => {
  const spec = { arrays: { x: { offset: 0, shape: [8], dtype: "f4" }, y: { offset: 0, shape: [1], dtype: "u2" } } };
  const a = readArrays(new Uint8Array(8), spec, 4);
  assert.equal(a.x, undefined);
  assert.deepEqual([...a.y.data], [0]);
  assert.throws(() => readHeader(new Uint8Array(2)), /too short/);
  assert.throws(() => readHeader(new Uint8Array([200, 0, 0, 0, 123])), /runs past/);
  assert.throws(() => readHeader(new Uint8Array([4, 0, 0, 0, ...Buffer.from("null")])), /not an object/);
  assert.equal(toBytes("text"), null);
  assert.equal(toBytes(new ArrayBuffer(3)).byteLength, 3);
});

test("offsets and rows: out of range is -1 and NaN", () => {
  const arr = { data: Float32Array.from([0, 1, 2, 3, 4, 5]), shape: [2, 3], scale: 1 };
  assert.equal(offsetOf(arr, 1, 2), 5);
  assert.equal(offsetOf(arr, 2, 0), -1);
  assert.equal(offsetOf(null, 0), -1);
  assert.deepEqual(row(arr, 3, 1), [3, 4, 5]);
  assert.deepEqual(row(arr, 4, 0), [0, 1, 2, NaN]);
  assert.deepEqual(row(arr, 2, 5), [NaN, NaN]);
});
