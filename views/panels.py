"""The explorer's two chart panels as the page receives them: the summary's payload and the inside
panel's with what goes beside it, their captions written for the slider values they are made at.
Made here for a run of the page (`views/explorer.py`) and for the live route's answer to a release or
a poll (`views/live_route.py`), which must send what a run at those values sends."""

from __future__ import annotations

from bam_viz.core.grids import nearest_index
from bam_viz.live import grid as live
from bam_viz.plots import captions
from bam_viz.plots.wording import Facts
from views import live_route, page_frames, runtime, state


def summary_captions(result, grid) -> dict:
    """The prose of the prediction and the sweep, written for the server's current values (the page
    marks it as such while a slider is elsewhere); in presentation mode the browser folds it under
    "What this shows". None while the result waits for the page's frame (`views.page_frames`)."""
    if result.waiting:
        return None
    out = {"prediction": captions.prediction_caption(result)}
    sweep = live.sweep_of(grid, result.target, made=result.sweep_stats)
    if sweep is not None:
        current = result.hyper.get(grid.posterior_spec.name)
        out["sweep"] = captions.sweep_caption(sweep, current=current)
    return out


def inside_captions(result, layer: int, head: int, query: int, key: int, relative: bool, shown) -> dict | None:
    """The prose of the panels inside the attention, as `summary_captions` is for the summary's."""
    if result.waiting:
        return None
    return {
        "bars": captions.prior_posterior_caption(result, layer, head, query, shown=shown),
        "density": captions.key_density_caption(result, layer, head, query, key),
        "maps": captions.sampled_maps_caption(result, layer, head, relative=relative, shown=shown),
        "grids": captions.layer_head_caption(result, relative=relative),
    }


def indices(grid, hyper: dict) -> tuple[int, int]:
    """The grid indices of the server's current slider values."""
    post = (nearest_index(grid.values, hyper[grid.posterior_spec.name], grid.posterior_spec.scale == "log")
            if grid.posterior_spec else 0)
    prior = (nearest_index(grid.prior_values, hyper[grid.prior_spec.name], grid.prior_spec.scale == "log")
             if grid.prior_spec else 0)
    return post, prior


def summary_bytes(grid, result, post: int, prior: int, presentation: bool, run: int, route: str | None) -> bytes:
    """The summary's payload at (post, prior), its captions written for them: for a run of the page
    and for the live route's answer (`views.live_route`), which a release and a poll ask instead of
    a run once the page knows the route (`route`, its URL)."""
    # While the grid is being made, the page asks for new frames after `ms` (its poll), from the load
    # now (`FrameScheduler.poll_interval`); `run` makes every answer's bytes new, so that the page sets
    # its timer again.
    poll = {"ms": 0 if grid.complete or grid.in_browser else round(1000 * live.FRAMES.poll_interval()), "run": run}
    extra = {"captions": summary_captions(result, grid), "captions_at": [post, prior],
             "presentation": presentation, "poll": poll, "route": route, "turn": live_route.turn_url(route)}
    if grid.in_browser:
        extra["frame_graph"] = runtime.frame_graph(grid.model, grid.n_samples)
        # the captions wait for the page's frame at `post` (it sends it: views/live/local.js), unless the
        # last it sent was refused: then they say why, and nothing is asked again
        refused = page_frames.problem(grid)
        extra["captions_wait"] = post if result.waiting and refused is None else None
        if result.waiting and refused is not None:
            extra["captions"] = {"prediction": f"The captions could not be written from this browser's frame: "
                                               f"{refused}."}
    return live.summary_payload(grid, post, extra, target=result.target)


def inside_parts(model, grid, result, selection: tuple, presentation: bool) -> tuple[bytes, dict]:
    """The inside panel's payload for the selected (layer, head, query, key, relative colours) and what
    goes beside it (`meta`: captions, the values they are written for), at the result's (post, prior):
    for a run of the page and for the live route's answer (`views.live_route`)."""
    layer, head, query, key, relative = selection
    post, prior = result.index, result.prior_index
    facts = Facts.of(result)
    density_message = facts.no_density(layer)
    if density_message is None and (layer not in grid.scored or not model.attention_family.has_density):
        density_message = "This layer has no continuous density: its samples are shown in the bars and maps."
    extra = {"density_message": density_message, "kl_message": facts.no_prior(),
             "density_label": f"log10 {model.attention_family.density_variable}"}
    meta = {"captions": inside_captions(result, layer, head, query, key, relative, grid.window),
            "captions_at": [post, prior], "current": [post, prior], "presentation": presentation,
            "relative": bool(relative)}
    return state.inside_bytes(grid, post, prior, layer, head, query, key, extra), meta
