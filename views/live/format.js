// Numbers and tokens as the live charts write them. Pure functions: tests/js/format.test.mjs.

export const finite = Number.isFinite;
export const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

// Python's "{:.<p>g}".
export function fmtG(v, p = 3) {
  if (typeof v !== "number" || Number.isNaN(v)) return "nan";
  if (!finite(v)) return v > 0 ? "inf" : "-inf";
  if (v === 0) return "0";
  const [mantissa, exponent] = v.toExponential(p - 1).split("e");
  const exp = Number(exponent);
  const strip = (s) => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (exp < -4 || exp >= p) {
    return `${strip(mantissa)}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  }
  return strip(v.toFixed(Math.max(0, p - 1 - exp)));
}

const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
export const superscript = (n) => String(n).split("").map((c) => SUPERSCRIPT[c] || c).join("");

export const minus = (s) => s.replace(/^-/, "−");

// A tick label: plain decimals in a readable range, 10ⁿ for far decades.
export function fmtTick(v, step) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) {
    const e = Math.round(Math.log10(a));
    if (Math.abs(a / 10 ** e - 1) < 1e-9) return `${v < 0 ? "−" : ""}10${superscript(e)}`;
    return fmtG(v, 2);
  }
  if (step != null && step > 0) {
    const decimals = clamp(-Math.floor(Math.log10(step) + 1e-9), 0, 8);
    return minus(v.toFixed(decimals));
  }
  return minus(String(Number(v.toPrecision(6))));
}

// A short number for ticks and tooltips: p significant digits, plain decimals from 0.001 to 1e5.
export function fmtShort(v, p = 3) {
  if (!finite(v)) return "…";
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e5 || a < 1e-3) return minus(fmtG(v, p));
  return minus(String(Number(v.toPrecision(p))));
}

// Labels for `values` with as few significant digits (from 3) as tell them apart.
export function distinctLabels(values, fmt = fmtShort) {
  for (let p = 3; p < 10; p++) {
    const labels = values.map((v) => fmt(v, p));
    if (new Set(labels).size === labels.length) return labels;
  }
  return values.map((v) => fmt(v, 10));
}

// Tokens as visible text (invisible, control and bidi characters as \uXXXX), like display_token.
export function tokenText(token) {
  const text = String(token == null ? "" : token).replace(
    /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/gu,
    (ch) => `\\u${ch.codePointAt(0).toString(16).padStart(4, "0")}`);
  return text || "∅";
}

export const shorten = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

// ---- a Monte Carlo estimate at the precision of its standard error -------------------------------
// `rule` is the payload's `style.se_digits`, bam_viz.plots.format.se_digits as data: `digits`
// decimals, more for an error under one unit of the last of them, up to `max_digits`.
export function decimalsFor(se, rule) {
  return se > 0 && se < 10 ** -rule.digits ? Math.min(rule.max_digits, -Math.floor(Math.log10(se))) : rule.digits;
}

// An error too small for even `max_digits` decimals: its value is written in powers of ten.
export const tinyError = (se, rule) => finite(se) && se > 0 && se < 10 ** -rule.max_digits;

export function fixed(v, se, rule) {
  return tinyError(se, rule) ? minus(v.toExponential(1)) : minus(v.toFixed(decimalsFor(se, rule)));
}

// v with its sign to d decimals, never "−0.000": a value that rounds to zero reads "+0.000".
export function signed(v, d) {
  const r = v.toFixed(d);
  if (Number(r) === 0) return `+${Math.abs(v).toFixed(d)}`;
  return v > 0 ? `+${r}` : `−${Math.abs(v).toFixed(d)}`;
}

export function signedAt(v, se, rule) {
  if (!tinyError(se, rule)) return signed(v, decimalsFor(se, rule));
  return `${v >= 0 ? "+" : "−"}${Math.abs(v).toExponential(1)}`;
}
