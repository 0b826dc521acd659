import assert from "node:assert/strict";
import { test } from "node:test";

import {
  decimalsFor, distinctLabels, fixed, fmtG, fmtShort, fmtTick, shorten, signed, signedAt, superscript, tinyError,
  tokenText,
} from "../../views/live/format.js";
import { PYTHON } from "./python.mjs";

const RULE = PYTHON.style.summary.se_digits;

test("fmtG writes what Python's {:.<p>g} writes", () => {
  for (const [v, p, python] of PYTHON.fmt_g) assert.equal(fmtG(v, p), python, `${v} at ${p}`);
  assert.equal(fmtG(NaN), "nan");
  assert.equal(fmtG(Infinity), "inf");
  assert.equal(fmtG(-Infinity), "-inf");
  assert.equal(fmtG(0), "0");
});

test("the decimals of an estimate follow bam_viz.plots.format.se_digits", () => {
  for (const [se, digits] of PYTHON.se_digits) assert.equal(decimalsFor(se, RULE), digits, `se ${se}`);
  assert.equal(decimalsFor(NaN, RULE), RULE.digits);              // no error: the default decimals
});

test("a value is written to the decimals its error allows, in powers of ten below the last", () => {
  assert.equal(fixed(0.63512, 0.021, RULE), "0.635");
  assert.equal(fixed(0.63512, 0.00021, RULE), "0.6351");
  assert.equal(fixed(-0.0171, 0.002, RULE), "−0.017");
  assert.equal(fixed(0.5, 1e-7, RULE), "5.0e-1");
  assert.equal(fixed(0.5, NaN, RULE), "0.500");
  assert.ok(tinyError(1e-7, RULE) && !tinyError(1e-6, RULE) && !tinyError(NaN, RULE) && !tinyError(0, RULE));
});

test("signed values never read −0", () => {
  assert.equal(signed(-0.0001, 3), "+0.000");
  assert.equal(signed(0.0171, 3), "+0.017");
  assert.equal(signed(-0.0171, 3), "−0.017");
  assert.equal(signedAt(-0.0171, 0.002, RULE), "−0.017");
  assert.equal(signedAt(-2e-8, 1e-9, RULE), "−2.0e-8");
  assert.equal(signedAt(0, 1e-9, RULE), "+0.0e+0");
});

test("tick labels: plain decimals in a readable range, powers of ten beyond it", () => {
  assert.equal(fmtTick(0), "0");
  assert.equal(fmtTick(0.25, 0.05), "0.25");
  assert.equal(fmtTick(-0.5, 0.25), "−0.5");
  assert.equal(fmtTick(0.5, 0.05), "0.50");
  assert.equal(fmtTick(1e6), "10⁶");
  assert.equal(fmtTick(-1e-4), "−10⁻⁴");
  assert.equal(fmtTick(2e-4), "0.0002");
  assert.equal(fmtTick(3e5), "3e+05");
  assert.equal(superscript(-12), "⁻¹²");
});

test("short numbers, and labels with as few digits as tell them apart", () => {
  assert.equal(fmtShort(0.123456), "0.123");
  assert.equal(fmtShort(-2.5e-5), "−2.5e-05");
  assert.equal(fmtShort(NaN), "…");
  assert.deepEqual(distinctLabels([1.0001, 1.0002, 2]), ["1.0001", "1.0002", "2"]);
  assert.deepEqual(distinctLabels([0.5, 1.5]), ["0.5", "1.5"]);
});

test("tokens are shown as visible text", () => {
  assert.equal(tokenText("naïve"), "naïve");
  assert.equal(tokenText("a\u200bb"), "a\\u200bb");
  assert.equal(tokenText("\u202e"), "\\u202e");
  assert.equal(tokenText(""), "∅");
  assert.equal(tokenText(null), "∅");
  assert.equal(shorten("attention", 5), "atte…");
  assert.equal(shorten("head", 5), "head");
});
