// Drawing on a canvas: text, lines, axes, bands, heatmaps, colour bars, messages and token labels.
// `g` is the drawing state of one paint: {ctx, w, h, s (text scale), fg, family, grid, axis}.
import { clamp, finite } from "./format.js";

export function font(g, px, weight = "") {
  g.ctx.font = `${weight} ${Math.round(px * g.s * 10) / 10}px ${g.family}`;
}

export function text(g, str, x, y, o = {}) {
  const { ctx } = g;
  ctx.save();
  font(g, o.size || 11, o.weight);
  ctx.fillStyle = o.color || g.fg;
  ctx.textAlign = o.align || "left";
  ctx.textBaseline = o.baseline || "alphabetic";
  if (o.rotate) {
    ctx.translate(x, y);
    ctx.rotate(o.rotate);
    ctx.fillText(str, 0, 0);
  } else {
    ctx.fillText(str, x, y);
  }
  ctx.restore();
}

export function textWidth(g, str, size = 11, weight = "") {
  font(g, size, weight);
  return g.ctx.measureText(str).width;
}

export function wrapLines(g, str, maxWidth) {
  const lines = [];
  for (const para of String(str).split("\n")) {
    let line = "";
    for (const word of para.split(/\s+/)) {
      const next = line ? `${line} ${word}` : word;
      if (line && g.ctx.measureText(next).width > maxWidth) { lines.push(line); line = word; } else line = next;
    }
    lines.push(line);
  }
  return lines;
}

export const crisp = (v) => Math.round(v) + 0.5;

// A straight segment; a thin horizontal or vertical one sits on the pixel grid (crisp).
export function segment(g, x0, y0, x1, y1, colour, o = {}) {
  const { ctx } = g;
  const thin = (o.width || 1) <= 1;
  if (thin && y0 === y1) y0 = y1 = crisp(y0);
  if (thin && x0 === x1) x0 = x1 = crisp(x0);
  ctx.save();
  ctx.strokeStyle = colour;
  ctx.lineWidth = o.width || 1;
  ctx.setLineDash(o.dash || []);
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  ctx.stroke();
  ctx.restore();
}

export const hline = (g, x0, x1, y, colour, o) => segment(g, x0, y, x1, y, colour, o);
export const vline = (g, x, y0, y1, colour, o) => segment(g, x, y0, x, y1, colour, o);

// Gridlines, the left and bottom axis lines, tick labels and axis titles of the plot area `box`.
// o: {xTicks, yTicks: [{v, label}], xLabels (default true), xTitle, yTitle, yLabelWidth}
export function axes(g, box, sx, sy, o = {}) {
  const { ctx } = g;
  const bottom = box.y + box.h;
  for (const t of o.yTicks || []) hline(g, box.x, box.x + box.w, sy(t.v), g.grid);
  if (o.xGrid !== false) for (const t of o.xTicks || []) vline(g, crisp(sx(t.v)) - 0.5, box.y, bottom, g.grid);
  hline(g, box.x, box.x + box.w, bottom, g.axis);
  vline(g, box.x, box.y, bottom, g.axis);
  ctx.save();
  font(g, 11);
  ctx.fillStyle = g.fg;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  let yw = 0;
  for (const t of o.yTicks || []) {
    ctx.fillText(t.label, box.x - 5, sy(t.v));
    yw = Math.max(yw, ctx.measureText(t.label).width);
  }
  if (o.xLabels !== false) {
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const t of o.xTicks || []) ctx.fillText(t.label, sx(t.v), bottom + 4 + (o.xLabelOffset || 0));
  }
  ctx.restore();
  if (o.xTitle) {
    text(g, o.xTitle, box.x + box.w / 2, bottom + 6 + (o.xLabelOffset || 0) + 13 * g.s,
      { align: "center", baseline: "top", size: 12 });
  }
  if (o.yTitle) {
    const x = box.x - 9 - Math.max(yw, o.yLabelWidth || 0) - 7 * g.s;
    text(g, o.yTitle, x, box.y + box.h / 2, { align: "center", baseline: "middle", size: 12, rotate: -Math.PI / 2 });
  }
}

// Left margin for a y axis: tick labels plus a rotated title.
export function yAxisMargin(g, ticks, title = true) {
  let w = 0;
  for (const t of ticks) w = Math.max(w, textWidth(g, t.label));
  return Math.ceil(w + 9 + (title ? 16 * g.s : 0) + 2);
}

