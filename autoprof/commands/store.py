"""`autoprof upload`, `autoprof runs list|show|export|delete`, `autoprof store migrate|info`.

The store's library (SQLAlchemy, Alembic, pandas) is imported inside the commands: importing it
here would cost every `autoprof` invocation over a second. Only `upload` and `store migrate`
create a store; the others refuse one that does not exist.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from autoprof.commands import common
from autoprof.commands.common import excel_safe_option, key_values, store_option
from autoprof.errors import AutoprofError
from autoprof.store import url as store_url
from autoprof.util.clock import naive_now, when


@click.command("upload")
@click.argument("outs", metavar="OUT...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Label the run; repeatable."
)
@store_option
def upload_command(outs: tuple[Path, ...], tags: tuple[str, ...], store_text: str | None) -> None:
    """Store aggregated profiles in the results store.

    Each OUT is a profile folder with results.csv (run `autoprof aggregate OUT` first)."""
    with _store_libraries():
        from autoprof.store import driver
        from autoprof.store import upload as store_upload

    _pyarrow_for_upload()
    labels = key_values(tags, "--tag")
    store = driver.Database.of(store_text)
    failures = 0
    for out in outs:
        try:
            done = store_upload.upload(store, out, labels)
        except AutoprofError as err:
            if len(outs) == 1:
                raise  # its own one line
            failures += 1
            click.echo(f"autoprof: error: {err}", err=True)
            continue
        part = f" part {done.part} of {done.parts}" if done.parts > 1 else ""
        if not done.stored:
            click.echo(f"{out}: run {done.uuid}{part} already stored in {store.shown}")
            continue
        rate = done.rows / done.seconds if done.seconds > 0 else 0.0
        state = "" if done.complete else " (run incomplete: more parts to come)"
        click.echo(
            f"{out}: stored run {done.uuid}{part} in {store.shown}: {done.rows} rows "
            f"in {done.seconds:.2f} s ({rate:,.0f} rows/s){state}"
        )
    if failures:
        raise AutoprofError(f"{failures} of {len(outs)} upload(s) failed")


@contextlib.contextmanager
def _store_libraries() -> Iterator[None]:
    """Import the store's libraries with the garbage collector off, then freeze what they made:
    their hundreds of thousands of objects, none of them garbage, were walked again and again
    by collections meanwhile (a fifth of the imports' 0.8 s of CPU; an export's 0.1 s of its
    0.6 s), and by every full one later. An upload or export does no linear algebra: numpy's
    OpenBLAS starts no thread pool, whose threads spun 0.05 s of CPU after the import (unless
    the user chose a number of threads)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.freeze()


