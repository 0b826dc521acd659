"""The panels' captions: short plain-language sentences for classroom use, each a pure function of
an `ExplainResult` (the sweep's, of a `Sweep`), read off its numbers. The live explorer gives them a
`bam_viz.live.result.FrameResult` instead: the same numbers, read from a slider grid's frame, so that
a slider release is captioned without running the model. What a caption reads of the sampled
weights goes through `row_summary` and `map_summary` (`bam_viz.inference.rows`), which both hold.

Captions are plain text: a token appears as it is shown (`display_token`), and a page that renders
a caption as Markdown escapes it first.
"""

from __future__ import annotations

import numpy as np

from bam_viz.core.labels import LABELS, entropy_bound_label, probability
from bam_viz.core.metrics import interval_multiplier
from bam_viz.core.task import entropy_bound
from bam_viz.core.text import display_token
from bam_viz.inference.result import ExplainResult
from bam_viz.plots import kit
from bam_viz.plots.format import samples_needed, se_digits, signed, with_se
from bam_viz.plots.style import CONFIDENT_SHARE, KL_DECADES, STD_RANGE, WEIGHT_RANGE
from bam_viz.plots.tokens import clip, shown_indices, window_text
from bam_viz.plots.wording import Facts, count, entropy_parts, headline_mi, mi_estimator, mi_how

__all__ = ["GAP_NAME", "gap_sentence", "key_density_caption", "layer_head_caption", "monte_carlo_caption",
           "prediction_caption", "prior_posterior_caption", "sampled_maps_caption", "se_help", "sweep_caption",
           "uncertainty_verdict"]

GAP_NAME = LABELS["gap"].removeprefix("Gap ")          # Deng et al.'s gap, "E[f(z)] − f(E[w])"


# ---- the panels ---------------------------------------------------------------------------------
def _tok(result: ExplainResult, i: int) -> str:
    """Token i in quotes, as it is shown (`display_token`)."""
    return "“" + display_token(result.tokens[i]) + "”"


def _off_softmax(result: ExplainResult) -> str:
    """Why E[w] is not softmax(psi), for the families where it is not (`AttentionFamily.mean_pull`);
    "" for the others."""
    family = Facts.of(result).family
    if family.mean_pull is None:
        return ""
    return (f"For {family.short_label} scores the mean of the normalised weights is not softmax(ψ): normalising "
            f"pulls it towards uniform, the more as {family.mean_pull}.")


def prior_posterior_caption(result: ExplainResult, layer: int, head: int, query: int,
                            shown: list[int] | None = None) -> str:
    facts = Facts.of(result)
    T = len(result.tokens)
    query = clip(query, T)
    idx = shown_indices(T, shown, query)
    row = result.row_summary(layer, idx).at(head, query)      # E[w]'s row of the query (`rows.RowSummary`)
    window = ""
    if keys := window_text(T, idx, "keys"):
        window = (f" The bars show {keys}: they hold {row.share:.2f} "
                  "of the query's mean attention E[w], and the rest falls on keys not shown.")
    if (reason := facts.deterministic(layer)) is not None:
        return f"{reason} Prior and posterior coincide.{window}"
    top = int(row.top)
    soft = float(kit.finite(result.softmax_weights[layer, head, query, top]))
    prior = float(kit.finite(result.prior_mean_weights(layer, head)[query, top]))
    if top not in idx:
        window = f" {_tok(result, top)} is not among the bars shown." + window
    mean, lo, hi = row.mean, row.lo, row.hi
    looks = f"blue bars: the posterior after the query {_tok(result, query)} looks at them"
    if facts.prior == "learned":
        bars = f"Grey bars: what the prior expects from the keys alone; {looks}."
    elif facts.prior == "alignment":
        bars = ("Grey bars: the prior p(z|x), which this model also samples from, so they match the "
                "blue bars up to sampling noise.")
    elif facts.prior == "fixed":
        bars = f"Grey bars: the prior, uniform over the keys (this model learns no prior); {looks}."
    else:
        bars = ("This model has no prior: its attention is random through dropout, so the grey bars "
                "repeat the blue ones.")
    bars += (" Each bar is the mean over its draws; the purple mark on each blue bar is softmax(ψ), the "
             + ("deterministic pass, and the dark one on each grey bar the prior's π." if facts.prior != "none"
                else "deterministic pass, dropout off."))
    against = f" (prior {prior:.2f})" if facts.prior != "none" else ""
    soft_top = f"the deterministic pass gives it {soft:.2f}"
    if facts.n_samples < 2:
        return (f"{bars} Here {_tok(result, query)} attends most to {_tok(result, top)}: "
                f"{mean:.2f} in the one draw{against}; {soft_top}. With {facts.samples()} the whiskers "
                f"have no width: draw at least 2 to see how much the weights vary.{window}")
    moved = ""
    # E[w] told from softmax(psi) by its 95% interval at the S draws (`interval_multiplier`), and by
    # more than the 2 decimals the sentence prints
    if abs(mean - soft) > max(interval_multiplier(facts.n_samples) * row.se, 0.005) and (why := _off_softmax(result)):
        moved = f" {why}"
    return (f"{bars} Whiskers span 5–95% of the sampled weights. Here {_tok(result, query)} attends most to "
            f"{_tok(result, top)}: {mean:.2f} on average{against}, between {lo:.2f} and {hi:.2f} "
            f"in 90% of samples; {soft_top}.{moved} Wide whiskers mean the model is unsure where to "
            f"look.{window}")


