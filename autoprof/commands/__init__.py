"""One module per command; the tables below are what `autoprof --help` shows, in this order.

Each entry of COMMANDS names the module and attribute of a click command; SUMMARIES holds its
one-line summary (the first paragraph of its docstring, as click takes it; tests/test_cli.py
checks they agree). The CLI imports a command's module only when that command is run or asked
for help: `autoprof --help` reads SUMMARIES and imports none. A command's heavy libraries
(pandas, matplotlib, SQLAlchemy, ...) must be imported inside its functions, never at the top
of its module.
"""

COMMANDS: dict[str, str] = {
    "events": "autoprof.commands.events:events",
    "schedule": "autoprof.commands.schedule:schedule",
    "profile": "autoprof.commands.profile:profile",
    "metrics": "autoprof.commands.metrics:metrics",
    "aggregate": "autoprof.commands.aggregate:aggregate",
    "upload": "autoprof.commands.store:upload_command",
    "runs": "autoprof.commands.store:runs_group",
    "store": "autoprof.commands.store:store_group",
    "worker": "autoprof.commands.worker:worker",
    "submit": "autoprof.commands.submit:submit",
    "jobs": "autoprof.commands.jobs:jobs_group",
    "record": "autoprof.commands.flame:record_command",
    "flamegraph": "autoprof.commands.flame:flamegraph_command",
    "report": "autoprof.commands.report:report_command",
    "callgraph": "autoprof.commands.callgraph:callgraph_command",
    "memory": "autoprof.commands.memory:memory_command",
    "bench": "autoprof.commands.bench:bench",
    "demo": "autoprof.commands.demo:demo",
    "analyze": "autoprof.commands.analyze:analyze",
    "serve": "autoprof.commands.serve:serve",
}

SUMMARIES: dict[str, str] = {
    "events": "List, search and describe the events of a CPU.",
    "schedule": "Pack every event into the fewest runs without multiplexing.",
    "profile": (
        "Measure every event (or the chosen ones) for COMMAND, without multiplexing; or attach to"
        " running processes (-p), a cgroup or the whole system (-a) for --duration per group."
    ),
    "metrics": (
        "The metric catalog: Intel's perfmon metrics (TMA tree, Info, Bottlenecks) and yours."
    ),
    "aggregate": "Parse every run of the profile folder OUT into one long-format results.csv.",
    "upload": "Store aggregated profiles (OUT folders with results.csv) in the results store.",
    "runs": "List, show, export and delete stored runs.",
    "store": "Manage the results store's schema.",
    "worker": "Run queued profiles on this machine, one at a time, and store their results.",
    "submit": "Queue a profile of COMMAND for a target machine; prints the job ids and the run id.",
    "jobs": "List, show and cancel profile jobs.",
    "record": "Sample where COMMAND spends its time (perf record, call graphs on).",
    "flamegraph": (
        "Draw a flame graph of INPUT: a perf.data (or a `record` folder), `perf script` text "
        "(plain or .gz), or folded stacks."
    ),
    "report": (
        "Per-function samples of every event of RECORDING (an `autoprof record` folder, a "
        "perf.data or `perf script` text): weighted by period, shares, and ratios."
    ),
    "callgraph": (
        "Draw the call graph of RECORDING (an `autoprof record` folder, a perf.data or `perf "
        "script` text): nodes coloured by total time, labelled total % and (self %)."
    ),
    "memory": (
        "Profile the heap of COMMAND over time (valgrind --tool=massif): a plot stacked by the "
        "top allocation sites and the peak's allocation tree."
    ),
    "bench": (
        "Run each COMMAND (separated by --) many times under perf stat: times and counts per run,"
        " mean +- sd, outliers, and the ratio of each command to the first."
    ),
    "demo": (
        "Build the example workload, watch its 12 slots with hardware breakpoints plus software "
        "events (3 runs: 4 debug registers), aggregate, and check every count against the writes "
        "the example made."
    ),
    "analyze": "Analyses of a results.csv: correlation, event-detail, stats, compare, metrics.",
    "serve": (
        "Serve web pages of the stored runs (compare, download, delete) and, with --allow, new "
        "measurements with live plots."
    ),
}
