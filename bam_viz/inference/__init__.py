"""What a trained model tells about one input: the explain result, the gaps, sweeps,
attributions, the label posterior and exports."""