def _pyarrow_for_upload() -> None:
    """pyarrow as an upload wants it: its memory from the C library's allocator, and no pandas.

    mimalloc, pyarrow's own, hands freed memory back to the system and takes it again, in huge
    pages the kernel clears each time: a tenth of a million-row upload's CPU went to clearing
    pages (the C library's keeps what was freed: 3% less CPU, 40 MiB less at the peak).

    pandas: let pyarrow find none for now: its first conversion of a value would import pandas
    (0.3-0.7 s, a fifth of a million-row upload) to check whether the value is a pandas object,
    and an upload makes none. pyarrow imports pandas after all where one asks it for a frame.
    Here, in the command's own single-threaded process, never in a library function: a thread
    importing pandas meanwhile would fail."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _NoPandas())
    try:
        pa.array([0])  # pyarrow's one try at importing pandas (until a frame is asked for)
    finally:
        del sys.meta_path[0]


class _NoPandas:
    """A finder of `sys.meta_path` (importlib.abc.MetaPathFinder's protocol: importing that
    module cost every store command 6 ms) that refuses pandas."""

    def find_spec(self, name, path, target=None):
        if name == "pandas":
            raise ImportError("not now")
        return None


@click.group("runs")
def runs_group() -> None:
    """List, show, export and delete stored runs."""


@runs_group.command("list")
@click.option("--machine", help="Hostname, CPU id or CPU model (substring).")
@click.option("--command", "command_text", help="Substring of the profiled command line.")
@click.option("--since", help="ISO date/datetime (UTC), or 30m, 12h, 7d, 2w ago.")
@click.option(
    "--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Repeatable; all must match."
)
@click.option(
    "--kind", type=click.Choice(["profile", "bench"]), help="Only profiles or only benchmarks."
)
@store_option
def list_command(machine, command_text, since, tags, kind, store_text) -> None:
    """List stored runs, oldest first."""
    from autoprof.store import engine, queries

    store = engine.open_store(store_text, create=False)
    since_at = queries.parse_since(since, naive_now()) if since else None
    labels = key_values(tags, "--tag")
    with store.read() as conn:
        where = queries.RunFilter(
            machine=machine, command=command_text, since=since_at, tags=labels, kind=kind
        )
        runs = queries.list_runs(conn, where)
    if not runs:
        click.echo(f"no runs in {store.shown} match", err=True)
        return
    header = f"{'ID':<36}  {'CREATED (UTC)':<19}  {'HOST':<16}  {'ROWS':>10}  {'STATUS':<10}"
    click.echo(f"{header}  COMMAND")
    for run in runs:
        status = run.status
        if run.parts_expected > 1:
            status = f"{status} {run.parts_stored}/{run.parts_expected}"
        tags_text = " ".join(f"{k}={v}" for k, v in run.tags.items())
        what = f"bench: {run.command_line}" if run.kind == "bench" else run.command_line
        click.echo(
            f"{run.uuid:<36}  {when(run.created):<19}  {','.join(run.hosts):<16}  "
            f"{run.rows:>10}  {status:<10}  {what}" + (f"  [{tags_text}]" if tags_text else "")
        )


@runs_group.command("show")
@click.argument("run_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
@store_option
def show_command(run_id: str, as_json: bool, store_text: str | None) -> None:
    """Show one stored run and its sanity report.

    Its command, machine, parts, tags and a summary of its sanity report."""
    from autoprof.store import engine
    from autoprof.store.show import RunRenderer, shown_run
    from autoprof.util.renderer import write

    store = engine.open_store(store_text, create=False)
    with store.read() as conn:
        shown = shown_run(conn, run_id, totals=not as_json)
    if as_json:
        click.echo(json.dumps(shown.details, indent=2, default=str))
        return
    write(RunRenderer().render(shown), None)


@runs_group.command("export")
@click.argument("run_id", metavar="ID")
@click.option(
    "-o",
    "--output",
    default="results.csv",
    show_default=True,
    callback=common.existing_parent,
    help="Where to write the CSV (a folder: results.csv in it); - for standard output.",
)
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--partial", is_flag=True, help="Export an incomplete split run's stored parts.")
@click.option("--report", is_flag=True, help="Per-function rows instead (`autoprof report`).")
@click.option("--recording", help="With --report: which recording, when the run holds several.")
@excel_safe_option
@store_option
def export_command(
    run_id, output, force, partial, report, recording, excel_safe, store_text
) -> None:
    """Write a stored run's results.csv.

    Write a run's results.csv, byte for byte as `aggregate` wrote it (with --report, the
    per-function CSV of its sampled recording, as `autoprof report --csv` wrote it); with
    --excel-safe, text cells that a spreadsheet would run as formulas are quoted."""
    with _store_libraries():
        from autoprof.store import engine, export
    from autoprof.util import atomic

    if report:
        return _export_report(run_id, output, force, recording, excel_safe, store_text)
    target = Path(output)
    if output != "-" and target.is_dir():  # a folder: the file goes in it, by its usual name
        target = target / "results.csv"
    if output != "-" and target.exists() and not force:
        raise AutoprofError(f"{target} exists; use --force to overwrite it")
    store = engine.open_store(store_text, create=False)
    with store.read() as conn:
        data = export.csv_chunks(conn, run_id, partial=partial, excel_safe=excel_safe)
        if output == "-":
            sys.stdout.flush()
            for chunk in data:
                sys.stdout.buffer.write(chunk)
            return
        lines = 0
        with atomic.replacing(target) as file:  # a full disk leaves no half file
            for chunk in data:
                file.write(chunk)
                lines += chunk.count(b"\n")
    click.echo(f"wrote {lines - 1} rows to {target}", err=True)


def _export_report(run_id, output, force, recording, excel_safe, store_text) -> None:
    from autoprof.store import engine, queries
    from autoprof.util import spreadsheet

    target = Path("functions.csv" if output == "results.csv" else output)
    if output != "-" and target.is_dir():
        target = target / "functions.csv"
    if output != "-" and target.exists() and not force:
        raise AutoprofError(f"{target} exists; use --force to overwrite it")
    with engine.open_store(store_text).read() as conn:
        text = queries.export_functions(conn, run_id, recording)
    if excel_safe:
        text = spreadsheet.csv_text(text)
    if output == "-":
        sys.stdout.write(text)
        return
    target.write_text(text)
    click.echo(f"wrote {text.count(chr(10)) - 1} function rows to {target}", err=True)


@runs_group.command("delete")
@click.argument("run_id", metavar="ID")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@store_option
def delete_command(run_id: str, yes: bool, store_text: str | None) -> None:
    """Delete a run and all its measurements."""
    from autoprof.store import engine, queries

    store = engine.open_store(store_text, create=False)
    if not yes:
        with store.read() as conn:
            run = queries.find_run(conn, run_id)
        if not _confirmed(f"delete run {run.uuid} ({run.rows} rows) from {store.shown}?"):
            click.echo(f"autoprof: run {run.uuid} not deleted", err=True)
            sys.exit(1)
    with store.write() as conn:
        uuid, rows = queries.delete_run(conn, run_id)
    click.echo(f"deleted run {uuid} ({rows} rows) from {store.shown}")


def _confirmed(question: str) -> bool:
    """The user's yes to `question`, asked on the terminal; where stdin is none (a script,
    cron, `< /dev/null`) nobody can answer: one error line naming --yes."""
    if not sys.stdin.isatty():
        raise AutoprofError(
            f"{question.rstrip('?')}: stdin is no terminal to confirm on; add --yes"
        )
    return click.confirm(question, default=False)


@click.group("store")
def store_group() -> None:
    """Manage the results store's schema."""


