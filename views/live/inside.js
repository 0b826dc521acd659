// The inside view: inside the attention of one layer, head, query and key (bam_viz.live.grid.inside_payload).
//   1  prior vs posterior: each key's mean weight with 5-95% whiskers, and the key's densities
//   2  the sampled attention maps, with their mean, the softmax weights and the std
//   3  every layer and head: the attention spread and KL(q || prior)
import { axes, band, colourBar, colourBarWidth, font, heatmap, labelFit, maxLabelWidth, message, polyline, text,
  tokenLabels, yAxisMargin } from "./draw.js";
import { caption, el, fillLegend, label, legend, setCaption, setText, show, staleNote } from "./dom.js";
import { clamp, distinctLabels, finite, fmtG, fmtShort, shorten, superscript, tokenText } from "./format.js";
import { frameSamples } from "./indices.js";
import { offsetOf, row } from "./payload.js";
import { linearTicks, relativeRange, scale } from "./scale.js";
import { PayloadView } from "./view.js";

export class InsideView extends PayloadView {
  constructor() {
    super("inside");
    const root = this.root;
    const p1 = el("section", "bamviz-panel", root);
    el("div", "bamviz-heading", p1, "1 · Prior vs posterior");
    const cols = el("div", "bamviz-cols", p1);
    const left = el("div", "bamviz-col bamviz-c3", cols);
    const right = el("div", "bamviz-col bamviz-c2", cols);
    this.barsTitle = el("div", "bamviz-title", left);
    this.barsLegend = legend(left, []);
    this.bars = this.chart(left, { height: 320, draw: (g) => this.drawBars(g), hover: (x, y) => this.hoverBars(x, y) });
    this.capBars = caption(left);
    this.densityTitle = el("div", "bamviz-title", right);
    this.densityLegend = legend(right, []);
    this.density = this.chart(right, { height: 320, draw: (g) => this.drawDensity(g) });
    this.capDensity = caption(right);

    const p2 = el("section", "bamviz-panel", root);
    this.mapsHeading = el("div", "bamviz-heading", p2);
    this.maps = this.chart(p2, { height: (w, s) => this.mapsHeight(w, s), draw: (g) => this.drawMaps(g), hover: (x, y) => this.hoverMaps(x, y) });
    this.capMaps = caption(p2);

    const p3 = el("section", "bamviz-panel", root);
    el("div", "bamviz-heading", p3, "3 · Where the uncertainty lives, every layer and head");
    const grids = el("div", "bamviz-cols", p3);
    const gl = el("div", "bamviz-col bamviz-half", grids);
    const gr = el("div", "bamviz-col bamviz-half", grids);
    el("div", "bamviz-title", gl, "Attention spread");
    el("div", "bamviz-subtitle", gl, "std of sampled weights, averaged over cells");
    this.spread = this.chart(gl, { height: (w, s) => this.gridHeight(s), draw: (g) => this.drawGrid(g, "spread"), hover: (x, y) => this.hoverGrid("spread", x, y) });
    el("div", "bamviz-title", gr, "KL(q ‖ prior)");
    el("div", "bamviz-subtitle", gr, "summed over queries and keys");
    this.kl = this.chart(gr, { height: (w, s) => this.gridHeight(s), draw: (g) => this.drawGrid(g, "kl"), hover: (x, y) => this.hoverGrid("kl", x, y) });
    this.capGrids = caption(p3);
  }

