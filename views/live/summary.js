// The summary view: the headline estimates with their errors, the sweep over the posterior slider,
// and the prediction (histogram of the samples' probability of the class shown, the predictive
// distribution over every class, predictive entropy), at the frame of the posterior slider's value
// (bam_viz.live.grid.summary_payload). The class shown and its name come with the header
// (`target`, `labels.p`): nothing here names a class.
import { classRows, drawClasses, hoverClasses, ROW_PX } from "./classes.js";
import { axes, band, message, polyline, text, textWidth, vline, yAxisMargin } from "./draw.js";
import { caption, el, fillLegend, label, legend, setCaption, setText, show, staleNote } from "./dom.js";
import { entropyBar } from "./entropy.js";
import { clamp, finite, fixed, fmtG, fmtShort, shorten, signedAt } from "./format.js";
import { frameIntervalZ, frameSamples, sliderValue } from "./indices.js";
import { row } from "./payload.js";
import { linearTicks, logTicks, scale } from "./scale.js";
import { fill } from "./style.js";
import { PayloadView } from "./view.js";

const AXIS_TITLE_CHARS = 24;            // a rotated title along the sweep's upper plot; the panel's title has it all
const ENTROPY_COLOURS = { aleatoric: "aleatoric", epistemic: "mi" };   // the entropy bar's parts: their colours' roles

export class SummaryView extends PayloadView {
  constructor() {
    super("summary");
    const root = this.root;
    const head = el("section", "bamviz-panel bamviz-headline", root);
    const boxes = el("div", "bamviz-metrics", head);
    this.metrics = ["p_mc", "mean_attention", "gap", "softmax", "mi"].map((key) => {
      const box = el("div", "bamviz-metric", boxes);
      box.dataset.metric = key;
      return { key, label: el("div", "bamviz-metric-label", box), value: el("div", "bamviz-metric-value", box),
        sub: el("div", "bamviz-metric-sub", box) };
    });
    this.gapLine = el("p", "bamviz-gapline", head);
    this.capHeadline = caption(head);

    this.sweepPanel = el("section", "bamviz-panel", root);
    this.sweepTitle = el("div", "bamviz-title", this.sweepPanel);
    this.sweepLegend = legend(this.sweepPanel, []);
    this.sweep = this.chart(this.sweepPanel, {
      height: 340, draw: (g) => this.drawSweep(g), hover: (x, y) => this.hoverSweep(x, y) });
    this.capSweep = caption(this.sweepPanel);

    const pred = el("section", "bamviz-panel", root);
    const cols = el("div", "bamviz-cols", pred);
    const left = el("div", "bamviz-col bamviz-c3", cols);
    const right = el("div", "bamviz-col bamviz-c2", cols);
    this.histTitle = el("div", "bamviz-title", left);
    this.histLegend = legend(left, []);
    this.hist = this.chart(left, { height: 280, draw: (g) => this.drawHistogram(g), hover: (x, y) => this.hoverHistogram(x, y) });
    this.classTitle = el("div", "bamviz-title", right);
    this.classLegend = legend(right, []);
    this.classes = this.chart(right, {
      height: (w, s) => (this.classRowCount() * ROW_PX + 30) * s,
      draw: (g) => this.drawClassChart(g), hover: (x, y) => hoverClasses(this.classLayout, x, y) });
    this.entropyTitle = el("div", "bamviz-title", right);
    this.entropyLegend = legend(right, []);
    this.entropy = this.chart(right, { height: 130, draw: (g) => this.drawEntropy(g), hover: (x, y) => this.hoverEntropy(x, y) });
    this.entropyNote = el("p", "bamviz-note", right);
    this.capPrediction = caption(pred);
  }

