// The predictive distribution over the model's classes: E[f(z)] of each class as a bar, the 5–95%
// range of its samples as whiskers and f(softmax) marked, the class the other charts show in full
// colour. Past the header's `style.class_bars` the least probable classes are one bar, summed:
// `shownClasses` is bam_viz.plots.classes.shown_classes (tests/js/classes.test.mjs checks it
// against Python's answers).
import { axes, message, text, textWidth } from "./draw.js";
import { clamp, finite, fmtShort, shorten, tokenText } from "./format.js";
import { row } from "./payload.js";
import { linearTicks, scale } from "./scale.js";
import { fill } from "./style.js";

const NAME_CHARS = 28;                  // a class name longer than this is cut, in full in the tooltip

// {top, rest}: the classes drawn one by one, most probable first (ties: the lower index), and those
// summed in one bar. Every class where there are at most `most`; else the `most` - 1 most probable,
// with `target` in place of the last of them where it is not among them. NaN counts as least.
export function shownClasses(probs, target, most) {
  const value = (c) => (finite(probs[c]) ? probs[c] : -Infinity);
  const order = probs.map((_, c) => c).sort((a, b) => (value(b) - value(a)) || (a - b));
  if (order.length <= most) return { top: order, rest: [] };
  let top = order.slice(0, most - 1);
  if (!top.includes(target)) top = [...top.slice(0, -1), target];
  return { top, rest: order.filter((c) => !top.includes(c)) };
}

// The rows frame i draws: [{name, full, mc, lo, hi, soft, target, rest}] (lo, hi, soft NaN on the
// summed row). `classProbs` is the payload's (G, 4, C): E[f(z)], 5%, 95%, f(softmax).
export function classRows(h, classProbs, i, most) {
  const names = Array.isArray(h.classes) ? h.classes : [];
  const C = names.length;
  const [mc, lo, hi, soft] = [0, 1, 2, 3].map((k) => row(classProbs, C, i, k));
  const { top, rest } = shownClasses(mc, h.target, most);
  const rows = top.map((c) => ({ name: shorten(tokenText(names[c]), NAME_CHARS), full: tokenText(names[c]),
    mc: mc[c], lo: lo[c], hi: hi[c], soft: soft[c], target: c === h.target, rest: false }));
  if (rest.length) {
    const name = fill(h.labels && h.labels.class_rest ? h.labels.class_rest : "{n}", { n: rest.length });
    rows.push({ name, full: name, mc: rest.reduce((s, c) => s + (finite(mc[c]) ? mc[c] : 0), 0),
      lo: NaN, hi: NaN, soft: NaN, target: false, rest: true });
  }
  return rows;
}

export const ROW_PX = 20;               // one bar's height, before the text scale

// Draw `rows` (classRows) in chart state g; returns the layout the tooltip reads.
export function drawClasses(g, rows, colours) {
  if (!rows.length || !rows.some((r) => finite(r.mc))) { message(g, "Computing…"); return null; }
  let labelW = 0;
  for (const r of rows) labelW = Math.max(labelW, textWidth(g, r.name, 11, r.target ? "bold" : ""));
  const left = Math.ceil(Math.min(labelW, 0.45 * g.w)) + 10;
  const box = { x: left, y: 4 * g.s, w: g.w - left - 44 * g.s, h: rows.length * ROW_PX * g.s };
  const sx = scale(0, 1, box.x, box.x + box.w);
  const sy = (k) => box.y + (k + 0.5) * ROW_PX * g.s;
  axes(g, box, sx, () => 0, { xTicks: linearTicks(0, 1, 4) });
  const { ctx } = g;
  const barH = 0.62 * ROW_PX * g.s;
  rows.forEach((r, k) => {
    const y = sy(k);
    text(g, r.name, box.x - 6, y, { align: "right", baseline: "middle", weight: r.target ? "bold" : "" });
    if (!finite(r.mc)) return;
    const x1 = sx(clamp(r.mc, 0, 1));
    ctx.fillStyle = r.rest ? colours.rest : r.target ? colours.mc : colours.class_fill;
    ctx.fillRect(box.x, y - barH / 2, Math.max(1, x1 - box.x), barH);
    if (finite(r.lo) && finite(r.hi)) {
      ctx.save();
      ctx.strokeStyle = g.fg;
      ctx.lineWidth = 1.2;
      ctx.beginPath();
      ctx.moveTo(sx(clamp(r.lo, 0, 1)), y);
      ctx.lineTo(sx(clamp(r.hi, 0, 1)), y);
      ctx.stroke();
      ctx.restore();
    }
    let right = Math.max(x1, finite(r.hi) ? sx(clamp(r.hi, 0, 1)) : x1);
    if (finite(r.soft)) {
      const xs = sx(clamp(r.soft, 0, 1));
      const d = 4 * g.s;
      right = Math.max(right, xs + d);
      ctx.fillStyle = colours.softmax;
      ctx.beginPath();
      ctx.moveTo(xs, y - d);
      ctx.lineTo(xs + d, y);
      ctx.lineTo(xs, y + d);
      ctx.lineTo(xs - d, y);
      ctx.closePath();
      ctx.fill();
    }
    text(g, fmtShort(r.mc, 3), right + 4, y, { baseline: "middle", size: 10 });
  });
  return { box, rows, sy };
}

// The tooltip of the row under (x, y) in a layout from drawClasses.
export function hoverClasses(L, x, y) {
  if (!L || y < L.box.y || y > L.box.y + L.box.h || x < 0) return null;
  const k = Math.floor((y - L.box.y) / (L.box.h / L.rows.length));
  const r = L.rows[k];
  if (!r || !finite(r.mc)) return null;
  if (r.rest) return `${r.full}: E[f(z)] summed ${fmtShort(r.mc, 3)}`;
  const range = finite(r.lo) && finite(r.hi) ? ` · 5–95% ${fmtShort(r.lo, 3)}–${fmtShort(r.hi, 3)}` : "";
  const soft = finite(r.soft) ? ` · f(softmax) ${fmtShort(r.soft, 3)}` : "";
  return `${r.full}: E[f(z)] ${fmtShort(r.mc, 3)}${range}${soft}`;
}