  structure() {
    const h = this.h;
    const c = this.style.colours;
    fillLegend(this.barsLegend, [
      { label: label(h, "prior_mean"), colour: c.prior, kind: "box" },
      { label: label(h, "posterior_mean"), colour: c.posterior, kind: "box" },
      { label: label(h, "whiskers"), colour: "currentColor", kind: "whisker" },
      { label: label(h, "softmax_weights"), colour: c.softmax },
      { label: label(h, "prior_pi"), colour: c.pi },
    ]);
    fillLegend(this.densityLegend, [
      { label: "prior", colour: c.prior, kind: "band", fill: c.prior_fill, dash: true },
      { label: "posterior", colour: c.posterior, kind: "band", fill: c.posterior_fill },
    ]);
    const tokens = Array.isArray(h.tokens) ? h.tokens.map(tokenText) : [];
    this.tokens = tokens;
    this.window = Array.isArray(h.window) ? h.window.filter((t) => Number.isInteger(t)) : tokens.map((_, k) => k);
    this.W = this.window.length;
    this.windowLabels = this.window.map((t) => shorten(tokens[t] != null ? tokens[t] : `#${t}`, 14));
    const tok = (t) => (Number.isInteger(t) && tokens[t] != null ? tokens[t] : "?");
    const int = (v) => (Number.isInteger(v) ? v : "?");
    setText(this.barsTitle, `Query ${tok(h.query)}: attention to each key\nlayer ${int(h.layer)}, head ${int(h.head)}`);
    setText(this.densityTitle, `${tok(h.query)} → ${tok(h.key)}\nprior and posterior density`);
    show(this.densityLegend, !h.density_message);
    setText(this.mapsHeading, `2 · Sampled attention maps, layer ${int(h.layer)} head ${int(h.head)}`);
    this.L = Number.isInteger(h.layers) ? h.layers : this.a.spread ? this.a.spread.shape[1] : 0;
    this.H = Number.isInteger(h.heads) ? h.heads : this.a.spread ? this.a.spread.shape[2] : 0;
    this.stochasticLayers = new Set(Array.isArray(h.stochastic_layers) ? h.stochastic_layers : []);
    this.layerLabels = [];
    for (let l = 0; l < this.L; l++) {
      this.layerLabels.push(this.stochasticLayers.has(l) ? `layer ${l}` : `layer ${l} (deterministic)`);
    }
    const maps = this.a.maps;
    this.M = maps && maps.shape.length === 4 ? maps.shape[1] : 0;
  }

  // posterior slider: everything; prior slider: bars, density, KL.
  chartsFor(name) {
    const { slider, prior_slider: prior } = this.h;
    if (name === null) return this.charts;
    if (slider && name === slider.name) return this.charts;
    if (prior && name === prior.name) return [this.bars, this.density, this.kl];
    return [];
  }

  relativeCharts() { return [this.maps, this.spread, this.kl]; }

  captions() {
    const { post, prior, i, j } = this.idx;
    const at = Array.isArray(this.h.captions_at) ? this.h.captions_at : [];
    const pairs = [[post, i, finite(at[0]) ? at[0] : i], [prior, j, finite(at[1]) ? at[1] : j]];
    const note = i >= 0 ? staleNote(pairs) : "";
    const c = this.h.captions || {};
    setCaption(this.capBars, c.bars, !!note, note);
    setCaption(this.capDensity, c.density, !!note, note);
    setCaption(this.capMaps, c.maps, !!note, note);
    setCaption(this.capGrids, c.grids, !!note, note);
  }

