"""`autoprof bench`: hyperfine with counters.

Each command runs N times under one `perf stat` per repetition (the events must fit one run:
no multiplexing), giving wall, user and sys time and the counts of every repetition:

    events = measure.one_run_events(planning.plan(request))   # refuses what needs several runs
    result = measure.bench(commands, events, options, on_run=...)
    summaries = stats.summarize_all(result)               # mean +- sd, min, max, outliers
    ratios = stats.ratios(result)                         # each command vs the first

`export` writes the result as JSON or long-format CSV; `store` keeps it in the results store.
"""