  structure() {
    const h = this.h;
    const S = this.samples();
    const sl = h.slider;
    const c = this.style.colours;
    for (const m of this.metrics) setText(m.label, label(h, m.key));
    fillLegend(this.sweepLegend, [
      { label: label(h, "mc_band"), colour: c.mc, kind: "band", fill: c.mc_band },
      { label: label(h, "mean_attention"), colour: c.mean_attention, kind: "dash" },
      { label: label(h, "softmax"), colour: c.softmax, kind: "dash" },
      { label: `mutual information, ${label(h, "mi_estimator")}`, colour: c.mi },
    ]);
    fillLegend(this.histLegend, [
      { label: label(h, "mc"), colour: c.mc },
      { label: label(h, "mean_attention"), colour: c.mean_attention, kind: "dash" },
      { label: label(h, "softmax"), colour: c.softmax, kind: "dash" },
    ]);
    fillLegend(this.classLegend, [
      { label: label(h, "classes"), colour: c.mc, kind: "box" },
      { label: label(h, "class_whiskers"), colour: "currentColor", kind: "whisker" },
      { label: label(h, "softmax"), colour: c.softmax },
    ]);
    const K = Array.isArray(h.classes) ? h.classes.length : 0;
    setText(this.classTitle, `Predictive distribution over ${K} classes`);
    fillLegend(this.entropyLegend, [
      { label: label(h, "aleatoric"), colour: c[ENTROPY_COLOURS.aleatoric], kind: "box" },
      { label: label(h, "epistemic"), colour: c[ENTROPY_COLOURS.epistemic], kind: "box" },
    ]);
    show(this.sweepPanel, !!(sl && Array.isArray(sl.values) && sl.values.length));
    const p = label(h, "p");
    if (sl) setText(this.sweepTitle, `${p} and the mutual information at every ${sl.name} (${S} sample${S === 1 ? "" : "s"}, seed ${h.seed})`);
  }

  samples() {
    const p = this.a.p_samples;
    return Number.isInteger(this.h.n_samples) ? this.h.n_samples : p ? p.shape[1] : 0;
  }

  // Every chart depends on the posterior index only.
  chartsFor(name) {
    const sl = this.h.slider;
    return name === null || (sl && name === sl.name) ? this.charts : [];
  }

  // stats[i] as {p_mc: ..., ...}, by the header's names (bam_viz.live.frames.STATS); NaN when missing.
  stats(i) {
    const names = Array.isArray(this.h.stats) ? this.h.stats : [];
    const values = row(this.a.stats, names.length, i);
    const out = {};
    names.forEach((n, k) => { out[n] = values[k]; });
    return out;
  }

  beforePaint() {
    super.beforePaint();
    this.headline();
  }

  captions() {
    const { post, i } = this.idx;
    const at = Array.isArray(this.h.captions_at) ? this.h.captions_at : [];
    const note = i >= 0 && finite(at[0]) ? staleNote([[post, i, at[0]]]) : "";
    const c = this.h.captions || {};
    setCaption(this.capHeadline, c.headline, !!note, note);
    setCaption(this.capSweep, c.sweep, !!note, note);
    setCaption(this.capPrediction, c.prediction, !!note, note);
  }

