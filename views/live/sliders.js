// The sliders view (sidebar): one range input per attention hyperparameter, on the grid of values
// the server sends, and its value typed in the readout: any value of the range (to the data's
// `exact_digits`), which the server's grid then holds as well (bam_viz.live.grid.slider_values). A
// move sets the bus's value and repaints the charts at once (synchronously, in "bamviz:change"); a
// release asks the server's live route for the charts at the new values after a debounce (view.js,
// `askRoute`), and sends the values to Session State (the URL, the sections below the charts) once the
// sliders rest, the data's `send_ms` after the last release (views/live_route.py,
// HYPER_SEND_MS): one run of the page for a student's run of presses, not one each. Without a route,
// or when it fails, the values go at once. A page that makes its own frames asks no route.
import { el, setText, show } from "./dom.js";
import { clamp, finite, fmtG } from "./format.js";
import { nearestIndex } from "./indices.js";
import { askRoute, BUS, CHANGE, framesHere, View } from "./view.js";

const DEBOUNCE_MS = 400;

export class SlidersView extends View {
  constructor() {
    super("sliders");
    this.rows = [];
    this.structure = "";
    this.timer = null;
    this.list = el("div", "bamviz-sliders", this.root);
    this.note = el("p", "bamviz-note", this.root);
  }

  update(data, args) {
    this.args = args;
    this.sendMs = Math.max(0, Number(data.send_ms) || 0);
    this.digits = Number.isInteger(data.exact_digits) ? data.exact_digits : 6;
    this.setPresentation(!!data.presentation);
    const sliders = (Array.isArray(data.sliders) ? data.sliders : []).filter(
      (s) => s && typeof s.name === "string" && Array.isArray(s.values) && s.values.length);
    this.sliders = sliders;
    const structure = JSON.stringify(sliders.map((s) => [s.name, s.values]));
    if (structure !== this.structure) {
      this.structure = structure;
      this.build(sliders);
    }
    setText(this.note, sliders.length ? "" : data.note || "");
    show(this.note, !sliders.length && !!data.note);
    // A new epoch is a reset from the server (model change, URL): its values win. Otherwise the
    // browser's values stand; the server's copy lags behind them.
    const epoch = data.epoch;
    let moved = false;
    if (epoch !== BUS.epoch) {
      BUS.epoch = epoch;
      clearTimeout(this.timer);
      this.timer = null;
      for (const s of sliders) {
        const v = s.values[nearestIndex(s.values, Number(s.current), s.scale === "log")];
        if (BUS.values[s.name] !== v) { BUS.values[s.name] = v; moved = true; }
      }
    } else {
      for (const s of sliders) {
        if (!finite(BUS.values[s.name])) {
          BUS.values[s.name] = s.values[nearestIndex(s.values, Number(s.current), s.scale === "log")];
          moved = true;
        }
      }
    }
    this.rows.forEach((r, k) => this.refresh(r, sliders[k]));
    if (moved) this.publish(null);
    this.markPainted();
  }

  build(sliders) {
    this.list.replaceChildren();
    this.rows = sliders.map((s, k) => {
      const row = el("div", "bamviz-slider", this.list);
      const head = el("div", "bamviz-slider-head", row);
      const label = el("label", "bamviz-slider-label", head);
      const readout = el("input", "bamviz-readout", head);
      readout.type = "text";
      readout.inputMode = "decimal";
      readout.spellcheck = false;
      readout.size = 7;
      const reset = el("button", "bamviz-reset", head, "↺");
      reset.type = "button";
      const input = el("input", "bamviz-range", row);
      input.type = "range";
      input.min = "0";
      input.max = String(s.values.length - 1);
      input.step = "1";
      input.id = `bamviz-${(this.args && this.args.key) || "sliders"}-${k}-${String(s.name).replace(/[^\w-]/g, "_")}`;
      label.htmlFor = input.id;
      const note = el("div", "bamviz-slider-caption", row);
      const r = { row, label, readout, reset, input, note, slider: s };
      readout.setAttribute("aria-label", `${s.name}: type a value`);
      readout.addEventListener("keydown", (event) => {
        if (event.key === "Enter") { event.preventDefault(); this.typed(r); }
        if (event.key === "Escape") { this.readout(r, BUS.values[r.slider.name]); readout.blur(); }
      });
      readout.addEventListener("change", () => this.typed(r));
      input.addEventListener("input", () => this.moved(r, Number(input.value)));
      input.addEventListener("change", () => this.scheduleSend());
      reset.addEventListener("click", () => {
        const t = r.slider.trained;
        if (!finite(t)) return;
        this.moved(r, nearestIndex(r.slider.values, t, r.slider.scale === "log"));
        this.scheduleSend();
      });
      return r;
    });
  }

