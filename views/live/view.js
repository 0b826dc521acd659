// The plumbing of the live views: the bus between them, one canvas chart (`Chart`), what every view
// shares (`View`: root element, tooltip, resize and visibility, paint bookkeeping) and what the two
// chart views share (`PayloadView`: a payload's header, arrays and style, the slider indices shown).
//
// A slider move sets window.bamviz.values[name], increments window.bamviz.seq and dispatches
// "bamviz:change" on window; the chart views repaint synchronously in that event.
import { message } from "./draw.js";
import { el, foldCaptions, setText, show } from "./dom.js";
import { clamp, finite, fmtG } from "./format.js";
import { nearestReady, sliderIndex, sliderValue } from "./indices.js";
import { LatestPayload } from "./latest.js";
import { LocalFrames } from "./local.js";
import { readArrays, readHeader } from "./payload.js";
import { RouteClient } from "./route.js";
import { pageStyle } from "./style.js";

const fetchPayload = (url) => fetch(url, { credentials: "same-origin" })
  .then((r) => { if (!r.ok) throw new Error(`${r.status} ${r.statusText}`); return r.arrayBuffer(); })
  .then((buffer) => new Uint8Array(buffer));

export const BUS = (window.bamviz = window.bamviz || {});
if (!BUS.values || typeof BUS.values !== "object") BUS.values = {};
if (!Number.isFinite(BUS.seq)) BUS.seq = 0;
if (!BUS.views) BUS.views = {};               // the mounted view of each kind (live.js)
if (!BUS.route) {
  BUS.route = new RouteClient((url) => fetch(url, { credentials: "same-origin" })
    .then((r) => { if (!r.ok) throw new Error(`${r.status} ${r.statusText}`); return r.json(); }));
}

// Whether this page makes its own sentence's frames now (local.js), with no problem: its charts need no
// server, and its captions follow once the sliders rest (sliders.js).
export function framesHere() {
  const local = BUS.local;
  const summary = BUS.views.summary;
  return !!(local && local.key && !local.problem && summary && summary.h && summary.h.sentence === local.key);
}

// Ask the server's live route for the charts at the sliders' values now (route.js): a Promise, or null
// when the page has no route (then a run of the page answers, as a rerun of the fragment).
export function askRoute() {
  const summary = BUS.views.summary;
  const h = summary && summary.h;
  if (!h || typeof h.route !== "string" || !h.route) return null;
  return BUS.route.ask(h.route, BUS.values, (a) => {
    summary.load(a.summary, {});
    const inside = BUS.views.inside;
    if (inside && typeof a.inside === "string") inside.load(a.inside, a.inside_meta);
  });
}

export const CHANGE = "bamviz:change";
// The frames this browser makes (local.js): one for the page.
const localFrames = () => BUS.local || (BUS.local = new LocalFrames(BUS, CHANGE));
const FLUSH_MS = 250;                   // off-screen charts are brought up to date this long after a move

// One canvas sized to its container's width (ResizeObserver) and a height from `height(width, s)`.
export class Chart {
  constructor(view, parent, { height, draw, hover }) {
    this.view = view;
    this.height = height;
    this.draw = draw;
    this.hover = hover;
    this.wrap = el("div", "bamviz-chart", parent);
    this.canvas = el("canvas", null, this.wrap);
    this.canvas.setAttribute("role", "img");
    this.ctx = this.canvas.getContext("2d");
    this.width = 0;
    this.sized = "";
    this.label = "";
    this.onScreen = true;                  // until the IntersectionObserver says otherwise
    this.dirty = false;
    view.resizer.observe(this.wrap);
    view.visibility.observe(this.wrap);
    if (hover) {
      this.wrap.addEventListener("mousemove", (e) => this.pointer(e));
      this.wrap.addEventListener("mouseleave", () => view.tooltip(null));
    }
  }

  pointer(e) {
    const r = this.canvas.getBoundingClientRect();
    let tip = null;
    try { tip = this.hover(e.clientX - r.left, e.clientY - r.top); } catch (err) { tip = null; }
    this.view.tooltip(tip, e.clientX, e.clientY);
  }

