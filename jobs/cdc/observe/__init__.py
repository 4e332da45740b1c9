"""What a run shows while it runs: progress lines and metrics."""
