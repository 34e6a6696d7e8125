"""Benchmarks: run ``python bench/run.py`` (see README "Performance")."""