  paint() {
    const w = Math.floor(this.width);
    if (w < 20) return;                   // hidden, or not laid out yet: the ResizeObserver calls back
    const view = this.view;
    const s = view.textScale;
    const h = Math.round(typeof this.height === "function" ? this.height(w, s) : this.height * s);
    const dpr = window.devicePixelRatio || 1;
    const key = `${w}x${h}@${dpr}`;
    const c = this.canvas;
    if (key !== this.sized) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
      c.style.height = `${h}px`;
      this.sized = key;
    }
    this.dpr = dpr;
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const g = { ctx, w, h, s, fg: view.theme.fg, family: view.theme.family, grid: view.theme.grid, axis: view.theme.axis };
    let label = "";
    try {
      label = this.draw(g) || "";
    } catch (err) {
      console.warn("bamviz: a chart failed to draw", err);
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      message(g, "This chart could not be drawn from the data received.");
      label = "Chart not drawn";
    }
    if (label !== this.label) {
      this.label = label;
      c.setAttribute("aria-label", label);
    }
  }

  // What `key` determines, drawn once into an offscreen layer and then copied: the parts of a
  // chart that a slider move leaves alone cost one drawImage.
  layer(g, key, drawStatic) {
    const full = `${this.sized}|${key}`;
    if (this.layerKey !== full) {
      const c = this.layerCanvas || (this.layerCanvas = document.createElement("canvas"));
      c.width = this.canvas.width;
      c.height = this.canvas.height;
      const ctx = c.getContext("2d");
      ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      this.layerKey = null;
      drawStatic({ ...g, ctx });
      this.layerKey = full;
    }
    g.ctx.save();
    g.ctx.setTransform(1, 0, 0, 1, 0, 0);
    g.ctx.drawImage(this.layerCanvas, 0, 0);
    g.ctx.restore();
  }
}

// What every instance shares: its root element, tooltip, resize handling, paint bookkeeping and
// the "bamviz:change" listener.
export class View {
  constructor(kind) {
    this.kind = kind;
    this.root = el("div", "bamviz-root");
    this.root.dataset.kind = kind;
    this.root.dataset.painted = "0";
    this.painted = 0;
    this.charts = [];
    this.textScale = 1;
    this.theme = { fg: "#31333f", family: "sans-serif", grid: "rgba(0,0,0,0.1)", axis: "rgba(0,0,0,0.4)" };
    this.themeKey = "";
    this.resizer = new ResizeObserver((entries) => this.resized(entries));
    // Charts off screen (and 200 px beyond) are not repainted on a slider move: they are marked
    // dirty, and painted when they come into view or after FLUSH_MS without a move.
    this.visibility = new IntersectionObserver((entries) => this.seen(entries), { rootMargin: "200px" });
    this.flushTimer = null;
    this.onChange = (e) => {
      try { this.changed((e && e.detail) || {}); } catch (err) { console.warn("bamviz: repaint failed", err); }
    };
    window.addEventListener(CHANGE, this.onChange);
  }

  attach(host) {
    if (this.root.parentNode !== host) host.appendChild(this.root);
  }

  destroy() {
    clearTimeout(this.pollTimer);
    window.removeEventListener(CHANGE, this.onChange);
    this.resizer.disconnect();
    this.visibility.disconnect();
    clearTimeout(this.flushTimer);
    this.root.remove();
  }

  seen(entries) {
    const now = [];
    for (const entry of entries) {
      const chart = this.charts.find((c) => c.wrap === entry.target);
      if (!chart) continue;
      chart.onScreen = entry.isIntersecting;
      if (chart.onScreen && chart.dirty) now.push(chart);
    }
    if (now.length && this.ready()) this.paint(now);
  }

  // Paint the dirty charts (off screen at the last move) one per task, so that a key press waits
  // for one chart's paint at most, never for all of them (the maps take tens of ms each on a busy
  // machine); then say none is left. A move in between starts the wait again (`paint`).
  flush() {
    this.flushTimer = null;
    const chart = this.charts.find((c) => c.dirty);
    if (!chart || !this.ready()) { if (!chart) this.root.dataset.dirty = "0"; return; }
    this.beforePaint();
    chart.dirty = false;
    chart.paint();
    const left = this.charts.filter((c) => c.dirty).length;
    this.root.dataset.dirty = String(left);
    if (left) this.flushTimer = setTimeout(() => this.flush(), 0);
  }

  chart(parent, spec) {
    const chart = new Chart(this, parent, spec);
    this.charts.push(chart);
    return chart;
  }

