"""Helpers that both the tests and the benchmarks use (numpy.testing's place): real `autoprof
worker` processes on a Redis database of their own, synthetic out/ folders, and perf's own
event encoding rebuilt independently. No other part of autoprof imports them
(tests/test_layers.py)."""
