// Colour maps, scales and ticks. Pure functions: tests/js/scale.test.mjs.
import { clamp, finite, fmtTick } from "./format.js";

export function parseColour(c) {
  if (c.startsWith("#")) return [1, 3, 5].map((k) => parseInt(c.slice(k, k + 2), 16));
  return c.match(/[\d.]+/g).slice(0, 3).map(Number);
}

// A colour scale [[t, colour], ...] (t from 0 to 1, as Plotly's) as a 256-entry lookup table.
export function colourMap(stops) {
  const rgb = stops.map(([t, c]) => [t, parseColour(c)]);
  const lut = new Uint8ClampedArray(256 * 3);
  for (let k = 0; k < 256; k++) {
    const t = k / 255;
    let s = 0;
    while (s < rgb.length - 2 && t > rgb[s + 1][0]) s++;
    const [t0, c0] = rgb[s];
    const [t1, c1] = rgb[s + 1];
    const f = t1 > t0 ? clamp((t - t0) / (t1 - t0), 0, 1) : 0;
    for (let ch = 0; ch < 3; ch++) lut[k * 3 + ch] = Math.round(c0[ch] + f * (c1[ch] - c0[ch]));
  }
  return {
    lut,
    css(t) {
      const k = clamp(Math.round(t * 255), 0, 255) * 3;
      return `rgb(${lut[k]},${lut[k + 1]},${lut[k + 2]})`;
    },
  };
}

// [min, max] for a relative colour scale; equal values get a range around them (middle colour).
export function relativeRange(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) if (finite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!finite(lo)) return [0, 1];
  if (hi - lo <= 1e-5 * Math.max(Math.abs(lo), Math.abs(hi), 1e-30)) {
    const mid = (lo + hi) / 2;
    const half = Math.max(0.05 * Math.abs(mid), 1e-6);
    return [mid - half, mid + half];
  }
  return [lo, hi];
}

// A function from data to pixels; log=true maps log10(v) linearly.
export function scale(d0, d1, r0, r1, log = false) {
  const f = log ? (v) => Math.log10(v) : (v) => v;
  const a = f(d0);
  const b = f(d1);
  const k = (r1 - r0) / (b - a || 1);
  const s = (v) => r0 + (f(v) - a) * k;
  s.invert = (px) => { const u = a + (px - r0) / k; return log ? 10 ** u : u; };
  return s;
}

export function niceStep(span, n) {
  const raw = span / Math.max(1, n);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

// About n "nice" ticks inside [lo, hi]: [{v, label}].
export function linearTicks(lo, hi, n = 5) {
  if (!(finite(lo) && finite(hi)) || hi <= lo) return [];
  const step = niceStep(hi - lo, n);
  if (!(step > 0)) return [];
  const out = [];
  const first = Math.ceil(lo / step - 1e-9);
  for (let k = first; k * step <= hi + step * 1e-9 && out.length < 50; k++) {
    const v = Math.abs(k) < 1e-9 ? 0 : k * step;
    out.push({ v, label: fmtTick(v, step) });
  }
  return out;
}

// Log ticks: 1-2-5 in each decade when `px` pixels leave room for them, else decades (every n-th
// decade on a long range); a range inside one decade gets linear ticks.
export function logTicks(lo, hi, px, minGap = 46) {
  if (!(lo > 0 && hi > lo)) return [];
  const span = Math.log10(hi / lo);
  const make = (mults, every = 1) => {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      if (e % every) continue;
      for (const m of mults) {
        const v = Number((m * 10 ** e).toPrecision(12));
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push({ v, label: fmtTick(v) });
      }
    }
    return out;
  };
  const dense = make([1, 2, 5]);
  if (dense.length >= 2 && px / (3 * span) >= minGap) return dense;
  const decades = make([1], Math.max(1, Math.ceil((span * minGap) / Math.max(px, 1))));
  if (decades.length >= 2) return decades;
  return dense.length >= 2 ? dense : linearTicks(lo, hi, 3);
}