  headline() {
    const { i } = this.idx;
    const st = this.stats(i);
    const stochastic = this.h.stochastic !== false;
    // the decimals' rule, the samples an error needs and the gap's sentences: the header's style
    const { se_digits: rule, samples_needed: needs, gap_sentence: sentence } = this.style;
    const err = (se, quantity) => (!stochastic ? "exact"
      : finite(se) ? `± ${fixed(se, se, rule)}` : `needs ≥ ${needs[quantity]} samples`);
    const num = (v, se) => (finite(v) ? fixed(v, se, rule) : "…");
    const [p, mean, gap, soft, mi] = this.metrics;
    const drawn = i >= 0 ? frameSamples(this.h, i) : this.samples();
    setText(p.value, num(st.p_mc, st.p_se));
    setText(p.sub, err(st.p_se, "p_target"));
    setText(this.histTitle, `${label(this.h, "p")} across ${drawn === 1 ? "1 attention sample" : `${drawn} attention samples`}`);
    setText(mean.value, num(st.p_mean_attention, NaN));
    setText(mean.sub, "one pass, E[w] over the samples");
    setText(gap.value, finite(st.gap) ? signedAt(st.gap, st.gap_se, rule) : "…");
    setText(gap.sub, `${err(st.gap_se, "gap")}${stochastic && finite(st.gap_se) ? " (jackknife)" : ""}`);
    setText(soft.value, num(st.p_softmax, NaN));
    setText(soft.sub, finite(st.gap_softmax)
      ? `gap ${signedAt(st.gap_softmax, st.gap_softmax_se, rule)} ${err(st.gap_softmax_se, "gap_softmax")}` : "…");
    setText(mi.value, num(st.mi, st.mi_se));
    const interval = finite(st.mi_lo) && finite(st.mi_hi)
      ? `${label(this.h, "mi_interval")} ${fixed(st.mi_lo, st.mi_se, rule)}–${fixed(st.mi_hi, st.mi_se, rule)}`
      : err(st.mi_se, "mutual_information");
    setText(mi.sub, stochastic ? interval : "exact");
    let line = "";
    // the 95% interval's half-width at the samples this frame drew: t from the header, not from here
    const half = frameIntervalZ(this.h, i) * st.gap_se;
    if (stochastic && finite(half) && finite(st.gap)) {
      const told = Math.abs(st.gap) > half;
      line = fill(told ? sentence.distinguishable : sentence.indistinguishable, { half_width: fixed(half, st.gap_se, rule) });
    }
    setText(this.gapLine, line);
    show(this.gapLine, !!line);
  }

  // -- sweep: E[f(z)] with its band and f(E[z]) on top, MI below, over every slider value.
  drawSweep(g) {
    const sl = this.h.slider;
    if (!sl || !Array.isArray(sl.values) || !sl.values.length) return "";
    const values = sl.values;
    const G = values.length;
    const log = sl.scale === "log" && values[0] > 0;
    const ready = Array.isArray(this.h.ready) ? this.h.ready : null;
    const rows = values.map((_, k) => (ready && ready[k] !== true ? null : this.stats(k)));
    const get = (name) => rows.map((r) => (r ? r[name] : NaN));
    const p = get("p_mc");
    const se = get("p_se");
    const half = se.map((v, k) => frameIntervalZ(this.h, k) * v);     // each frame's 95% interval, t at its samples
    const mf = get("p_mean_attention");
    const sm = get("p_softmax");
    const mi = get("mi");
    let miMax = 0;
    for (const v of mi) if (finite(v)) miMax = Math.max(miMax, v);
    const miTop = Math.max(0.01, 1.15 * miMax);
    const yTop = linearTicks(0, 1, 4);
    const yBot = linearTicks(0, miTop, 3);
    const left = Math.max(yAxisMargin(g, yTop), yAxisMargin(g, yBot));
    const box = { x: left, y: 22 * g.s, w: g.w - left - 14 * g.s, h: 0 };
    box.h = g.h - box.y - 44 * g.s;
    const gap = 14 * g.s;
    const top = { x: box.x, y: box.y, w: box.w, h: (box.h - gap) * 0.6 };
    const bot = { x: box.x, y: top.y + top.h + gap, w: box.w, h: box.h - gap - top.h };
    const lo = values[0];
    const hi = values[G - 1] > lo ? values[G - 1] : lo * 1.0001 + 1e-9;
    const sx = scale(lo, hi, box.x + 6, box.x + box.w - 6, log);
    const sTop = scale(0, 1, top.y + top.h, top.y);
    const sBot = scale(0, miTop, bot.y + bot.h, bot.y);
    const xTicks = log ? logTicks(lo, hi, box.w) : linearTicks(lo, hi, Math.max(2, Math.floor(box.w / 70)));
    const xs = values.map(sx);
    const c = this.style.colours;
    // the curves depend on the payload (and the frames this browser made, `filled`) alone: drawn once,
    // copied on every slider move
    this.sweep.layer(g, `${this.h.id}|${this.filled || 0}|${this.themeKey}|${g.s}`, (lg) => {
      axes(lg, top, sx, sTop, { xTicks, yTicks: yTop, xLabels: false, yTitle: shorten(label(this.h, "p"), AXIS_TITLE_CHARS) });
      axes(lg, bot, sx, sBot, { xTicks, yTicks: yBot, yTitle: "MI (nats)", xTitle: sl.name, yLabelWidth: 0 });
      const { ctx } = lg;
      ctx.save();
      ctx.beginPath();
      ctx.rect(top.x, top.y - 2, top.w, top.h + 4);
      ctx.clip();
      band(lg, xs, p.map((v, k) => sTop(clamp(v - half[k], 0, 1))), p.map((v, k) => sTop(clamp(v + half[k], 0, 1))), c.mc_band);
      polyline(lg, xs, sm.map(sTop), { colour: c.softmax, width: 2, dash: [2, 3] });
      polyline(lg, xs, mf.map(sTop), { colour: c.mean_attention, width: 2, dash: [6, 4] });
      polyline(lg, xs, p.map(sTop), { colour: c.mc, width: 3, markers: 2.5 });
      ctx.restore();
      ctx.save();
      ctx.beginPath();
      ctx.rect(bot.x, bot.y - 2, bot.w, bot.h + 4);
      ctx.clip();
      polyline(lg, xs, mi.map(sBot), { colour: c.mi, width: 2, markers: 2 });
      ctx.restore();
    });
    this.markers(g, sl, sx, top, bot);
    this.sweepLayout = { sx, xs, box, rows, name: sl.name, values };
    const n = rows.filter((r) => r && finite(r.p_mc)).length;
    return `Sweep of ${label(this.h, "p")} (E[f(z)], f(E[w]) and f(softmax)) and the mutual information over ${sl.name}, ${n} of ${G} values computed`;
  }

