"""Benchmarks (python -m lazytensor bench): on top of everything, never imported by the library."""
