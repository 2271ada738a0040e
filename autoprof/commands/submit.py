"""`autoprof submit --redis URL (--host NAME | --cpu ID | --queue NAME) [options] -- CMD`."""

from __future__ import annotations

import click

from autoprof.commands.common import (
    measure_options,
    redis_option,
    selection_options,
    takes_request,
)
from autoprof.errors import AutoprofError
from autoprof.run.request import Request


@click.command("submit")
@redis_option
@click.option("--host", "host_name", metavar="NAME", help="Run on the worker of this host.")
@click.option("--cpu", "cpu_id", metavar="ID", help="Run on any worker of this CPU id.")
@click.option("--queue", "queue_name", metavar="NAME", help="Run on a worker of this queue.")
@click.option(
    "--split",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Divide the plan's runs over N identical machines; the store keeps one run.",
)
@selection_options
@measure_options
@click.option(
    "--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Label the stored run; repeatable."
)
@click.option(
    "--job-timeout",
    type=click.IntRange(1),
    help="Seconds a job may take before RQ stops it [default: 86400].",
)
@click.option(
    "--retry",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Run a failed or abandoned job again up to N times (resumes on the same machine).",
)
@click.option(
    "--retry-wait",
    default=30,
    show_default=True,
    type=click.IntRange(0, 3600),
    metavar="SECONDS",
    help="Wait before a job runs again; twice as long before each next try (at most an hour).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@takes_request
def submit(
    request: Request,
    redis_text,
    host_name,
    cpu_id,
    queue_name,
    split,
    job_timeout,
    retry,
    retry_wait,
) -> None:
    """Queue a profile of a command for a target machine.

    Prints the job ids and the run id."""
    from autoprof.queue import connection, jobs
    from autoprof.queue.spec import JobSpec

    targets = [
        name
        for name in (
            host_name and connection.host_queue(host_name),
            cpu_id and connection.cpu_queue(cpu_id),
            queue_name,
        )
        if name
    ]
    if len(targets) != 1:
        raise AutoprofError("give exactly one of --host NAME, --cpu ID, --queue NAME")
    if split > 1 and host_name:
        raise AutoprofError("--split needs several machines: use --cpu ID (or --queue NAME)")
    spec = JobSpec.of(request.check())
    text = connection.resolve(redis_text)
    conn = connection.connect(text)
    with connection.errors(text):
        submitted = jobs.submit(
            conn,
            targets[0],
            jobs.split_specs(spec, split),
            job_timeout=job_timeout or jobs.DEFAULT_JOB_TIMEOUT_S,
            retry=retry,
            retry_wait_s=retry_wait,
        )
    profile_id = JobSpec.from_json(submitted[0].args[0]).profile_id
    parts = f" in {split} parts" if split > 1 else ""
    click.echo(f"run {profile_id}{parts} queued on {targets[0]}:")
    for job in submitted:
        click.echo(f"  job {job.id}")
