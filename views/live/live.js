// bam-viz live component: the attention hyperparameter sliders and every chart they move, drawn in
// the browser on <canvas> 2D. No libraries.
//
// One module graph, mounted three times (Streamlit custom component v2): "sliders" (sidebar),
// "summary" and "inside" (main area). The server sends every slider value's result once; a slider
// move repaints the chart views synchronously (view.js has the bus); a release asks the server's live
// route for the charts at the new values (route.js), and the values go back to the server (Session
// State) once the sliders rest (sliders.js). views/components.py serves these modules and
// has Streamlit import this one, whose default export it calls again with the same parentElement
// whenever the data change.
//
//   live.js     this entry point: which view a call's data is for, and each view's mount and park
//   view.js     the bus, one canvas chart, what every view and what the two chart views share
//   sliders.js, summary.js, inside.js   the three views
//   classes.js  the predictive distribution over the model's classes (the summary's)
//   dom.js      elements, legends, captions
//   draw.js     the canvas kit: text, lines, axes, bands, heatmaps, colour bars, messages, token labels
//   scale.js    colour maps, scales and ticks
//   style.js    the colours, ranges and rules a payload's header brings (bam_viz.live.grid.page_style)
//   payload.js  the wire format (bam_viz/live/wire.py)
//   latest.js   which served payload a chart view draws, and its fetch tried again when it fails
//   route.js    a release or a poll answered by the server's live route, without a run of the page
//   local.js    the frames this browser makes where the server makes none (frame_worker.js runs the
//               model's graph with engine.js and random.js; frame.js reduces its outputs)
//   indices.js  indices on a slider's grid of values
//   format.js   numbers and tokens as text
// The pure modules (format, payload, latest, indices, scale, style) and classes.js's rule have unit tests in tests/js/.
import { el } from "./dom.js";
import { InsideView } from "./inside.js";
import { readHeader, toBytes } from "./payload.js";
import { SlidersView } from "./sliders.js";
import { SummaryView } from "./summary.js";
import { BUS } from "./view.js";

const VIEWS = { sliders: SlidersView, summary: SummaryView, inside: InsideView };

function kindOf(data) {
  if (data && typeof data === "object" && !ArrayBuffer.isView(data) && !(data instanceof ArrayBuffer)) {
    if (data.kind === "inside" && typeof data.url === "string") return "inside";   // a served payload
    return data.kind === "sliders" ? "sliders" : null;
  }
  const bytes = toBytes(data);
  if (!bytes) return null;
  const kind = readHeader(bytes).header.kind;
  return kind === "summary" || kind === "inside" ? kind : null;
}

export default function (args) {
  const { data, parentElement } = args || {};
  if (!parentElement) return undefined;
  const host = parentElement.querySelector(".bamviz-host") || parentElement;
  let kind = null;
  try {
    kind = kindOf(data);
  } catch (err) {
    console.warn("bamviz: unreadable data", err);
  }
  const readable = kind !== null;
  let view = parentElement.__bamvizView;
  if (!view && kind && PARKED.has(kind)) view = unpark(kind, parentElement);
  if (!kind && !view) {                      // nothing readable, nothing drawn before: say so
    if (!host.querySelector(".bamviz-empty")) el("p", "bamviz-note bamviz-empty", host, "Nothing to draw yet.");
    return undefined;
  }
  host.querySelectorAll(".bamviz-empty").forEach((node) => node.remove());
  if (!kind) kind = view.kind;               // odd data: keep drawing what was drawn
  else if (view && view.kind !== kind) {
    view.destroy();
    view = null;
  }
  if (!view) {
    view = new VIEWS[kind]();
    parentElement.__bamvizView = view;
    BUS.mounts[kind] = (BUS.mounts[kind] || 0) + 1;
  }
  BUS.views[kind] = view;                    // the live route's answer goes to the views mounted (view.js)
  view.attach(host);
  view.args = args;                          // the latest call's: its setStateValue is the live element's
  view.calls = (view.calls || 0) + 1;
  const call = view.calls;
  try {
    if (readable) {
      if (kind === "sliders") view.update(data, args);
      else if (typeof data.url === "string") view.load(data.url, data.meta);
      else view.update(toBytes(data));
    }
  } catch (err) {
    console.warn("bamviz: could not apply the data", err);
  }
  // Streamlit keeps the last call's cleanup for the unmount, and runs a superseded call's at once:
  // only the latest call's may tear the view down.
  return () => {
    if (view.calls !== call) return;
    if (parentElement.__bamvizView === view) delete parentElement.__bamvizView;
    park(view);
  };
}

// An unmounted view is parked for PARK_MS rather than destroyed: when Streamlit mounts the same kind
// again (a rerun that rebuilds the element, on a busy page), the new element adopts it with its
// arrays and canvases, instead of a blank panel that fetches its payload again while the
// student's key presses wait for it. One view a kind is drawn per page.
const PARK_MS = 5000;
const PARKED = new Map();                    // kind -> { view, timer }
if (!BUS.mounts) BUS.mounts = {};            // views made, by kind (tests and benchmarks)
if (!BUS.adopted) BUS.adopted = {};          // parked views taken up again, by kind

function park(view) {
  if (view.poll) view.poll(null);            // an unmounted panel does not poll
  if (BUS.views[view.kind] === view) delete BUS.views[view.kind];
  const old = PARKED.get(view.kind);
  if (old && old.view !== view) { clearTimeout(old.timer); old.view.destroy(); }
  view.root.remove();
  const timer = setTimeout(() => {
    if (PARKED.get(view.kind)?.view !== view) return;
    PARKED.delete(view.kind);
    view.destroy();
  }, PARK_MS);
  PARKED.set(view.kind, { view, timer });
}

function unpark(kind, parentElement) {
  const { view, timer } = PARKED.get(kind);
  clearTimeout(timer);
  PARKED.delete(kind);
  parentElement.__bamvizView = view;
  BUS.adopted[kind] = (BUS.adopted[kind] || 0) + 1;
  return view;
}
