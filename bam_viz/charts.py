"""The old import path of the explorer's Plotly figures (`bam_viz.charts`), kept for notebooks
written against it; the figures live in `bam_viz.plots`."""

from bam_viz.plots import charts as _home


def __getattr__(name: str):
    return getattr(_home, name)
