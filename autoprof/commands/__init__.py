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
    "markers": "autoprof.commands.markers:markers",
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
    "profile": "Measure every event for a command, without multiplexing.",
    "metrics": "List and describe the metrics of a CPU.",
    "markers": "Compiler flags for autoprof.h, the C and C++ region markers.",
    "aggregate": "Turn a profile folder into results.csv and a report.",
    "upload": "Store aggregated profiles in the results store.",
    "runs": "List, show, export and delete stored runs.",
    "store": "Manage the results store's schema.",
    "worker": "Run queued profiles on this machine, one at a time.",
    "submit": "Queue a profile of a command for a target machine.",
    "jobs": "List, show and cancel profile jobs.",
    "record": "Sample where a command spends its time (perf record).",
    "flamegraph": "Draw a flame graph of a recording or a trace.",
    "report": "Print the per-function samples of a recording.",
    "callgraph": "Draw the call graph of a recording (Graphviz).",
    "memory": "Profile the heap of a command over time (massif).",
    "bench": "Time commands and count their events, many runs each.",
    "demo": "Profile the bundled example and check its counts.",
    "analyze": "Analyse a results.csv: correlation, stats, compare.",
    "serve": "Serve web pages of the runs and new measurements.",
}