def key_density_caption(result: ExplainResult, layer: int, head: int, query: int, key: int) -> str:
    facts = Facts.of(result)
    T = len(result.tokens)
    query, key = clip(query, T), clip(key, T)
    if (reason := facts.no_density(layer)) is not None:
        return reason
    hyper = ", ".join(f"{k} = {v:.3g}" for k, v in result.hyper.items()) or "no hyperparameters"
    return (f"The dashed grey curve is the prior for {_tok(result, query)} → {_tok(result, key)}; "
            f"the blue curve is the posterior q the model actually samples from ({hyper}). The axis is "
            "log10, so one step is a factor of 10; each curve is scaled to its own peak so that both "
            "stay visible (hover for the density itself). A narrow blue curve means a confident, nearly "
            "fixed weight; moving the sliders reshapes both curves.")


def _row_sums(facts: Facts, over: str) -> str:
    """What a sampled map's rows sum to: 1 where every draw is a point of the simplex; with dropout on
    the weights (`Facts.attention_dropout`) only on average, as E[keep / (1 - p)] = 1."""
    if not facts.attention_dropout:
        return f"each row sums to 1{over}"
    top = f"{facts.weight_max:.2f}"
    return (f"dropout sets each weight to 0 with probability p = {facts.attention_dropout:g} and scales a kept "
            f"one by 1/(1 − p) = {top}, so each row sums to 1{over} only on average, to anything from 0 to {top}, "
            "and a weight can exceed 1")


def _absolute_scales(facts: Facts, std_max: float) -> str:
    """The fixed colour scales (`WEIGHT_RANGE`, `STD_RANGE`) and what passes their ends: a weight that
    dropout scaled past 1, or a std past 1/2. A weight in [0, 1] has a std of at most 1/2, but the
    std the map shows is estimated from the S draws (ddof 1, as `result.spread`), which reaches
    1/2 sqrt(S / (S - 1)) where half the draws are 0 and half 1 (a categorical's, at S = 2: 0.71)."""
    (w_lo, w_hi), (s_lo, s_hi) = WEIGHT_RANGE, STD_RANGE
    text = f"Colours are absolute, weights from {w_lo:g} to {w_hi:g} and std from {s_lo:g} to {s_hi:g}"
    past_std = std_max > s_hi
    if facts.weight_max > w_hi:
        return (f"{text}, so a pale orange map is a head that hardly varies; a weight dropout scaled past {w_hi:g}"
                + (f", like a std past {s_hi:g} (here {std_max:.3f}), takes" if past_std else " takes")
                + " the top colour.")
    text += " (the most a weight's std can be), so a pale orange map is a head that hardly varies."
    if past_std:
        text += (f" Estimated from {facts.samples()}, a std can pass {s_hi:g} (here {std_max:.3f}): such cells "
                 "take the top colour.")
    return text