  // Vertical lines at the current and the trained value, labelled above the plot.
  markers(g, sl, sx, top, bot) {
    const want = this.idx.want;
    const now = sliderValue(sl, want);
    const trained = finite(sl.trained) ? sl.trained : null;
    const y0 = top.y;
    const y1 = bot.y + bot.h;
    const lines = [];
    const colour = this.style.colours.marker;
    const same = trained !== null && Math.abs(now - trained) <= 1e-9 * Math.max(1, Math.abs(trained));
    if (trained !== null && !same) lines.push({ v: trained, label: `trained ${fmtShort(trained)}`, dash: [2, 3] });
    if (finite(now)) lines.push({ v: now, label: same ? `now = trained ${fmtShort(now)}` : `now ${fmtShort(now)}`, dash: [] });
    lines.sort((a, b) => a.v - b.v);
    lines.forEach((line, k) => {
      const x = sx(line.v);
      if (!finite(x)) return;
      vline(g, x, y0, y1, colour, { dash: line.dash, width: 1.5 });
      // the rightmost line labels to its right, the other to its left; both kept inside the chart
      const right = lines.length === 1 ? x < g.w / 2 : k === lines.length - 1;
      const w = textWidth(g, line.label, 11);
      let tx = right ? x + 4 : x - 4 - w;
      tx = clamp(tx, 2, g.w - w - 2);
      text(g, line.label, tx, y0 - 6 * g.s, { size: 11, color: colour });
    });
  }

  hoverSweep(x, y) {
    const L = this.sweepLayout;
    if (!L || x < L.box.x || x > L.box.x + L.box.w || y < L.box.y || y > L.box.y + L.box.h) return null;
    let best = -1;
    let dist = Infinity;
    L.xs.forEach((px, k) => {
      const r = L.rows[k];
      if (r && finite(r.p_mc) && Math.abs(px - x) < dist) { dist = Math.abs(px - x); best = k; }
    });
    if (best < 0 || dist > 30) return null;
    const r = L.rows[best];
    const se = finite(r.p_se) ? ` ± ${fmtG(r.p_se, 2)}` : "";
    return `${L.name} = ${fmtShort(L.values[best])} · E[f(z)] ${fmtG(r.p_mc, 3)}${se} · f(E[w]) ${fmtG(r.p_mean_attention, 3)} · f(softmax) ${fmtG(r.p_softmax, 3)} · MI ${fmtG(r.mi, 2)}`;
  }

