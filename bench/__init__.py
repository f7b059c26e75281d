"""Benchmarks: ``python -m bench [SUITE...]`` prints tables and writes bench/RESULTS.md."""