def sampled_maps_caption(result: ExplainResult, layer: int, head: int, relative: bool = False,
                         shown: list[int] | None = None) -> str:
    facts = Facts.of(result)
    idx = shown_indices(len(result.tokens), shown)
    cells = result.map_summary(layer, idx).at(head)           # the std map's numbers (`rows.MapSummary`)
    window = ""
    if tokens := window_text(len(result.tokens), idx):
        # with dropout on the weights a row of E[w] sums to 1 only up to Monte Carlo noise
        less = "" if facts.attention_dropout else "less than 1, "
        window = (f" The maps show {tokens}, as queries and as keys: the cells shown in a row add up to {less}"
                  f"{cells.share:.2f} on average in the E[w] map, and "
                  "the rest falls on keys not shown.")
    grid = "Rows are queries, columns are keys." + window
    if (reason := facts.deterministic(layer)) is not None:
        return f"{reason} Head {head} gives the same map every time, so the std map is blank. {grid}"
    if facts.n_samples < 2:
        return (f"Only {facts.samples()} was drawn: the std map needs at least 2 to show where draws "
                f"disagree, so it is blank. {grid}")
    q, k = int(cells.query), int(cells.key)
    sums = _row_sums(facts, " over all its keys" if window else "")
    scale = ("Colours are relative: each scale stretches to the largest value shown, so the orange map "
             "looks busy even where every std is tiny." if relative else _absolute_scales(facts, cells.std_max))
    off = _off_softmax(result)
    return (f"The first map is E[w], the mean of the {facts.samples()}; the second is softmax(ψ), the "
            f"deterministic pass.{' ' + off if off else ''} Each small map after them is one random draw of "
            f"the attention (rows: queries, columns: keys; {sums}). The orange map shows where draws "
            f"disagree: most at {_tok(result, q)} → {_tok(result, k)} (std {cells.std_max:.3f}, mean over "
            f"cells {cells.std_mean:.3f}). {scale}{window}")


def _class(result: ExplainResult, c: int) -> str:
    """Class c's name as it is shown (`display_token`)."""
    return display_token(result.classes[c])


def _answer(result: ExplainResult) -> str:
    """The predicted class, said of the class shown: "positive", or "the model's answer is neutral"
    where the panel shows another class."""
    predicted = _class(result, result.predicted)
    return predicted if result.predicted == result.target else f"the model's answer is {predicted}"


def prediction_caption(result: ExplainResult) -> str:
    """The prediction panel's prose, for the class it shows (`result.target`)."""
    facts = Facts.of(result)
    i = result.target
    p_name = probability(_class(result, i))
    mc = float(result.mc_probs[i])
    mean_attention, softmax = float(result.mean_attention_probs[i]), float(result.softmax_probs[i])
    p = kit.finite(result.sample_probs[:, i])
    lo, hi = (float(p.min()), float(p.max())) if p.size else (mc, mc)
    verdict = _answer(result)
    bound = entropy_bound_label(len(result.classes))
    if not facts.stochastic_layers:
        return (f"This model's attention is deterministic: one pass gives {p_name} = {mc:.3f} "
                f"({verdict}), so E[f(z)], f(E[w]) and f(softmax) coincide and all of the uncertainty, "
                f"{result.predictive_entropy:.3f} nats (at most {bound}), is aleatoric. "
                f"{uncertainty_verdict(result)}")
    # The split is the bar's, H[E p] = E[H p] + the plug-in MI; the headline's MI is named apart (`EntropyParts`).
    parts = entropy_parts(result)
    headline = (f"The headline's mutual information, {headline_mi(result)}, is {mi_how(facts.n_samples)}, "
                "a different estimate: the plug-in is biased low at few samples." if facts.n_samples >= 3
                else f"The headline's mutual information is {mi_how(facts.n_samples)}.")
    entropy = (f"Of the total uncertainty, the predictive entropy H[E p] = {parts.total:.3f} nats (at most {bound}), "
               f"{parts.aleatoric:.3f} is aleatoric, the doubt each attention sample keeps on its own, and "
               f"{parts.epistemic:.3f} is epistemic, from the samples disagreeing: the plug-in mutual information, "
               f"the part that adds up to the total. {headline} {uncertainty_verdict(result)}")
    softmax_says = f"f(softmax) = {softmax:.3f} (purple dots)"
    if facts.n_samples < 2:
        mean = "" if facts.dropout else (f"; at one sample E[w] is that sample's weights, so f(E[w]) = "
                                         f"{mean_attention:.3f} (red dashes)")
        return (f"Only {facts.samples()} was drawn: it gives {p_name} = E[f(z)] = {mc:.3f} (green, {verdict}); the "
                f"deterministic pass, every stochastic layer at softmax(ψ), gives {softmax_says}{mean}. The gap "
                f"to the deterministic pass, {signed(mc - softmax)}, rests on one draw, and one sample cannot "
                f"disagree with itself, so the epistemic part is 0 until n_samples is at least 2. {entropy}")
    gap = " ".join(with_se(result, "gap", result.gap, sign=True))
    answer = f"the model's answer: {verdict}" if result.predicted == i else verdict
    spread = (f"Each of the {facts.samples()} gives its own {p_name}, from {lo:.2f} to {hi:.2f}. Averaging "
              f"them gives E[f(z)] = {mc:.3f} (green, {answer}).")
    if facts.dropout:      # the randomness is in the dropout masks, whose mean keeps every unit (inference.gaps)
        return (f"{spread} Dropout makes this model random, not drawn attention weights, so f(E[z]) is the "
                f"deterministic pass, dropout off: {softmax_says}, on the red dashes. The gap, {gap}, is what "
                f"averaging over dropout masks changes. {entropy}")
    gap_softmax = " ".join(with_se(result, "gap_softmax", result.gap_softmax, sign=True))
    return (f"{spread} One pass at their mean attention E[w] gives f(E[w]) = {mean_attention:.3f} (red "
            f"dashes: Deng et al.'s f(E[z])); BAM's deterministic pass, every stochastic layer at softmax(ψ), "
            f"gives {softmax_says}. The headline's gap E[f(z)] − f(E[w]) = {gap} is Jensen's gap at the mean "
            f"of the sampled attention; E[f(z)] − f(softmax) = {gap_softmax} is what predicting with the "
            f"deterministic pass gives up. The two differ by f(E[w]) − f(softmax) = "
            f"{signed(mean_attention - softmax)}, the shift of the weights' mean away from softmax(ψ). {entropy}")


