"""`autoprof serve`: a web front end over the store, the profiler and the queue.

app.py        the Starlette app: its routes, state, guard and lifespan
routes.py     HTML pages and the JSON API under /api/ (same data)
files.py      static files, a run's downloads and a job's records, kept inside out/
state.py      the server's settings and state, and the token check
guard.py      Host, Origin and Content-Type checks before any route; limits.py: sizes, streams
views.py      what a page shows, read from the store (SQL aggregation, never row by row)
analyses.py   compare over two runs' results frames (cached); a run's stats come from store.summary
form.py       what the new-measurement form asks for (JobRequest), parsed with one-line errors
admission.py  what a job may do here: --allow, the harmless environment (--allow-env), events
job.py        a job as the page shows it, and the interface of the backends that run it
localqueue.py new measurements run here, one at a time, each in a child; live intervals
task.py       the child process that runs one job with the library's profile/record
rqjobs.py     the same jobs on RQ ($AUTOPROF_REDIS), for `autoprof worker`
server.py     uvicorn with limits: idle, half-open and slow connections are closed
"""