  // Theme colours and font from the page's CSS (Streamlit's --st-* variables); true if changed.
  readTheme() {
    const style = getComputedStyle(this.root);
    const fg = style.color || "#31333f";
    const family = style.fontFamily || "sans-serif";
    const key = `${fg}|${family}`;
    if (key === this.themeKey) return false;
    this.themeKey = key;
    const rgb = fg.match(/[\d.]+/g) || [49, 51, 63];
    const [r, gr, b] = rgb.slice(0, 3).map(Number);
    this.theme = { fg, family, grid: `rgba(${r},${gr},${b},0.12)`, axis: `rgba(${r},${gr},${b},0.45)` };
    return true;
  }

  setPresentation(on) {
    this.root.classList.toggle("presentation", !!on);
    foldCaptions(this.root, !!on);
    const s = on ? 1.25 : 1;
    const changed = s !== this.textScale;
    this.textScale = s;
    return changed;
  }

  resized(entries) {
    const changed = [];
    for (const entry of entries) {
      const chart = this.charts.find((c) => c.wrap === entry.target);
      const w = Math.floor(entry.contentRect.width);
      if (chart && w !== chart.width) { chart.width = w; changed.push(chart); }
    }
    if (!changed.length || !this.ready()) return;
    this.readTheme();
    this.paint(changed);
  }

  ready() { return true; }

  // Repaint `charts` (after the view's own per-paint work) and record the paint.
  paint(charts) {
    this.beforePaint();
    for (const chart of charts) {
      if (chart.onScreen) { chart.dirty = false; chart.paint(); } else chart.dirty = true;
    }
    this.markPainted();
    const dirty = this.charts.filter((c) => c.dirty).length;
    this.root.dataset.dirty = String(dirty);
    clearTimeout(this.flushTimer);
    if (dirty) this.flushTimer = setTimeout(() => this.flush(), FLUSH_MS);
  }

  beforePaint() {}

  markPainted() {
    this.painted += 1;
    this.root.dataset.painted = String(this.painted);
    this.root.dataset.seq = String(BUS.seq);
  }

  tooltip(tip, x, y) {
    if (!this.tip) this.tip = el("div", "bamviz-tip", this.root);
    if (!tip) { this.tip.hidden = true; return; }
    setText(this.tip, tip);
    this.tip.hidden = false;
    const box = this.root.getBoundingClientRect();
    const tw = this.tip.offsetWidth;
    const left = clamp(x - box.left + 12, 0, Math.max(0, box.width - tw));
    this.tip.style.left = `${left}px`;
    this.tip.style.top = `${y - box.top + 14}px`;
  }
}

// What the summary and inside views share: a payload's header (`h`), arrays (`a`) and style, and
// the slider indices they show.
export class PayloadView extends View {
  constructor(kind) {
    super(kind);
    this.h = null;
    this.a = {};
    this.note = el("p", "bamviz-note", this.root);
    this.note.hidden = true;
  }

  ready() { return !!this.h; }

  // A payload served as a file (views/components.py), with `meta`, which a rerun changes without a
  // new file (captions, colours, the server's slider values): latest.js decides what is applied.
  load(url, meta) {
    if (!this.payloads) this.payloads = new LatestPayload(fetchPayload, (bytes, m) => this.update(bytes, m));
    this.payloads.ask(url, meta);
  }

