// Indices on a slider's grid of values (a payload's `slider`: {name, scale, values, current}).
// Pure functions: tests/js/indices.test.mjs.
import { clamp, finite } from "./format.js";

// The index of the value nearest to v, as bam_viz.core.grids.nearest_index has it: in log distance
// on a log slider whose numbers are all positive, else in plain distance; ties go to the first.
export function nearestIndex(values, v, log) {
  if (!Array.isArray(values) || !values.length || !finite(v)) return 0;
  const inLogs = log && v > 0 && values.every((x) => x > 0);
  let best = 0;
  let bestDist = Infinity;
  for (let i = 0; i < values.length; i++) {
    const d = inLogs ? Math.abs(Math.log(values[i]) - Math.log(v)) : Math.abs(values[i] - v);
    if (d < bestDist) { best = i; bestDist = d; }
  }
  return best;
}

// A chart's index on a payload slider: from the browser's value (`browser`: name -> value), else
// the server's `current` index.
export function sliderIndex(slider, browser) {
  if (!slider || !Array.isArray(slider.values) || !slider.values.length) return 0;
  const v = browser[slider.name];
  if (finite(v)) return nearestIndex(slider.values, v, slider.scale === "log");
  return clamp(Number.isInteger(slider.current) ? slider.current : 0, 0, slider.values.length - 1);
}

// The ready frame nearest to `want` (right first on ties), or -1 when none is.
export function nearestReady(want, ready, n) {
  if (!Array.isArray(ready)) return want;
  for (let d = 0; d < n; d++) {
    if (want + d < n && ready[want + d] === true) return want + d;
    if (d && want - d >= 0 && ready[want - d] === true) return want - d;
  }
  return -1;
}

// The attention samples frame i drew (a payload's `frame_samples`), the header's `n_samples` where not said.
export function frameSamples(h, i) {
  const total = h && Number.isInteger(h.n_samples) ? h.n_samples : 0;
  const drawn = h && Array.isArray(h.frame_samples) ? h.frame_samples[i] : undefined;
  return Number.isInteger(drawn) && drawn > 0 ? drawn : total;
}

// How many standard errors frame i's 95% interval spans (a payload's `frame_interval_z`, Python's t
// quantile at the samples the frame drew, bam_viz.core.metrics.interval_multiplier); NaN where not sent.
export function frameIntervalZ(h, i) {
  const z = h && Array.isArray(h.frame_interval_z) ? h.frame_interval_z[i] : undefined;
  return typeof z === "number" && Number.isFinite(z) ? z : NaN;
}

export const sliderValue = (slider, i) => (slider && Array.isArray(slider.values) ? slider.values[i] : undefined);
