"""The old import path of the explorer's Plotly figures and captions (`bam_viz.charts`), kept for
notebooks written against it: every name of the old module resolves to its home in `bam_viz.plots`
(figures in `explorer`, captions in `captions`, numbers in `format`, ...), the private helpers that
notebooks used included."""

from importlib import import_module

_HOMES = ("explorer", "captions", "format", "wording", "tokens", "kit", "style")
_RENAMED = {
    "_np": ("kit", "finite"), "_figure": ("kit", "figure"), "_message_figure": ("kit", "message_figure"),
    "_axis": ("kit", "axis"), "_layout": ("kit", "layout"), "_margin": ("kit", "margin"),
    "_label_px": ("kit", "label_px"), "_ticks": ("kit", "ticks"), "_all_equal": ("kit", "all_equal"),
    "_relative_range": ("kit", "relative_range"), "_superscript": ("kit", "superscript"), "_runs": ("kit", "runs"),
    "_clip": ("tokens", "clip"), "_se_digits": ("format", "se_digits"), "_samples_needed": ("format", "samples_needed"),
    "_entropy_parts": ("wording", "entropy_parts"), "_mi_how": ("wording", "mi_how"),
}
# Markdown escaping and selectbox options are the app's page helpers now, not the library's.
_PAGE = {"md_escape": "views/text.py", "token_option": "views/text.py"}


def __getattr__(name: str):
    if name in _RENAMED:
        home, new = _RENAMED[name]
        return getattr(import_module(f"bam_viz.plots.{home}"), new)
    if name in _PAGE:
        raise AttributeError(f"{name} is a page helper now: see {_PAGE[name]} in the app")
    if not name.startswith("__"):
        for home in _HOMES:
            module = import_module(f"bam_viz.plots.{home}")
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"module 'bam_viz.charts' has no attribute {name!r}")
