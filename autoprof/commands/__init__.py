"""One module per command; the table below is what `autoprof --help` shows, in this order.

Each entry names the module and attribute of a click command. The CLI imports a command's module
only when that command (or the full help listing) is asked for, so a command's heavy libraries
(pandas, matplotlib, SQLAlchemy, ...) must be imported inside its functions, never at the top of
its module.
"""

COMMANDS: dict[str, str] = {
    "events": "autoprof.commands.events:events",
    "schedule": "autoprof.commands.schedule:schedule",
    "profile": "autoprof.commands.profile:profile",
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
}