  // -- 1a: prior and posterior mean weight of each window key, with 5-95% whiskers.
  drawBars(g) {
    const { i, j } = this.idx;
    const W = this.W;
    if (!W) { message(g, "No tokens to show."); return "No attention bars"; }
    // rows: the samples' mean, their 5% and 95% quantiles, then softmax(ψ) (posterior) or π (prior)
    const prior = [0, 1, 2, 3].map((q) => row(this.a.prior_row, W, j, q));
    const post = i >= 0 ? [0, 1, 2, 3].map((q) => row(this.a.post_row, W, i, q)) : [[], [], [], []];
    let top = 0;                                  // the axis holds the bars and their whiskers
    for (const v of [...prior[0], ...post[0], ...prior[2], ...post[2], ...prior[3], ...post[3]]) if (finite(v)) top = Math.max(top, v);
    const ymax = Math.min(1, Math.max(0.05, top * 1.05));
    const yTicks = linearTicks(0, ymax, 4);
    const left = yAxisMargin(g, yTicks);
    const showLabels = W <= this.style.bar_labels_max;
    const labelW = showLabels ? Math.min(90 * g.s, maxLabelWidth(g, this.windowLabels, 10)) : 0;
    const bottom = showLabels ? labelW * Math.SQRT1_2 + 18 * g.s : 12 * g.s;
    const box = { x: left, y: 8 * g.s, w: g.w - left - 8 * g.s, h: 0 };
    box.h = Math.max(40, g.h - box.y - bottom);
    const sy = scale(0, ymax, box.y + box.h, box.y);
    const step = box.w / W;
    const cx = (k) => box.x + step * (k + 0.5);
    const keyIndex = this.window.indexOf(this.h.key);
    const { ctx } = g;
    if (keyIndex >= 0) {
      ctx.fillStyle = g.grid;
      ctx.fillRect(box.x + step * keyIndex, box.y, step, box.h);
    }
    axes(g, box, (v) => v, sy, { yTicks, yTitle: "attention weight" });
    const bw = Math.max(1, step * 0.36);
    const series = [
      { m: prior, colour: this.style.colours.prior, dx: -bw / 2 - 0.5, mark: this.style.colours.pi },
      { m: post, colour: this.style.colours.posterior, dx: bw / 2 + 0.5, mark: this.style.colours.softmax },
    ];
    ctx.save();
    ctx.beginPath();
    ctx.rect(box.x, box.y, box.w, box.h + 1);
    ctx.clip();
    for (const s of series) {
      ctx.fillStyle = s.colour;
      for (let k = 0; k < W; k++) {
        const v = s.m[0][k];
        if (!finite(v)) continue;
        const x = cx(k) + s.dx - bw / 2;
        ctx.fillRect(x, sy(Math.max(0, v)), bw, sy(0) - sy(Math.max(0, v)));
      }
    }
    ctx.strokeStyle = g.fg;              // whiskers in the text colour: visible on either theme
    ctx.globalAlpha = 0.75;
    ctx.lineWidth = 1;
    for (const s of series) {
      ctx.beginPath();
      for (let k = 0; k < W; k++) {
        const lo = s.m[1][k];
        const hi = s.m[2][k];
        if (!(finite(lo) && finite(hi))) continue;
        const x = cx(k) + s.dx;
        const cap = Math.min(bw * 0.35, 4);
        const y0 = sy(lo);
        const y1 = Math.max(sy(hi), box.y);
        ctx.moveTo(x, y0); ctx.lineTo(x, y1);
        ctx.moveTo(x - cap, y0); ctx.lineTo(x + cap, y0);
        if (sy(hi) >= box.y) { ctx.moveTo(x - cap, y1); ctx.lineTo(x + cap, y1); } else {
          // the 95% point is above the axis: an arrowhead says the whisker goes on
          ctx.moveTo(x - cap, box.y + cap); ctx.lineTo(x, box.y); ctx.lineTo(x + cap, box.y + cap);
        }
      }
      ctx.stroke();
    }
    // softmax(ψ) on each posterior bar, π on each prior bar: a short rule across the bar
    ctx.globalAlpha = 1;
    ctx.lineWidth = 2.5 * g.s;
    for (const s of series) {
      ctx.strokeStyle = s.mark;
      ctx.beginPath();
      for (let k = 0; k < W; k++) {
        const v = s.m[3][k];
        if (!finite(v)) continue;
        const x = cx(k) + s.dx;
        const y = sy(clamp(v, 0, ymax));
        ctx.moveTo(x - bw / 2 - 1, y); ctx.lineTo(x + bw / 2 + 1, y);
      }
      ctx.stroke();
    }
    ctx.restore();
    if (showLabels) {
      const fit = labelFit(g, step * Math.SQRT1_2);
      tokenLabels(g, this.windowLabels, this.window.map((_, k) => cx(k) + 3), box.y + box.h + 8, {
        angle: -Math.PI / 4, bold: (k) => k === keyIndex, ...fit });
    }
    this.barsLayout = { box, step, prior, post };
    return `Bars of the prior's and the posterior's mean attention over their samples, query ${this.tokens[this.h.query] || ""} to each of ${W} keys, with 5–95% whiskers and softmax(ψ) and π marked`;
  }