  // Label, readout, reset button, caption and position of one slider, from the data and BUS.values.
  refresh(r, s) {
    r.slider = s;
    setText(r.label, s.label || s.name);
    r.label.title = s.help || "";
    r.input.setAttribute("aria-label", String(s.label || s.name));
    const log = s.scale === "log";
    const index = nearestIndex(s.values, BUS.values[s.name], log);
    if (r.input.value !== String(index)) r.input.value = String(index);
    if (document.activeElement !== r.readout) this.readout(r, finite(BUS.values[s.name]) ? BUS.values[s.name] : s.values[index]);
    const trained = finite(s.trained) ? s.trained : null;
    r.reset.disabled = trained === null;
    r.reset.title = trained === null ? "No trained value" : `Back to the trained value ${fmtG(trained)}`;
    r.reset.setAttribute("aria-label", r.reset.title);
    let note = trained === null ? "no trained value" : `trained value: ${fmtG(trained)}`;
    if (s.dev_note) note += ` · ${s.dev_note}`;
    setText(r.note, note);
  }

  readout(r, v) {
    const shown = fmtG(v);
    const exact = finite(v) ? String(Number(v.toPrecision(this.digits))) : shown;
    r.readout.value = exact;
    r.input.setAttribute("aria-valuetext", shown);
  }

  // A value typed in the readout: any number of the slider's range (clamped into it, to `digits`
  // significant digits), sent at once; the charts show the nearest value made until the page has its frame.
  typed(r) {
    const s = r.slider;
    const raw = r.readout.value.trim();
    const [lo, hi] = [s.values[0], s.values[s.values.length - 1]];
    const range = `${s.name} takes a value from ${fmtG(lo)} to ${fmtG(hi)}`;
    const asked = raw === "" ? NaN : Number(raw);
    if (!finite(asked)) {
      setText(r.note, `${JSON.stringify(raw.slice(0, 40))} is not a number: ${range}`);
      this.readout(r, BUS.values[s.name]);
      return;
    }
    const v = Number(clamp(asked, lo, hi).toPrecision(this.digits));
    this.readout(r, v);
    if (v !== asked) setText(r.note, `${fmtG(asked)} is outside the range: ${range}`);
    if (v === BUS.values[s.name]) return;
    BUS.values[s.name] = v;
    const index = nearestIndex(s.values, v, s.scale === "log");
    if (r.input.value !== String(index)) r.input.value = String(index);
    this.publish(s.name, v);
    clearTimeout(this.timer);
    clearTimeout(this.hyperTimer);
    this.sendHyper();
  }

  moved(r, index) {
    const s = r.slider;
    const i = clamp(index | 0, 0, s.values.length - 1);
    if (r.input.value !== String(i)) r.input.value = String(i);
    const v = s.values[i];
    BUS.values[s.name] = v;
    this.readout(r, v);
    this.publish(s.name, v);
  }

  // Tell the chart instances (synchronously: they repaint inside dispatchEvent).
  publish(name, v) {
    BUS.seq += 1;
    const t0 = performance.now();
    window.dispatchEvent(new CustomEvent(CHANGE, { detail: { name, value: v, seq: BUS.seq } }));
    BUS.lastPaintMs = performance.now() - t0;
    this.markPainted();
  }

  scheduleSend() {
    clearTimeout(this.timer);
    clearTimeout(this.hyperTimer);
    this.timer = setTimeout(() => {
      this.timer = null;
      // This page makes its frames: the charts are here already, and the captions come with the values'
      // run once the sliders rest (from this page's frame there: local.js).
      if (framesHere()) {
        this.hyperTimer = setTimeout(() => this.sendHyper(), this.sendMs);
        return;
      }
      const asked = askRoute();
      if (!asked) { this.sendHyper(); return; }
      asked.catch(() => { clearTimeout(this.hyperTimer); this.sendHyper(); });
      this.hyperTimer = setTimeout(() => this.sendHyper(), this.sendMs);
    }, DEBOUNCE_MS);
  }

  sendHyper() {
    this.hyperTimer = null;
    const hyper = {};
    for (const s of this.sliders || []) {
      const v = BUS.values[s.name];
      hyper[s.name] = finite(v) ? v : s.current;
    }
    // A page making its frames sends the values with its frame there, for the captions: one run. A value
    // off the grid goes alone: the run makes a grid that holds it, whose frames the page then makes.
    const offGrid = (this.sliders || []).some((s) => !s.values.includes(hyper[s.name]));
    if (framesHere() && !offGrid && BUS.local.rest(hyper)) return;
    if (BUS.local) BUS.local.wanted = null;          // a frame wanted at the values before is sent no more
    try { this.args.setStateValue("hyper", hyper); } catch (err) { console.warn("bamviz: could not send", err); }
  }

  changed() { /* the sliders follow their own inputs */ }

  destroy() {
    clearTimeout(this.timer);
    clearTimeout(this.hyperTimer);
    super.destroy();
  }
}
