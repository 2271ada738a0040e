"""The analyses' choices that `autoprof analyze` shows as options, in a module that imports
nothing: `autoprof analyze --help` must not pay for pandas, SciPy and Matplotlib."""

CORRELATION_METHODS = ("pearson", "spearman")
# default fewest common intervals for a correlation: over 4 or 5 points, unrelated series
# often reach |r| > 0.5, which a heatmap shows as a strong relation
CORRELATION_MIN_OVERLAP = 10
CORRELATION_FEWEST_OVERLAP = 3  # two points always correlate +-1: never choose fewer than three
COMPARE_TESTS = ("welch", "mannwhitney")