  hoverBars(x, y) {
    const L = this.barsLayout;
    if (!L || x < L.box.x || x > L.box.x + L.box.w || y < L.box.y || y > L.box.y + L.box.h) return null;
    const k = Math.floor((x - L.box.x) / L.step);
    if (k < 0 || k >= this.W) return null;
    const range = (m, mark) => (finite(m[0][k])
      ? `mean ${fmtG(m[0][k], 3)} [${fmtG(m[1][k], 2)}, ${fmtG(m[2][k], 2)}], ${mark} ${fmtG(m[3][k], 3)}` : "…");
    return `key ${this.windowLabels[k]} · prior ${range(L.prior, "π")} · posterior ${range(L.post, "softmax")}`;
  }

  // -- 1b: density of log10 S_ij for the selected query and key, prior and posterior.
  drawDensity(g) {
    const h = this.h;
    if (h.density_message) { message(g, String(h.density_message)); return String(h.density_message); }
    const { i, j } = this.idx;
    const q = i >= 0 ? this.curve(this.a.post_density, i) : null;
    const p = this.curve(this.a.prior_density, j);
    if (!q && !p) { message(g, i < 0 ? "Computing…" : "No density to draw."); return "No density"; }
    const qlo = q ? q.lo : p.lo;
    const qhi = q ? q.hi : p.hi;
    const plo = p ? p.lo : qlo;
    const phi = p ? p.hi : qhi;
    const lo = Math.min(qlo, Math.max(plo, qlo - 8)) - 0.1;
    const hi = Math.max(qhi, Math.min(phi, qhi + 8)) + 0.1;
    const yTicks = linearTicks(0, 1, 4);
    const left = yAxisMargin(g, yTicks);
    const box = { x: left, y: 8 * g.s, w: g.w - left - 12 * g.s, h: 0 };
    box.h = g.h - box.y - 44 * g.s;
    const sx = scale(lo, hi, box.x, box.x + box.w);
    const sy = scale(0, 1.08, box.y + box.h, box.y);
    axes(g, box, sx, sy, {
      xTicks: linearTicks(lo, hi, Math.max(2, Math.floor(box.w / 60))), yTicks,
      xTitle: String(h.density_label || "log10 S_ij"), yTitle: "density, each scaled to its peak" });
    const { ctx } = g;
    ctx.save();
    ctx.beginPath();
    ctx.rect(box.x, box.y, box.w, box.h);
    ctx.clip();
    const { prior, posterior, prior_fill: priorFill, posterior_fill: postFill } = this.style.colours;
    for (const [c, stroke, fill, dash] of [[p, prior, priorFill, [6, 4]], [q, posterior, postFill, []]]) {
      if (!c) continue;
      const xs = c.d.map((_, k) => sx(c.lo + ((c.hi - c.lo) * k) / Math.max(1, c.d.length - 1)));
      const ys = c.d.map((v) => sy(v / c.peak));
      band(g, xs, ys.map(() => sy(0)), ys, fill);
      polyline(g, xs, ys, { colour: stroke, width: 2, dash });
    }
    ctx.restore();
    return `Density of ${h.density_label || "log10 S_ij"} under the prior and the posterior`;
  }

  // Row k of a density array: {lo, hi, d (finite, >= 0), peak}, or null when there is nothing to draw.
  curve(arr, k) {
    if (!arr || arr.shape.length !== 2) return null;
    const values = row(arr, arr.shape[1], k);
    const [lo, hi] = values;
    if (!(finite(lo) && finite(hi)) || hi <= lo) return null;
    const d = values.slice(2).map((v) => (finite(v) && v > 0 ? v : 0));
    const peak = Math.max(0, ...d);
    return peak > 0 && d.length > 1 ? { lo, hi, d, peak } : null;
  }