def uncertainty_verdict(result: ExplainResult) -> str:
    """One plain sentence on how much uncertainty there is and where it comes from: "sure" under a
    tenth of the largest entropy over the model's classes (`CONFIDENT_SHARE` of ln K), and otherwise
    the larger of the entropy bar's two parts."""
    parts = entropy_parts(result)
    if parts.total < CONFIDENT_SHARE * entropy_bound(len(result.classes)):
        return "The model is sure of this sentence."
    if parts.epistemic >= parts.aleatoric:
        return "Most of the doubt comes from attention: the samples read the sentence differently."
    return "Most of the doubt is shared by every sample: the model finds the sentence itself mixed."


def layer_head_caption(result: ExplainResult, relative: bool = False) -> str:
    facts = Facts.of(result)
    if not facts.stochastic_layers:
        return ("Every layer of this model is deterministic (grey): its attention is a single "
                "softmax, so there is no spread and no KL to show.")
    spread, kl = kit.finite(result.spread), kit.finite(result.kl)
    sl = list(facts.stochastic_layers)
    parts = [facts.which_stochastic()]
    if facts.n_samples < 2:
        parts.append(f"With {facts.samples()} no head can vary, so every spread is 0: draw at least 2.")
    elif not kit.all_equal(spread[sl]):
        s_idx = np.unravel_index(int(spread[sl].argmax()), spread[sl].shape)
        parts.append(f"The most uncertain head is layer {sl[s_idx[0]]} head {s_idx[1]} "
                     f"(spread {spread[sl][s_idx]:.3f}).")
    else:                                  # one alignment shared by every head (categorical)
        parts.append(f"Every stochastic head varies alike (spread {spread[sl].max():.3f}).")
    no_prior = facts.no_prior()
    if no_prior is None:
        k_idx = np.unravel_index(int(kl[sl].argmax()), kl[sl].shape)
        parts.append(f"The head that moved furthest from its prior is layer {sl[k_idx[0]]} head {k_idx[1]} "
                     f"(KL {kl[sl][k_idx]:.3g} nats).")
    else:
        parts.append(f"{no_prior} Its grid is grey.")
    if relative:
        ticks = kit.ticks(*kit.relative_range(spread[sl]))["ticktext"]
        ranges = f"spread {ticks[0]} to {ticks[-1]}"
        if no_prior is None:
            ticks = kit.ticks(*kit.relative_range(kl[sl]))["ticktext"]
            ranges += f" and KL {ticks[0]} to {ticks[-1]} nats"
        parts.append(f"Colours are relative: they stretch over the stochastic heads' own range, {ranges}, "
                     "so a bright head is high compared with the others, not necessarily high in itself.")
    else:
        kl_scale = f" and KL on a log scale from 0 to 10{kit.superscript(KL_DECADES)} nats" if no_prior is None else ""
        # the std of a weight in [0, 1] is at most 1/2; dropout scales a kept weight past 1
        bound = " (the most a weight's std can be)" if facts.weight_max <= WEIGHT_RANGE[1] else ""
        parts.append(f"Colours are absolute: spread from 0 to 0.5{bound}{kl_scale}, "
                     "so a dark head is a certain one; turn on relative colour scales for contrast.")
    parts.append("The red square marks the head shown above.")
    return " ".join(parts)


