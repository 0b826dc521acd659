// views/live/random.js against bam_viz.core.portable_random: tests/js/fixtures/random.json, made by
// `.venv/bin/python tests/js/make_random_fixture.py` (tests/test_portable_random.py fails when it is stale).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { streamKey, uniforms } from "../../views/live/random.js";

const { cases } = JSON.parse(readFileSync(new URL("./fixtures/random.json", import.meta.url), "utf8"));
const seedOf = (c) => (typeof c.seed === "string" ? BigInt(c.seed) : c.seed);
const name = (c) => `seed ${c.seed} site ${c.site} start ${c.start}`;

test("every float32 is Python's, for seeds up to 2**63 - 1, several sites and a start offset", () => {
  assert.ok(cases.length >= 20 && cases.some((c) => c.start > 0) && cases.some((c) => typeof c.seed === "string"));
  for (const c of cases) {
    assert.equal(streamKey(seedOf(c), c.site), c.key, name(c));
    const got = uniforms(seedOf(c), c.site, c.count, c.start);
    assert.ok(got instanceof Float32Array && got.length === c.count, name(c));
    assert.deepEqual([...got], c.values, name(c));
  }
});

test("a seed is the same number as a Number or a BigInt", () => {
  for (const c of cases.filter((x) => typeof x.seed === "number")) {
    assert.deepEqual(uniforms(BigInt(c.seed), c.site, c.count, c.start), uniforms(c.seed, c.site, c.count, c.start));
  }
});

test("a stream read from an offset is the same stream", () => {
  const whole = uniforms(2n ** 63n - 1n, 3, 300);
  assert.deepEqual(uniforms(2n ** 63n - 1n, 3, 100, 200), whole.subarray(200));
  assert.deepEqual(uniforms(2n ** 63n - 1n, 3, 0, 17), new Float32Array(0));
});

test("seeds, sites and ranges outside a stream are refused, not wrapped", () => {
  for (const seed of [-1, 0.5, 2 ** 53, NaN, "1", -1n, 2n ** 63n]) assert.throws(() => uniforms(seed, 0, 1), RangeError, String(seed));
  assert.throws(() => uniforms(0, -1, 1), RangeError);
  assert.throws(() => uniforms(0, 0, -1), RangeError);
  assert.throws(() => uniforms(0, 0, 1, -1), RangeError);
  assert.throws(() => uniforms(0, 0, 5, 2 ** 32 - 4), RangeError);
  assert.equal(uniforms(0, 0, 4, 2 ** 32 - 4).length, 4);
});