  // -- 2: mean, std and sampled maps, three across, with two colour bars on the right.
  mapsLayout(w, s) {
    const W = this.W;
    const n = this.M;
    const cols = Math.min(3, Math.max(1, n));
    const rows = Math.max(1, Math.ceil(n / cols));
    const labels = W <= this.style.map_labels_max && W > 0;
    // a measured label column needs a context: the chart's own
    const g = { ctx: this.maps.ctx, s, family: this.theme.family };
    const lw = labels ? Math.min(80 * s, maxLabelWidth(g, this.windowLabels, 10)) + 6 : 2;
    const bars = 2 * (10 + 9 + 30 * s + 16 * s) + 12;
    const gap = 10 * s;
    const titleH = 16 * s;
    const avail = w - lw - bars - gap * (cols - 1);
    const map = clamp(Math.floor(avail / cols), 30, 300);
    return { W, n, cols, rows, labels, lw, gap, titleH, map, cellH: titleH + map + (labels ? lw : 4) + gap };
  }

  mapsHeight(w, s) {
    const L = this.mapsLayout(w, s);
    return Math.ceil(L.rows * L.cellH + 4);
  }

  drawMaps(g) {
    const { i } = this.idx;
    const maps = this.a.maps;
    const L = this.mapsLayout(g.w, g.s);
    if (!maps || !L.n || !L.W || maps.shape[2] !== L.W || maps.shape[3] !== L.W) {
      this.setMapBoxes([]);
      message(g, "No attention maps in the data.");
      return "No attention maps";
    }
    if (i < 0) { this.setMapBoxes([]); message(g, "Computing…"); return "Attention maps not computed yet"; }
    const W = L.W;
    const base = offsetOf(maps, i, 0, 0, 0);
    const plane = W * W;
    const relative = !!this.h.relative;
    const S = frameSamples(this.h, i);
    const titles = Array.isArray(this.h.map_titles) ? this.h.map_titles : [];
    const scales = Array.isArray(this.h.map_scales) ? this.h.map_scales : [];
    const isStd = (m) => scales[m] === "std";
    const names = [];
    for (let m = 0; m < L.n; m++) {
      const t = typeof titles[m] === "string" ? titles[m] : `map ${m + 1}`;
      names.push(isStd(m) && S > 0 ? `${t} (${S})` : t);
    }
    // fixed colour ranges (bam_viz.plots.style), or from 0 to the largest value shown
    const { weight_range: weightRange, std_range: stdRange, maps: cmaps } = this.style;
    let [wmin, wmax] = weightRange;
    let [smin, smax] = stdRange;
    if (relative) {
      wmin = 0; smin = 0;
      wmax = 0; smax = 0;
      for (let m = 0; m < L.n; m++) {
        for (let k = 0; k < plane; k++) {
          const v = maps.data[base + m * plane + k] * maps.scale;
          if (isStd(m)) smax = Math.max(smax, v); else wmax = Math.max(wmax, v);
        }
      }
      wmax = wmax > 0 ? wmax : 1e-6;
      smax = smax > 0 ? smax : 1e-6;
    }
    const layout = [];
    for (let m = 0; m < L.n; m++) {
      const r = Math.floor(m / L.cols);
      const c = m % L.cols;
      const x = L.lw + c * (L.map + L.gap);
      const y = r * L.cellH + L.titleH;
      const off = base + m * plane;
      const std = isStd(m);
      heatmap(g, { x, y, w: L.map, h: L.map }, W, W, (qr, kc) => maps.data[off + qr * W + kc] * maps.scale,
        std ? cmaps.std : cmaps.weight, std ? smin : wmin, std ? smax : wmax);
      g.ctx.strokeStyle = g.axis;
      g.ctx.lineWidth = 1;
      g.ctx.strokeRect(Math.round(x) - 0.5, Math.round(y) - 0.5, L.map + 1, L.map + 1);
      text(g, names[m], x + L.map / 2, y - 4 * g.s, { align: "center", size: 11 });
      if (L.labels) {
        const step = L.map / W;
        const pos = this.window.map((_, k) => y + step * (k + 0.5));
        const fit = labelFit(g, step);
        if (c === 0) tokenLabels(g, this.windowLabels, pos, x - 4, { axis: "y", ...fit });
        tokenLabels(g, this.windowLabels, this.window.map((_, k) => x + step * (k + 0.5)), y + L.map + 4, {
          angle: -Math.PI / 2, ...fit });
      }
      layout.push({ x, y, m, name: names[m], off });
    }
    // colour bars at the right, as tall as one map
    const bx = L.lw + L.cols * L.map + (L.cols - 1) * L.gap + 14;
    const barH = L.map;
    const by = L.titleH;
    const wTicks = linearTicks(wmin, wmax, 4).map((t) => ({ t: (t.v - wmin) / (wmax - wmin), label: t.label }));
    const sTicks = linearTicks(smin, smax, 4).map((t) => ({ t: (t.v - smin) / (smax - smin), label: t.label }));
    const range = (name, lo, hi) => (relative ? `${name}, relative` : `${name} ${fmtShort(lo)} to ${fmtShort(hi)}`);
    colourBar(g, { x: bx, y: by, w: 10, h: barH }, cmaps.weight, wTicks, range("weight", wmin, wmax));
    const bx2 = bx + colourBarWidth(g, wTicks) + 8;
    colourBar(g, { x: bx2, y: by, w: 10, h: barH }, cmaps.std, sTicks, range("std", smin, smax));
    this.mapsLayoutNow = { L, layout };
    this.setMapBoxes(layout.map((m) => ({ title: m.name, x: m.x + 1, y: m.y + 1, w: L.map - 2, h: L.map - 2 })));
    return `Attention maps of layer ${this.h.layer} head ${this.h.head}: ${names.join(", ")}, over ${W} tokens`;
  }