  // The page's poll while the server makes the grid's frames: the header's `poll` asks for the charts
  // again after `ms` (0: none), set again by every payload, so that one timer at a time runs, at the
  // interval the server's load asks for now (views/explorer.py, summary_bytes). The live route answers
  // it; without one, or when it fails, a rerun of the explorer's fragment does.
  poll(spec) {
    clearTimeout(this.pollTimer);
    this.pollTimer = null;
    const ms = spec && Number(spec.ms);
    if (!(ms > 0) || !this.args || typeof this.args.setStateValue !== "function") return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = null;
      this.polls = (this.polls || 0) + 1;
      const asked = askRoute();
      if (asked) asked.catch(() => this.pollByRun());
      else this.pollByRun();
    }, ms);
  }

  pollByRun() {
    try { this.args.setStateValue("poll", this.polls); } catch (err) { console.warn("bamviz: could not poll", err); }
  }

  // A new payload: arrays re-read only when the header's id changed; else only captions,
  // presentation and relative colours are applied, repainting just what they touch.
  update(bytes, meta) {
    const { header, blobStart } = readHeader(bytes);
    if (meta) {
      const { current, ...fields } = meta;
      Object.assign(header, fields);
      if (Array.isArray(current)) {
        if (header.slider) header.slider = { ...header.slider, current: current[0] };
        if (header.prior_slider) header.prior_slider = { ...header.prior_slider, current: current[1] };
      }
    }
    this.style = pageStyle(header.style);
    this.poll(header.poll);
    const themeChanged = this.readTheme();
    // for tests and benchmarks: which payload, and how many of its frames are made
    const ready = Array.isArray(header.ready) ? header.ready : [true];
    this.root.dataset.id = String(header.id == null ? "" : header.id);
    this.root.dataset.ready = String(ready.filter((r) => r === true).length);
    this.root.dataset.total = String(ready.length);
    const sameId = this.h && header.id != null && header.id === this.h.id;
    if (!sameId) {
      this.a = readArrays(bytes, header, blobStart);
      this.h = header;
      if (header.sentence) {
        this.served = { ...this.a };        // the server's arrays: the frames it made (a shared sentence's)
        this.servedReady = Array.isArray(header.ready) ? header.ready.slice() : [];
        if (this.kind === "summary") localFrames().sentence(header, this.a);
        if (this.kind === "summary") localFrames().asked(header);
        localFrames().fill(this);
      }
      this.setPresentation(!!header.presentation);
      this.structure();
      this.measure();
      this.paint(this.charts);
      return;
    }
    const old = this.h;
    this.h = header;
    if (header.sentence) {
      this.servedReady = Array.isArray(header.ready) ? header.ready.slice() : [];
      if (this.kind === "summary") localFrames().asked(header);
      localFrames().fill(this);
    }
    const scaleChanged = this.setPresentation(!!header.presentation);
    if (scaleChanged || themeChanged) { this.structure(); this.paint(this.charts); return; }
    const relative = !!old.relative !== !!header.relative ? this.relativeCharts() : [];
    if (relative.length) { this.paint(relative); return; }
    if (JSON.stringify(old.captions) !== JSON.stringify(header.captions)
        || JSON.stringify(old.captions_at) !== JSON.stringify(header.captions_at)) {
      this.indices();
      this.captions();
    }
  }

  relativeCharts() { return []; }

  structure() {}

  // Widths of charts the ResizeObserver has not reported yet (a first payload draws at once rather
  // than a frame later). Never on a slider move: it reads layout.
  measure() {
    for (const chart of this.charts) {
      if (!chart.width) chart.width = Math.floor(chart.wrap.getBoundingClientRect().width);
    }
  }

  // The indices shown: posterior i (nearest ready frame to the wanted one) and prior j.
  indices() {
    const h = this.h;
    const post = h.slider && Array.isArray(h.slider.values) && h.slider.values.length ? h.slider : null;
    const G = post ? post.values.length : 1;
    const want = post ? sliderIndex(post, BUS.values) : 0;
    const i = nearestReady(want, h.ready, G);
    const prior = h.prior_slider && Array.isArray(h.prior_slider.values) && h.prior_slider.values.length
      ? h.prior_slider : null;
    const j = prior ? sliderIndex(prior, BUS.values) : 0;
    this.idx = { post, prior, want, i, j };
    // A value typed off the grid is computed once the server's grid holds it: the nearest one shows till then.
    const typed = (sl) => sl && finite(BUS.values[sl.name]) && !sl.values.includes(BUS.values[sl.name]);
    const lines = [];
    if (post && (i !== want || typed(post))) {
      const v = fmtG(typed(post) ? BUS.values[post.name] : sliderValue(post, want));
      lines.push(i < 0 ? `computing ${post.name} = ${v}…` : `computing ${post.name} = ${v}… showing ${fmtG(sliderValue(post, i))}`);
    }
    if (typed(prior)) lines.push(`computing ${prior.name} = ${fmtG(BUS.values[prior.name])}… showing ${fmtG(sliderValue(prior, j))}`);
    setText(this.note, lines.join(" · "));
    show(this.note, lines.length > 0);
    return this.idx;
  }

  beforePaint() {
    this.indices();
    this.captions();
  }

  captions() {}

  // Which charts the moved slider changes; null: all.
  chartsFor() { return this.charts; }

  changed(detail) {
    if (!this.h) return;
    const charts = this.chartsFor(detail.name == null ? null : detail.name);
    if (charts.length) this.paint(charts);
    else this.root.dataset.seq = String(BUS.seq);     // up to date: nothing here depends on it
  }
}