  // -- histogram of the class's probability over the samples of frame i; chance (1/K) dotted.
  drawHistogram(g) {
    const { i } = this.idx;
    if (i < 0) { message(g, "Computing…"); return "Histogram not computed yet"; }
    const p = this.a.p_samples;
    const S = p && p.shape.length === 2 ? p.shape[1] : 0;
    const samples = row(p, S, i).filter(finite).map((v) => clamp(v, 0, 1));
    const st = this.stats(i);
    const bins = new Array(20).fill(0);
    for (const v of samples) bins[clamp(Math.floor(v * 20), 0, 19)] += 1;
    const top = Math.max(1, ...bins);
    const yTicks = linearTicks(0, top * 1.1, 4).filter((t) => Number.isInteger(t.v));
    const left = yAxisMargin(g, yTicks);
    const box = { x: left, y: 8 * g.s, w: g.w - left - 12 * g.s, h: 0 };
    box.h = g.h - box.y - 50 * g.s;
    const sx = scale(0, 1, box.x, box.x + box.w);
    const sy = scale(0, top * 1.1, box.y + box.h, box.y);
    axes(g, box, sx, sy, { xTicks: linearTicks(0, 1, 5), yTicks, xTitle: label(this.h, "p"), yTitle: "number of samples", xLabelOffset: 8 * g.s });
    const c = this.style.colours;
    const { ctx } = g;
    ctx.save();
    ctx.globalAlpha = 0.6;
    ctx.fillStyle = c.posterior;
    bins.forEach((n, b) => {
      if (!n) return;
      const x0 = sx(b / 20) + 0.5;
      const x1 = sx((b + 1) / 20) - 0.5;
      ctx.fillRect(x0, sy(n), x1 - x0, sy(0) - sy(n));
    });
    ctx.globalAlpha = 0.7;
    ctx.fillStyle = c.posterior;
    const base = box.y + box.h;
    for (const v of samples) ctx.fillRect(Math.round(sx(v)) - 0.5, base + 2, 1, 6 * g.s);
    ctx.restore();
    const K = Array.isArray(this.h.classes) && this.h.classes.length ? this.h.classes.length : 2;
    vline(g, sx(1 / K), box.y, base, c.threshold, { dash: [1, 3] });
    if (finite(st.p_softmax)) vline(g, sx(clamp(st.p_softmax, 0, 1)), box.y, base, c.softmax, { dash: [2, 3], width: 2 });
    if (finite(st.p_mean_attention)) vline(g, sx(clamp(st.p_mean_attention, 0, 1)), box.y, base, c.mean_attention, { dash: [6, 4], width: 2 });
    if (finite(st.p_mc)) vline(g, sx(clamp(st.p_mc, 0, 1)), box.y, base, c.mc, { width: 2 });
    this.histLayout = { box, sx, bins };
    return `Histogram of ${label(this.h, "p")} over ${samples.length} sample${samples.length === 1 ? "" : "s"}`;
  }

  hoverHistogram(x, y) {
    const L = this.histLayout;
    if (!L || x < L.box.x || x > L.box.x + L.box.w || y < L.box.y || y > L.box.y + L.box.h) return null;
    const b = clamp(Math.floor(L.sx.invert(x) * 20), 0, 19);
    const n = L.bins[b];
    return `${label(this.h, "p")} ${(b / 20).toFixed(2)}–${((b + 1) / 20).toFixed(2)} · ${n} sample${n === 1 ? "" : "s"}`;
  }

  // -- the predictive distribution over every class at frame i (classes.js).
  classRowCount() {
    const K = this.h && Array.isArray(this.h.classes) ? this.h.classes.length : 2;
    const most = this.style && Number.isInteger(this.style.class_bars) ? this.style.class_bars : K;
    return K <= most ? K : most;
  }