  // data-maps on the canvas: each map's title and box in canvas pixels (tests read the colours there).
  setMapBoxes(boxes) {
    const c = this.maps.canvas;
    if (!boxes.length) { delete c.dataset.maps; return; }
    const dpr = this.maps.dpr || 1;
    const px = (v) => Math.round(v * dpr);
    const json = JSON.stringify(boxes.map((b) => ({ title: b.title, x: px(b.x), y: px(b.y), w: px(b.w), h: px(b.h) })));
    if (c.dataset.maps !== json) c.dataset.maps = json;
  }

  hoverMaps(x, y) {
    const now = this.mapsLayoutNow;
    if (!now) return null;
    const { L, layout } = now;
    const maps = this.a.maps;
    for (const m of layout) {
      if (x >= m.x && x < m.x + L.map && y >= m.y && y < m.y + L.map) {
        const c = Math.floor(((x - m.x) / L.map) * L.W);
        const r = Math.floor(((y - m.y) / L.map) * L.W);
        const v = maps.data[m.off + r * L.W + c] * maps.scale;
        return `${m.name} · query ${this.windowLabels[r]} · key ${this.windowLabels[c]} · ${fmtG(v, 3)}`;
      }
    }
    return null;
  }

  // -- 3: layers x heads grids of the spread and of KL(q || prior).
  gridHeight(s) {
    return Math.max(150, Math.round(Math.max(1, this.L || 6) * 24 * s + 60 * s));
  }

