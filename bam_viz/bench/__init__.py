"""The library's benchmarks (`python -m bam_viz bench`)."""
