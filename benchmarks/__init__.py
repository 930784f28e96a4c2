"""Reproducible ratio benchmarks; `docs/performance.md` holds the latest numbers."""
