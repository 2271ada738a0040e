"""`autoprof serve`: a web front end over the store, the profiler and the queue.

app.py        Starlette routes: HTML pages and the JSON API under /api/ (same data)
views.py      what a page shows, read from the store (SQL aggregation, never row by row)
analyses.py   correlation, stats and compare over a run's results frame (cached)
downsample.py LTTB: a long series cut to the points a chart can show
jobs.py       new measurements: a one-at-a-time local queue (or RQ), live intervals
task.py       the child process that runs one job with the library's profile/record
"""
