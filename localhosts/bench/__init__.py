"""The benchmarks behind scripts/bench-gateway and scripts/bench-preview: each prints its figures
and the ratios it measured in one run (docs/BENCHMARKS.md)."""
