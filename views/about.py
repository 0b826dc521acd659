"""About / theory: what BAM is and how to read the explorer's panels (text only)."""

import streamlit as st

from bam_viz import zoo
from views import state


def inference_k_finding() -> str | None:
    """The closing question's finding, read from bam-wc's card: its trained shape k and the inference
    k of lowest movies-dev NLL (`inference_selection`, written by `make inference-k`); None without it."""
    try:
        card = zoo.read_card(zoo.model_folder("bam-wc"))
    except zoo.CheckpointError:
        return None
    trained, chosen = (card.get("trained_hyper") or {}).get("shape_k"), state.dev_calibrated(card, "shape_k")
    if trained is None or chosen is None:
        return None
    k = state.format_value
    if chosen == trained:
        return (f"bam-wc was trained at *k* = {k(trained)}, and on held-out reviews (movies dev) its probabilities "
                "are best calibrated there too: sampling its attention more or less randomly does not help.")
    return (f"bam-wc was trained at *k* = {k(trained)}, yet on held-out reviews (movies dev) its probabilities are "
            f"best calibrated at *k* = {k(chosen)}, with {'more' if chosen < trained else 'less'} random attention "
            "than it saw in training.")


st.title("About: Bayesian Attention Modules")
st.markdown("""
**Ordinary attention** gives each word (the *query*) a fixed set of weights over the other words (the
*keys*): a softmax of scores, the same every time. **Bayesian Attention Modules** (Fan et al., NeurIPS
2020) treat those weights as *random*: each forward pass draws an attention map from a distribution
q, learned so that it stays close to a *prior* that looks only at the keys. Averaging predictions over
many draws tells you not just what the model thinks, but how sure it is *where to look*.

### The families in the zoo
- **softmax**: plain, deterministic attention. The baseline: every sample is the same.
- **mc-dropout**: softmax attention with dropout left on at test time; randomness without a prior.
- **bam-wc / bam-lc**: BAM with **Weibull** (shape *k*) or **Lognormal** (σ) unnormalised scores and
  a contextual **Gamma** / Lognormal prior; larger *k* or smaller σ means less random attention.
  The Gamma prior's rate β says how tightly the prior holds each score.
- **dirichlet**: the attention row itself is drawn from a Dirichlet; its concentration sets how
  close samples stay to their mean, softmax(ψ).
- **categorical**: hard attention: in the top layer the [CLS] query picks one key per draw, the same
  key for every head; the other queries keep their softmax.

Only the upper layers are stochastic; the lower ones stay ordinary and are shown in grey.

### How to read the explorer
1. **The prediction.** Each attention sample gives its own probability of each class (for the
   sentiment models, that the review is positive); the numbers are for the class shown ("Class
   shown": the predicted one unless you pick another). *E[f(z)]* averages those: the model's answer.
   *E[w]* is the mean of the sampled attention weights, and *f(E[w])* predicts once with it; this is
   Deng et al.'s *f(E[z])*, and the headline's gap *E[f(z)] − f(E[w])* shows that averaging
   predictions is not predicting at the average attention.
   *f(softmax)* is BAM's deterministic pass, every random layer at softmax(ψ), the mean of the
   unnormalised scores; *E[f(z)] − f(softmax)* is what predicting with that pass gives up. They stay
   close where E[w] is softmax(ψ), as for Dirichlet and categorical attention (exactly so in the first
   random layer; the layers above see keys that differ between samples). Weibull and Lognormal weights
   are scores divided by their sum, and their mean moves away from softmax(ψ), towards uniform, as *k*
   shrinks or σ grows. Each number carries ± 1 Monte Carlo standard error; the mutual information an
   interval.
   The entropy bar, the predictive entropy H[E p], at most ln K for K classes, splits the total
   uncertainty into *aleatoric* (the expected entropy: the sentence is ambiguous) and *epistemic*
   (attention samples disagree: the plug-in mutual information, which adds up with it to the total).
   The headline's mutual information is bias-corrected by the jackknife, a different estimate, and
   usually larger at few samples: it is written under the bar, not stacked on it.
2. **Prior vs posterior.** For one query word, bars show how much attention each key gets on average
   over the draws from the prior and from the posterior, with whiskers spanning 5–95% of them; a
   marker on each bar shows its softmax: π, the prior's, and softmax(ψ), the deterministic pass's.
   The curves on the right show the full distribution for one query–key pair.
3. **Sampled attention maps.** The mean of the sampled maps, E[w], next to softmax(ψ), the per-cell
   standard deviation and a few random draws of the whole attention map (rows: queries, columns:
   keys).
4. **Where the uncertainty lives.** Every layer and head at once: how much sampled weights spread, and
   how far the posterior moved from its prior (KL divergence).

### Classroom tips
Start from an example sentence, set a seed so everyone sees the same samples, then drag the Weibull
*k* slider down: the whiskers widen, the bars leave their softmax markers, the maps disagree, and the
epistemic share grows. Every control is in the page address, so a copied link reproduces the view.
""")
if finding := inference_k_finding():
    st.markdown(f"""
A question to end on: {finding} Softening a plain softmax model's probabilities with one temperature
does as well or better, so the noise is not magic: what only the random attention gives you is the
*epistemic* part, a measure of where the model is unsure where to look.
""")
