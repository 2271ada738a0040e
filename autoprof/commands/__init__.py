"""One module per command; the list below is what `autoprof --help` shows."""

from autoprof.commands import store
from autoprof.commands.aggregate import aggregate
from autoprof.commands.analyze import analyze
from autoprof.commands.demo import demo
from autoprof.commands.events import events
from autoprof.commands.flame import flamegraph_command, record_command
from autoprof.commands.jobs import jobs_group
from autoprof.commands.profile import profile
from autoprof.commands.schedule import schedule
from autoprof.commands.submit import submit
from autoprof.commands.worker import worker

COMMANDS: list = [
    events,
    schedule,
    profile,
    aggregate,
    store.upload_command,
    store.runs_group,
    store.store_group,
    worker,
    submit,
    jobs_group,
    record_command,
    flamegraph_command,
    demo,
    analyze,
]
