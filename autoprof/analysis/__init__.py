"""Analyses of results.csv: correlation, event detail, stats and A/B comparison."""
