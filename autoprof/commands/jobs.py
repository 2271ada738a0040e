"""`autoprof jobs list|show|watch|cancel`: queued, running and finished profile jobs."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from autoprof.commands.common import redis_option
from autoprof.util.clock import when


def _connect(redis_text):
    from autoprof.queue import connection

    text = connection.resolve(redis_text)
    return text, connection.connect(text)


def _took(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"


@click.group("jobs")
def jobs_group() -> None:
    """List, show and cancel profile jobs."""


@jobs_group.command("list")
@redis_option
@click.option("--status", help="Only jobs in this status (queued, started, finished, failed...).")
def list_command(redis_text, status) -> None:
    """List autoprof's jobs, oldest first."""
    from autoprof.queue import connection, jobs

    text, conn = _connect(redis_text)
    with connection.errors(text):
        found = [j for j in jobs.list_jobs(conn) if status is None or j.status == status]
    if not found:
        click.echo("no jobs", err=True)
        return
    click.echo(
        f"{'JOB':<36}  {'STATUS':<9}  {'QUEUE':<16}  {'HOST':<10}  {'ENQUEUED (UTC)':<19}  "
        f"{'TOOK':>7}  {'RUN':<13}  COMMAND / ERROR"
    )
    for j in found:
        run = (j.profile_id or "-")[:8] + (f" {j.part}/{j.parts}" if j.parts > 1 else "")
        click.echo(
            f"{j.id:<36}  {j.status:<9}  {j.queue:<16}  {j.host or '-':<10}  "
            f"{when(j.enqueued):<19}  {_took(j.seconds):>7}  {run:<13}  "
            f"{j.error or j.command_line}"
        )


@jobs_group.command("show")
@click.argument("job_id", metavar="ID")
@redis_option
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def show_command(job_id, redis_text, as_json) -> None:
    """Show one job: command, status, timings, result.

    Also its worker, the load it saw, and its result or error."""
    from autoprof.queue import connection, jobs

    text, conn = _connect(redis_text)
    with connection.errors(text):
        j = jobs.info(jobs.find_job(conn, job_id))
    if as_json:
        click.echo(json.dumps(asdict(j) | {"seconds": j.seconds}, indent=2, default=str))
        return
    click.echo(f"job        {j.id}")
    click.echo(f"status     {j.status}" + (f" ({j.phase})" if j.phase else ""))
    click.echo(f"command    {j.command_line}")
    part = f" part {j.part} of {j.parts}" if j.parts > 1 else ""
    click.echo(f"run        {j.profile_id or '-'}{part}")
    click.echo(f"queue      {j.queue}")
    click.echo(f"worker     {j.worker or '-'}" + (f" (host {j.host})" if j.host else ""))
    click.echo(f"enqueued   {when(j.enqueued)} UTC")
    click.echo(f"started    {when(j.started)} UTC")
    click.echo(f"ended      {when(j.ended)} UTC ({_took(j.seconds)})")
    if j.load is not None:
        click.echo(f"load       {j.load:.2f} (1-minute average before the profile)")
    if j.retries_left is not None:
        click.echo(f"retries    {j.retries_left} left")
    if j.result and j.result.run_id:
        done = "complete" if j.result.complete else "waiting for other parts"
        click.echo(f"stored     run {j.result.run_id}: {j.result.rows} rows ({done})")
    for warning in j.warnings:
        click.echo(f"warning    {warning}")
    if j.error:
        click.echo(f"error      {j.error}")


@jobs_group.command("watch")
@click.argument("job_id", metavar="ID")
@redis_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per interval.")
def watch_command(job_id, redis_text, as_json) -> None:
    """Print a job's intervals as its worker counts them.

    The perf stat -I intervals, until the job ends."""
    from autoprof.queue import connection, jobs, live

    text, conn = _connect(redis_text)
    with connection.errors(text):
        job = jobs.find_job(conn, job_id)
        follow = live.Follow(conn, job.id)
        click.echo(f"job {job.id}: watching its intervals (Ctrl-C to stop)", err=True)
        shown = 0
        while True:
            follow.poll(block_ms=1000)
            for point in follow.points[shown:]:
                click.echo(json.dumps(point) if as_json else _interval(point))
            shown = len(follow.points)
            if follow.ended or (jobs.info(jobs.find_job(conn, job.id)).status in jobs.ENDED):
                follow.poll()  # what came between the last read and the end
                for point in follow.points[shown:]:
                    click.echo(json.dumps(point) if as_json else _interval(point))
                break
        j = jobs.info(jobs.find_job(conn, job.id))
    click.echo(f"job {j.id}: {j.status}" + (f": {j.error}" if j.error else ""), err=True)


def _interval(point: dict) -> str:
    return f"{point['t']:12.3f}  {point['run']:<8}  {point['v']:>18,.0f}  {point['event']}"


@jobs_group.command("cancel")
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True)
@redis_option
def cancel_command(job_ids, redis_text) -> None:
    """Cancel queued jobs; stop started ones.

    A stopped job's partial results are never stored."""
    from autoprof.queue import connection, jobs

    text, conn = _connect(redis_text)
    with connection.errors(text):
        for ident in job_ids:
            job_id, done = jobs.cancel(conn, ident)
            click.echo(f"job {job_id}: {done}")
