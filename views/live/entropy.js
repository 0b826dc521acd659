// The entropy bar of frame i, as bam_viz.plots.wording.entropy_parts has it: the payload's stats
// (bam_viz.live.frames.STATS) bring the total H[E p] and its two parts, the expected entropy and the
// plug-in mutual information, which add up to it; nothing here adds them up. The headline's
// bias-corrected MI is a different estimate, said beside the bar under its own name (the header's
// `labels.entropy_mi`). Pure functions: tests/js/entropy.test.mjs.
import { finite, fixed } from "./format.js";
import { frameSamples } from "./indices.js";
import { fill } from "./style.js";

const number = (v) => (finite(v) ? v : NaN);

// {total, segments, note} for stats `st` of frame i: the segments [{key, v, x0, x1}] run from 0 to the
// expected entropy and from there to the total, `key` naming the label and colour of each; `note` is
// "" where the headline's MI is the plug-in itself (a deterministic model, or fewer samples than its
// jackknife needs: the header's style.samples_needed), its number written as the headline writes it.
export function entropyBar(h, st, i) {
  const total = number(st.predictive_entropy);
  const aleatoric = number(st.expected_entropy);
  const segments = [
    { key: "aleatoric", v: aleatoric, x0: 0, x1: aleatoric },
    { key: "epistemic", v: number(st.mi_plugin), x0: aleatoric, x1: total },
  ];
  const needs = h.style && h.style.samples_needed ? h.style.samples_needed.mutual_information : NaN;
  const template = h.labels && typeof h.labels.entropy_mi === "string" ? h.labels.entropy_mi : "";
  const rule = h.style && h.style.se_digits;
  const said = h.stochastic !== false && frameSamples(h, i) >= needs && finite(st.mi) && template && rule;
  return { total, segments, note: said ? fill(template, { mi: fixed(st.mi, st.mi_se, rule) }) : "" };
}
