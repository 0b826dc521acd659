"""The old import path of `sweep` (`from bam_viz.sweep import sweep`), kept for code written
against it; the module lives in `bam_viz.inference.sweep`."""

from bam_viz.inference.sweep import Sweep, sweep  # noqa: F401