// A polyline through (xs[k], ys[k]), broken wherever a coordinate is not finite.
export function polyline(g, xs, ys, o = {}) {
  const { ctx } = g;
  ctx.save();
  ctx.strokeStyle = o.colour;
  ctx.lineWidth = o.width || 1.5;
  ctx.lineJoin = "round";
  ctx.setLineDash(o.dash || []);
  ctx.beginPath();
  let pen = false;
  for (let k = 0; k < xs.length; k++) {
    if (!(finite(xs[k]) && finite(ys[k]))) { pen = false; continue; }
    if (pen) ctx.lineTo(xs[k], ys[k]); else ctx.moveTo(xs[k], ys[k]);
    pen = true;
  }
  ctx.stroke();
  if (o.markers) {
    ctx.fillStyle = o.colour;
    ctx.beginPath();
    for (let k = 0; k < xs.length; k++) {
      if (!(finite(xs[k]) && finite(ys[k]))) continue;
      ctx.moveTo(xs[k] + o.markers, ys[k]);
      ctx.arc(xs[k], ys[k], o.markers, 0, 2 * Math.PI);
    }
    ctx.fill();
  }
  ctx.restore();
}

// The area between y0s and y1s over xs, in runs of finite points.
export function band(g, xs, y0s, y1s, fill) {
  const { ctx } = g;
  ctx.save();
  ctx.fillStyle = fill;
  let start = -1;
  const flush = (end) => {
    if (start < 0 || end - start < 1) { start = -1; return; }
    ctx.beginPath();
    ctx.moveTo(xs[start], y1s[start]);
    for (let k = start + 1; k < end; k++) ctx.lineTo(xs[k], y1s[k]);
    for (let k = end - 1; k >= start; k--) ctx.lineTo(xs[k], y0s[k]);
    ctx.closePath();
    ctx.fill();
    start = -1;
  };
  for (let k = 0; k < xs.length; k++) {
    const ok = finite(xs[k]) && finite(y0s[k]) && finite(y1s[k]);
    if (ok && start < 0) start = k;
    if (!ok) flush(k);
  }
  flush(xs.length);
  ctx.restore();
}

// A rows x cols heatmap filling `rect`: cell colour from value(r, c) through `cmap` over [lo, hi];
// rows where greyRow(r) is true are `grey` ([r, g, b]); NaN cells are left blank.
let scratch = null;
export function heatmap(g, rect, rows, cols, valueAt, cmap, lo, hi, greyRow = () => false, grey = null) {
  if (rows < 1 || cols < 1) return;
  if (!scratch) scratch = document.createElement("canvas");
  if (scratch.width < cols || scratch.height < rows) {
    scratch.width = Math.max(scratch.width, cols);
    scratch.height = Math.max(scratch.height, rows);
  }
  const sctx = scratch.getContext("2d");
  const image = sctx.createImageData(cols, rows);
  const px = image.data;
  const k = 255 / (hi - lo || 1);
  const { lut } = cmap;
  for (let r = 0; r < rows; r++) {
    const isGrey = greyRow(r);
    for (let c = 0; c < cols; c++) {
      const o = (r * cols + c) * 4;
      let rgb;
      let base = 0;
      if (isGrey) rgb = grey;
      else {
        const v = valueAt(r, c);
        if (!finite(v)) continue;
        base = clamp(Math.round((v - lo) * k), 0, 255) * 3;
      }
      px[o] = rgb ? rgb[0] : lut[base];
      px[o + 1] = rgb ? rgb[1] : lut[base + 1];
      px[o + 2] = rgb ? rgb[2] : lut[base + 2];
      px[o + 3] = 255;
    }
  }
  sctx.putImageData(image, 0, 0);
  const { ctx } = g;
  ctx.save();
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(scratch, 0, 0, cols, rows, rect.x, rect.y, rect.w, rect.h);
  ctx.restore();
}

