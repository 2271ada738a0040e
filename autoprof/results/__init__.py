"""out/ -> results.csv and report.json: the file's columns and codec (`csvfile`), a run's
perf counts as rows (`rows`) and its regions' rows (`regions`), the aggregation run by run
(`aggregate`) and its sanity report (`tally`, `sanity_report`), the live intervals (`live`)."""