  drawGrid(g, which) {
    const h = this.h;
    const { i, j } = this.idx;
    if (which === "kl" && h.kl_message) { message(g, String(h.kl_message)); return String(h.kl_message); }
    const { L, H } = this;
    if (!(L > 0 && H > 0)) { message(g, "No layers to show."); return "No grid"; }
    if (i < 0) { message(g, "Computing…"); return "Not computed yet"; }
    const raw = [];
    for (let l = 0; l < L; l++) {
      raw.push(which === "kl" ? row(this.a.kl, H, i, j, l) : row(this.a.spread, H, i, l));
    }
    const stochastic = (l) => this.stochasticLayers.has(l);
    const colour = which === "kl" ? raw.map((r) => r.map((v) => (finite(v) ? Math.log10(1 + Math.max(0, v)) : NaN))) : raw;
    let lo;
    let hi;
    let ticks;
    let title;
    if (h.relative) {
      const vals = [];
      colour.forEach((r, l) => { if (stochastic(l)) vals.push(...r); });
      [lo, hi] = relativeRange(vals);
      if (which === "kl") {
        const at = [0, 0.25, 0.5, 0.75, 1];
        const labels = distinctLabels(at.map((t) => 10 ** (lo + t * (hi - lo)) - 1));
        ticks = at.map((t, k) => ({ t, label: labels[k] }));
      } else {
        ticks = linearTicks(lo, hi, 4).map((t) => ({ t: (t.v - lo) / (hi - lo), label: t.label }));
      }
      title = which === "kl" ? "KL nats, relative" : "spread, relative";
    } else if (which === "kl") {
      const decades = this.style.kl_decades;          // log10(1 + KL) from 0 to this many decades
      lo = 0; hi = decades;
      ticks = Array.from({ length: decades + 1 }, (_, d) => ({
        t: Math.log10(1 + (d ? 10 ** d : 0)) / decades,
        label: d === 0 ? "0" : d < 4 ? String(10 ** d) : `${d === decades ? "≥" : ""}10${superscript(d)}`,
      }));
      title = "KL nats, log scale";
    } else {
      [lo, hi] = this.style.std_range;
      ticks = linearTicks(lo, hi, 5).map((t) => ({ t: (t.v - lo) / (hi - lo), label: t.label }));
      title = `spread ${fmtShort(lo)} to ${fmtShort(hi)}`;
    }
    const labels = this.layerLabels;
    const lw = maxLabelWidth(g, labels, 11) + 8;
    const barW = colourBarWidth(g, ticks);
    const box = { x: lw, y: 6 * g.s, w: Math.max(20, g.w - lw - barW - 14), h: 0 };
    box.h = g.h - box.y - 42 * g.s;
    const cmap = this.style.maps.value;
    heatmap(g, box, L, H, (l, hd) => colour[l][hd], cmap, lo, hi, (l) => !stochastic(l),
      this.style.deterministicRgb);
    const ch = box.h / L;
    const cw = box.w / H;
    tokenLabels(g, labels, labels.map((_, l) => box.y + ch * (l + 0.5)), box.x - 5, { axis: "y", size: 11 });
    const every = H > 6 ? 3 : 1;
    const { ctx } = g;
    ctx.save();
    font(g, 11);
    ctx.fillStyle = g.fg;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let hd = 0; hd < H; hd += every) ctx.fillText(String(hd), box.x + cw * (hd + 0.5), box.y + box.h + 4);
    ctx.restore();
    text(g, "head", box.x + box.w / 2, box.y + box.h + 20 * g.s, { align: "center", baseline: "top", size: 12 });
    if (Number.isInteger(h.layer) && Number.isInteger(h.head) && h.layer >= 0 && h.layer < L && h.head >= 0 && h.head < H) {
      ctx.save();
      ctx.strokeStyle = this.style.colours.selected;
      ctx.lineWidth = 2.5;
      ctx.strokeRect(box.x + cw * h.head + 1.5, box.y + ch * h.layer + 1.5, cw - 3, ch - 3);
      ctx.restore();
    }
    colourBar(g, { x: box.x + box.w + 10, y: box.y, w: 10, h: box.h }, cmap, ticks, title);
    this[`${which}Layout`] = { box, raw, L, H };
    return which === "kl"
      ? `Grid of KL(q ‖ prior) over ${L} layers and ${H} heads`
      : `Grid of attention spread over ${L} layers and ${H} heads`;
  }

  hoverGrid(which, x, y) {
    const lay = this[`${which}Layout`];
    if (!lay) return null;
    const { box, raw, L, H } = lay;
    if (x < box.x || x >= box.x + box.w || y < box.y || y >= box.y + box.h) return null;
    const hd = Math.floor(((x - box.x) / box.w) * H);
    const l = Math.floor(((y - box.y) / box.h) * L);
    if (!this.stochasticLayers.has(l)) return `layer ${l}, head ${hd} · deterministic`;
    const v = raw[l][hd];
    const limit = finite(this.h.float32_limit) ? this.h.float32_limit : Infinity;
    const kl = v >= limit * (1 - 1e-6) ? `KL > ${fmtG(limit, 2)} nats (beyond what the page's numbers hold)` : `KL ${fmtG(v, 3)} nats`;
    return `layer ${l}, head ${hd} · ${which === "kl" ? kl : fmtG(v, 3)}`;
  }
}