  drawClassChart(g) {
    const { i } = this.idx;
    if (i < 0 || !this.a.class_probs) { message(g, "Computing…"); return "Predictive distribution not computed yet"; }
    const rows = classRows(this.h, this.a.class_probs, i, this.style.class_bars);
    this.classLayout = drawClasses(g, rows, this.style.colours);
    return `Predictive distribution: ${rows.map((r) => `${r.full} ${fmtShort(r.mc, 3)}`).join(", ")}`;
  }

  // -- the entropy of the predictive mean: the payload's total, stacked from its two parts (entropy.js).
  drawEntropy(g) {
    const { i } = this.idx;
    const st = i >= 0 ? this.stats(i) : null;
    const bar = st ? entropyBar(this.h, st, i) : null;
    const total = bar ? bar.total : NaN;
    const bound = this.h.entropy_bound;                     // ln K (bam_viz.core.task.entropy_bound)
    const name = label(this.h, "entropy");
    const most = `(at most ${label(this.h, "entropy_bound")})`;
    setText(this.entropyTitle, finite(total) ? `${name} ${fmtG(total)} nats ${most}` : `${name} ${most}`);
    setText(this.entropyNote, bar ? bar.note : "");
    show(this.entropyNote, !!(bar && bar.note));
    if (!st) { message(g, "Computing…"); return `${name} not computed yet`; }
    const xmax = Math.max(finite(bound) ? bound : 0, finite(total) ? total : 0, 1e-6);
    const box = { x: 10 * g.s, y: 20 * g.s, w: g.w - 24 * g.s, h: 0 };
    box.h = g.h - box.y - 44 * g.s;
    const sx = scale(0, xmax, box.x, box.x + box.w);
    const xTicks = linearTicks(0, xmax, Math.max(2, Math.floor(box.w / 60)));
    axes(g, box, sx, () => 0, { xTicks, xTitle: "nats" });
    const barY = box.y + box.h * 0.2;
    const barH = box.h * 0.65;
    const { ctx } = g;
    const outside = [];
    for (const part of bar.segments) {
      if (!finite(part.v) || !finite(part.x0) || !finite(part.x1) || part.v <= 0) continue;
      const x0 = sx(part.x0);
      const x1 = sx(part.x1);
      ctx.fillStyle = this.style.colours[ENTROPY_COLOURS[part.key]];
      ctx.fillRect(x0, barY, x1 - x0, barH);
      const number = fmtShort(part.v, 3);
      if (textWidth(g, number, 11) + 8 <= x1 - x0) {
        text(g, number, (x0 + x1) / 2, barY + barH / 2, { align: "center", baseline: "middle", color: "#1a1a1a" });
      } else {
        outside.push({ x: x0, label: `${part.key} ${number}` });
      }
    }
    if (outside.length) {            // too narrow to hold their numbers: written above the bar
      const line = outside.map((o) => o.label).join(" · ");
      const w = textWidth(g, line, 10);
      text(g, line, clamp(outside[0].x, 2, g.w - w - 30 * g.s), barY - 4, { size: 10 });
    }
    if (finite(bound)) {
      vline(g, sx(bound), box.y - 4, box.y + box.h, g.axis, { dash: [2, 3] });
      text(g, label(this.h, "entropy_bound_name"), clamp(sx(bound), 14, g.w - 14), box.y - 6, { align: "center", size: 10 });
    }
    this.entropyLayout = { sx, barY, barH, segments: bar.segments };
    const [al, ep] = bar.segments;
    return `${name} ${fmtG(total)} nats: ${al.key} ${fmtG(al.v)}, ${ep.key} ${fmtG(ep.v)}`;
  }

  hoverEntropy(x, y) {
    const L = this.entropyLayout;
    if (!L || y < L.barY || y > L.barY + L.barH) return null;
    const v = L.sx.invert(x);
    const part = L.segments.find((s) => finite(s.v) && v >= s.x0 && v <= s.x1);
    return part ? `${label(this.h, part.key)} ${fmtG(part.v, 3)} nats` : null;
  }
}