# ---- Monte Carlo errors -------------------------------------------------------------------------
def gap_sentence(distinguishable: bool, half_width: str, *, name: str = GAP_NAME, remedy: bool = False) -> str:
    """Whether the gap `name` can be told from zero: whether its 95% interval, ± `half_width` (t SE
    at the samples drawn, `interval_multiplier`, written as the panel shows it, `se_digits`),
    excludes 0. `remedy` adds, to a gap that cannot, how the interval falls with more samples."""
    interval = f"its {LABELS['interval']}, ± {half_width},"
    if distinguishable:
        return f"The gap {name} is distinguishable from zero: {interval} excludes 0."
    return (f"The gap {name} is not distinguishable from zero: {interval} includes 0, so its sign cannot be "
            "told from Monte Carlo noise" + ("; the interval narrows as 1/√n_samples." if remedy else "."))


def se_help(result: ExplainResult, quantity: str) -> str:
    """The metric help's sentence on its error: "± 1 SE" and the estimator of `quantity` (a field
    of `result.se`), or why there is none."""
    se = result.se
    if not result.stochastic_layers:
        return "Exact: this model's attention is deterministic, so there is no Monte Carlo error."
    if getattr(se, quantity) is None:
        return f"No ± SE: it needs at least {samples_needed(quantity)} samples (n_samples = {se.n_samples})."
    return (f"Below the value: ± 1 standard error (SE) of the Monte Carlo estimate over the "
            f"{se.n_samples} attention samples; estimator: {se.ESTIMATORS[quantity]}.")


def monte_carlo_caption(result: ExplainResult) -> str:
    """Under the headline: whether Deng's gap E[f(z)] - f(E[w]) can be told from zero (its 95%
    interval, t at S - 1 df times its jackknife SE `result.se.gap`), or why the errors are missing."""
    se = result.se
    if not result.stochastic_layers:
        return "Deterministic attention: every number above is exact, with no Monte Carlo error."
    if se.gap is None:
        return (f"± SE needs at least 2 samples (n_samples = {se.n_samples}): one attention sample "
                "has no spread to measure the Monte Carlo error by, so the gap may be noise. "
                "Raise n_samples.")
    half = interval_multiplier(se.n_samples) * se.gap
    text = "Values are ± 1 SE. " + gap_sentence(result.gap_distinguishable, f"{half:.{se_digits(half)}f}", remedy=True)
    if se.mutual_information is None:
        text += " The mutual information's ± SE (a jackknife) needs at least 3 samples."
    return text


# ---- the sweep: prediction and doubt over a slider's whole range --------------------------------
def sweep_caption(sweep, current: float | None = None) -> str:
    """What the sweep shows, read off its numbers: where the samples start to disagree."""
    name = sweep.name
    mi = np.asarray(sweep.mutual_information)
    how = mi_estimator(sweep.n_samples)
    peak = int(np.argmax(mi))
    where = (f"The samples disagree most at {name} = {sweep.values[peak]:.3g} "
             f"(mutual information {mi[peak]:.3f} nats, {how})" if mi[peak] > 1e-3 else
             "The samples agree everywhere on this range (mutual information under 0.001 nats)")
    now = ""
    if current is not None:
        i = sweep.nearest(current)
        now = (f"; at {name} ≈ {sweep.values[i]:.3g}, E[f(z)] = {sweep.p_mc[i]:.3f} ± {sweep.p_mc_se[i]:.3f}, "
               f"f(E[w]) = {sweep.p_mean_attention[i]:.3f} and f(softmax) = {sweep.p_softmax[i]:.3f}")
    return (f"Green: E[f(z)] of {probability(display_token(sweep.target_name))}, the average over "
            f"{count(sweep.n_samples, 'attention sample')}, with a band of its {LABELS['interval']} "
            f"(± {interval_multiplier(sweep.n_samples):.2f} Monte Carlo standard errors); "
            f"red dashes: f(E[w]), one pass at the samples' mean attention; "
            f"purple dots: f(softmax), the deterministic pass; orange: the mutual information. "
            f"{where}{now}. Where the red line leaves the green band, averaging predictions is not predicting "
            f"at the mean attention; where the purple one does, the deterministic pass is not the model's answer.")
