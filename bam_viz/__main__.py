"""python -m bam_viz {train, evaluate, report, bench, examples, score}: see bam_viz.cli."""

import sys

from bam_viz.cli import main

if __name__ == "__main__":
    sys.exit(main())
