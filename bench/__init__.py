"""Benchmarks: run ``python bench/run.py`` (see docs/performance.md)."""
