// DOM pieces of the live views: elements, legends, and the panels' prose (captions).
import { finite, fmtG } from "./format.js";
import { sliderValue } from "./indices.js";

export function el(tag, className, parent, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

export function setText(node, text) {
  const value = text == null ? "" : String(text);
  if (node.textContent !== value) node.textContent = value;
}

export function show(node, visible) {
  if (node.hidden === !visible) return;
  node.hidden = !visible;
}

// A legend: [{label, colour, kind: "line" | "dash" | "box" | "band" | "whisker", fill, dash}].
export function legend(parent, items) {
  const box = el("div", "bamviz-legend", parent);
  fillLegend(box, items);
  return box;
}

// The legend's keys made again when they changed (their words come with the payload).
export function fillLegend(box, items) {
  const key = JSON.stringify(items);
  if (box.dataset.items === key) return;
  box.dataset.items = key;
  box.replaceChildren();
  for (const item of items) {
    const entry = el("span", "bamviz-key", box);
    const swatch = el("i", `bamviz-swatch bamviz-swatch-${item.kind || "line"}${item.dash ? " bamviz-dashed" : ""}`, entry);
    swatch.style.setProperty("--c", item.colour);
    if (item.fill) swatch.style.setProperty("--f", item.fill);
    el("span", null, entry, item.label);
  }
}

// The payload's name for a quantity (bam_viz.core.labels), or the key itself where an old payload has none.
export function label(h, key) {
  const labels = h && h.labels && typeof h.labels === "object" ? h.labels : {};
  return typeof labels[key] === "string" ? labels[key] : key;
}

// A panel's prose: a <p class="bamviz-caption"> in a wrapper; presentation mode puts a "What this
// shows" toggle before it and hides it until the toggle is pressed (a teacher does the talking).
// Not a <details>: without a <summary> the browser writes its own "Details" over an open one.
export const FOLD_TITLE = "What this shows";

export function caption(parent) {
  const fold = el("div", "bamviz-fold", parent);
  fold.hidden = true;
  return el("p", "bamviz-caption", fold);
}

export function foldCaptions(root, folded) {
  for (const fold of root.querySelectorAll(".bamviz-fold")) {
    const text = fold.querySelector(":scope > .bamviz-caption");
    let toggle = fold.querySelector(":scope > .bamviz-fold-title");
    if (folded && !toggle) {
      toggle = el("button", "bamviz-fold-title", null, FOLD_TITLE);
      toggle.type = "button";
      toggle.setAttribute("aria-expanded", "false");
      toggle.addEventListener("click", () => {
        const open = toggle.getAttribute("aria-expanded") !== "true";
        toggle.setAttribute("aria-expanded", String(open));
        text.hidden = !open;
      });
      fold.prepend(toggle);
      text.hidden = true;
    } else if (!folded && toggle) {
      toggle.remove();
      text.hidden = false;
    }
  }
}

// Caption text; stale (and prefixed) when the indices shown differ from those it was written at.
export function setCaption(p, textValue, stale, staleNote) {
  const has = typeof textValue === "string" && textValue.trim() !== "";
  show(p.parentNode, has);
  if (!has) return;
  setText(p, stale ? `${staleNote}${textValue}` : textValue);
  p.classList.toggle("stale", !!stale);
}

// "(Written for shape_k = 3; updates when you release the slider.) " for the sliders that moved.
export function staleNote(pairs) {
  const moved = pairs.filter(([slider, shown, at]) => slider && shown !== at && finite(sliderValue(slider, at)));
  if (!moved.length) return "";
  const names = moved.map(([slider, , at]) => `${slider.name} = ${fmtG(sliderValue(slider, at))}`);
  return `(Written for ${names.join(", ")}; updates when you release the slider.) `;
}