@store_group.command("migrate")
@store_option
def migrate_command(store_text: str | None) -> None:
    """Upgrade the store's schema (back it up first).

    To this autoprof's version of the schema."""
    from autoprof.store import engine

    before, after = engine.migrate(store_text)
    shown = store_url.display(store_url.parse(store_url.resolve(store_text)))
    if before == after:
        click.echo(f"{shown}: schema {after} is current")
    else:
        click.echo(f"{shown}: schema migrated from {before or 'empty'} to {after}")


@store_group.command("info")
@store_option
def info_command(store_text: str | None) -> None:
    """Print the store's URL, schema version and size.

    The password in the URL is masked."""
    from autoprof.store import engine, queries

    store = engine.open_store(store_text, create=False)
    with store.read() as conn:
        revision = engine.current_revision(conn)
        runs = len(queries.list_runs(conn))
    click.echo(f"store    {store.shown}")
    click.echo(f"schema   {revision} (this autoprof: {engine.head_revision()})")
    click.echo(f"runs     {runs}")


@store_group.command("backup")
@click.argument("dest", metavar="FILE", type=click.Path(path_type=Path))
@store_option
def backup_command(dest: Path, store_text: str | None) -> None:
    """Copy a SQLite store into a new file, whole and consistent.

    Writers may go on meanwhile (SQLite's online backup); the copy is one self-contained file.
    For PostgreSQL use pg_dump."""
    from autoprof.store import engine

    store = engine.open_store(store_text, create=False)
    try:
        store.backup(dest)
    finally:
        store.engine.dispose()
    click.echo(f"{store.shown}: backed up to {dest}")
