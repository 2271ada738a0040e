"""`autoprof serve`: a web front end over the store, the profiler and the queue.

app.py        Starlette routes: HTML pages and the JSON API under /api/ (same data)
views.py      what a page shows, read from the store (SQL aggregation, never row by row)
analyses.py   compare over two runs' results frames (cached); a run's stats come from store.summary
jobs.py       new measurements: a one-at-a-time local queue (or RQ), live intervals
task.py       the child process that runs one job with the library's profile/record
"""
