"""Benchmarks that print figures (never assertions): `python -m bench` runs them all."""
