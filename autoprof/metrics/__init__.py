"""Metrics: formulas over events (Intel's perfmon metrics, autoprof's YAML metric files),
their safe evaluator, what they need measured, and the TMA tree they form."""
