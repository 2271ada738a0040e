"""`autoprof worker --redis URL --store URL --allow REGEX [--queue NAME ...]`: serve profiles."""

from __future__ import annotations

import socket
from pathlib import Path

import click

from autoprof.commands.common import redis_option, store_option
from autoprof.util import urls, xdg


def _default_workdir(hostname: str) -> Path:
    return xdg.cache_dir() / "worker" / hostname


@click.command("worker")
@redis_option
@store_option
@click.option(
    "--queue",
    "queues",
    multiple=True,
    metavar="NAME",
    help="Listen on this queue too (after host:HOSTNAME and cpu:CPU_ID); repeatable.",
)
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="REGEX",
    help="Run only commands whose shell-joined form fully matches REGEX; repeatable. "
    "Required: --allow '.*' runs anything.",
)
@click.option(
    "--hostname",
    default=socket.gethostname,
    show_default="this host's name",
    metavar="NAME",
    help="The name this worker gives itself: on its jobs (where they ran) and its work folder.",
)
@click.option(
    "--max-load",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Start a profile only when the 1-minute load average is at most this.",
)
@click.option(
    "--load-wait",
    default=300.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds to wait for the load to drop before failing the job.",
)
@click.option(
    "--load-poll", default=5.0, show_default=True, type=click.FloatRange(0.1), hidden=True
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where jobs' out/ folders live [default: ~/.cache/autoprof/worker/HOSTNAME].",
)
@click.option(
    "--allow-system-wide",
    is_flag=True,
    help="Run system-wide jobs (`submit -a` or `--cpu-list`): they measure every process on "
    "those CPUs.",
)
@click.option("--keep", is_flag=True, help="Keep a job's out/ folder after it is stored.")
@click.option(
    "--events-dir",
    type=click.Path(file_okay=False),
    help="Intel perfmon directory for this machine's catalog.",
)
@click.option(
    "--heartbeat",
    default=10,
    show_default=True,
    type=click.IntRange(1),
    help="Seconds between job heartbeats; a job is abandoned after 3 missed ones.",
)
@click.option(
    "--maintenance",
    default=60,
    show_default=True,
    type=click.IntRange(1),
    help="Seconds between registry cleanups (fails or retries abandoned jobs).",
)
@click.option("--burst", is_flag=True, help="Quit when the queues are empty.")
def worker(
    redis_text,
    store_text,
    queues,
    allow,
    hostname,
    max_load,
    load_wait,
    load_poll,
    workdir,
    allow_system_wide,
    keep,
    events_dir,
    heartbeat,
    maintenance,
    burst,
) -> None:
    """Run queued profiles on this machine, one at a time.

    Each profile's results go to the store."""
    from autoprof.queue import connection, spec
    from autoprof.queue import worker as queue_worker
    from autoprof.store import engine

    patterns = queue_worker.check_allow(spec.compile_allow(list(allow)))
    redis_text = connection.resolve(redis_text)
    conn = connection.connect(redis_text)  # first: a worker without its queue makes no store
    store = engine.open_store(store_text)  # fail now, not after the first profile
    store.engine.dispose()
    settings = queue_worker.Settings(
        store=store.database.text,
        allow=patterns,
        hostname=hostname,
        workdir=workdir or _default_workdir(hostname),
        max_load=max_load,
        load_wait_s=load_wait,
        load_poll_s=load_poll,
        events_dir=events_dir,
        keep=keep,
        allow_system_wide=allow_system_wide,
    )
    click.echo(
        f"autoprof worker {hostname}: queue {urls.mask(redis_text)}, store {store.shown}, "
        f"allow {' | '.join(allow) or '(nothing)'}",
        err=True,
    )
    queue_worker.work(
        conn,
        redis_text,
        settings,
        list(queues),
        heartbeat_s=heartbeat,
        maintenance_s=maintenance,
        burst=burst,
    )