// A vertical colour bar in `rect`, low at the bottom; ticks [{t in [0, 1], label}] to its right and
// the title rotated beside them.
export function colourBar(g, rect, cmap, ticks, title) {
  const { ctx } = g;
  if (rect.h < 4) return;
  const grad = ctx.createLinearGradient(0, rect.y + rect.h, 0, rect.y);
  for (let k = 0; k <= 16; k++) grad.addColorStop(k / 16, cmap.css(k / 16));
  ctx.save();
  ctx.fillStyle = grad;
  ctx.fillRect(rect.x, rect.y, rect.w, rect.h);
  ctx.strokeStyle = g.axis;
  ctx.lineWidth = 1;
  ctx.strokeRect(crisp(rect.x), crisp(rect.y), Math.round(rect.w), Math.round(rect.h));
  font(g, 10);
  ctx.fillStyle = g.fg;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  let w = 0;
  for (const t of ticks) {
    const y = rect.y + rect.h * (1 - clamp(t.t, 0, 1));
    ctx.fillRect(rect.x + rect.w, Math.round(y), 3, 1);
    ctx.fillText(t.label, rect.x + rect.w + 5, y);
    w = Math.max(w, ctx.measureText(t.label).width);
  }
  ctx.restore();
  if (title) {
    text(g, title, rect.x + rect.w + 9 + w + 7 * g.s, rect.y + rect.h / 2,
      { size: 10, align: "center", baseline: "middle", rotate: Math.PI / 2 });
  }
}

export const colourBarWidth = (g, ticks, barW = 10) =>
  barW + 9 + Math.max(0, ...ticks.map((t) => textWidth(g, t.label, 10))) + 16 * g.s;

// Wrapped text centred in a thin box (charts that have nothing to draw say why).
export function message(g, str, box = { x: 1, y: 1, w: g.w - 2, h: g.h - 2 }) {
  const { ctx } = g;
  ctx.save();
  ctx.strokeStyle = g.grid;
  ctx.lineWidth = 1;
  ctx.strokeRect(crisp(box.x), crisp(box.y), Math.round(box.w) - 1, Math.round(box.h) - 1);
  font(g, 13);
  const lines = wrapLines(g, str, Math.max(40, box.w - 32));
  const lh = 18 * g.s;
  ctx.fillStyle = g.fg;
  ctx.globalAlpha = 0.8;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  const y0 = box.y + box.h / 2 - ((lines.length - 1) * lh) / 2;
  lines.forEach((line, k) => ctx.fillText(line, box.x + box.w / 2, y0 + k * lh));
  ctx.restore();
}

// Token labels along an axis, right-aligned at the tick: o.axis "y" writes them level, left of
// x = `at`, at heights `positions`; otherwise they hang below y = `at` at x `positions`, turned by
// o.angle (one rotation for all: each point is mapped into the turned frame).
export function tokenLabels(g, labels, positions, at, o = {}) {
  const { ctx } = g;
  const size = o.size || 10;
  const every = o.every || 1;
  ctx.save();
  font(g, size);
  ctx.fillStyle = g.fg;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const angle = o.axis === "y" ? 0 : o.angle || 0;
  const cos = Math.cos(angle);
  const sin = Math.sin(angle);
  if (angle) ctx.rotate(angle);
  for (let k = 0; k < labels.length; k += every) {
    const x = o.axis === "y" ? at : positions[k];
    const y = o.axis === "y" ? positions[k] : at;
    const bold = o.bold && o.bold(k);
    if (bold) font(g, size, "bold");
    ctx.fillText(labels[k], x * cos + y * sin, -x * sin + y * cos);
    if (bold) font(g, size);
  }
  ctx.restore();
}

// Font size (before the text scale) and stride for token labels `step` px apart: up to `max` px,
// at least 7 px, and every n-th label only where even 7 px labels would run together.
export function labelFit(g, step, max = 10) {
  const px = clamp(step * 1.2, 7, max * g.s);
  return { size: px / g.s, every: Math.max(1, Math.ceil((px * 0.75) / Math.max(step, 0.1))) };
}

// The widest of `labels` at `size`, remembered per labels array and font.
const labelWidths = new WeakMap();
export function maxLabelWidth(g, labels, size = 10) {
  font(g, size);
  const key = g.ctx.font;
  let known = labelWidths.get(labels);
  if (!known) labelWidths.set(labels, (known = new Map()));
  if (!known.has(key)) {
    let w = 0;
    for (const s of labels) w = Math.max(w, g.ctx.measureText(s).width);
    known.set(key, w);
  }
  return known.get(key);
}
