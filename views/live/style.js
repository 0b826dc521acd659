// What the charts draw with, from the payload header's `style` (bam_viz.live.grid.page_style, whose
// values live in bam_viz.plots.style, format and captions): colours, colour scales and ranges,
// token label limits, the standard errors' decimals and the gap's sentences. Nothing here has a
// copy of its own. Pure functions: tests/js/style.test.mjs.
import { colourMap, parseColour } from "./scale.js";

const known = new Map();                     // JSON of a header's style -> what pageStyle made of it

// The header's `style` with its colour scales as lookup tables: the same object for the same style.
export function pageStyle(raw) {
  if (!raw || typeof raw !== "object" || !raw.colours) throw new Error("payload header has no style");
  const key = JSON.stringify(raw);
  if (known.has(key)) return known.get(key);
  const style = { ...raw };
  if (raw.scales) {
    style.maps = Object.fromEntries(Object.entries(raw.scales).map(([name, stops]) => [name, colourMap(stops)]));
  }
  if (raw.colours.deterministic) style.deterministicRgb = parseColour(raw.colours.deterministic);
  if (known.size >= 8) known.clear();
  known.set(key, style);
  return style;
}

// A sentence template's {name} fields filled from `values`.
export const fill = (template, values) => template.replace(/\{(\w+)\}/g, (whole, name) =>
  (Object.hasOwn(values, name) ? String(values[name]) : whole));
