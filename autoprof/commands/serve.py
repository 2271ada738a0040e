"""`autoprof serve`: the web pages and JSON API over the store, and new measurements."""

from __future__ import annotations

from pathlib import Path

import click

from autoprof.commands.common import store_option
from autoprof.errors import AutoprofError
from autoprof.util import xdg
from autoprof.util.owned import own_folder


def _default_data_dir() -> Path:
    return xdg.cache_dir() / "serve"


def read_token(path: Path | None) -> str:
    """The token in `path` (first line, stripped), or a fresh random one."""
    import secrets

    if path is None:
        return secrets.token_urlsafe(24)
    try:
        token = path.read_text().strip().splitlines()[0].strip()
    except (OSError, IndexError):
        raise AutoprofError(f"--token-file {path}: cannot read a token from it") from None
    if len(token) < 16:
        raise AutoprofError(f"--token-file {path}: the token is shorter than 16 characters")
    return token


@click.command("serve")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="TCP port to listen on.",
)
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="REGEX",
    help="Allow new measurements of commands whose shell-joined form fully matches REGEX "
    "(as `autoprof worker --allow`); repeatable. Without it the server is read-only.",
)
@click.option(
    "--allow-env",
    "allow_env",
    multiple=True,
    metavar="NAME",
    help="Let a job set environment variable NAME (repeatable). Without it a job sets none. "
    "Only thread counts and placement can be allowed (OMP_NUM_THREADS, MKL_NUM_THREADS, "
    "GOMAXPROCS, ...): any other NAME stops serve, saying which.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Answer requests for Host NAME too (a DNS name or proxy in front); repeatable. "
    "Others than 127.0.0.1, localhost, [::1] and --host get 400 (DNS rebinding).",
)
@click.option(
    "--token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Read the token for starting/stopping jobs and deleting runs from this file "
    "(default: a random one, printed once).",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=_default_data_dir,
    show_default="~/.cache/autoprof/serve",
    help="Folder for jobs (their out/ folders, logs and flame graphs).",
)
@click.option("--max-connections", default=200, type=click.IntRange(1), hidden=True)
@click.option("--max-client-connections", default=100, type=click.IntRange(1), hidden=True)
@click.option("--header-timeout", default=10.0, type=click.FloatRange(0.1), hidden=True)
@click.option("--write-timeout", default=15.0, type=click.FloatRange(0.1), hidden=True)
def serve(
    store_text,
    host,
    port,
    allow,
    allow_env,
    allow_hosts,
    token_file,
    data_dir,
    max_connections,
    max_client_connections,
    header_timeout,
    write_timeout,
) -> None:
    """Serve web pages of the runs and new measurements.

    Serve web pages of the stored runs (compare, download, delete) and, with --allow, new
    measurements with live plots. Binds 127.0.0.1 unless told otherwise."""
    import os

    from autoprof.queue.spec import compile_allow
    from autoprof.store import engine
    from autoprof.web import server
    from autoprof.web.admission import harmless_env_text, refused_env_names
    from autoprof.web.app import create_app
    from autoprof.web.guard import host_names
    from autoprof.web.limits import Limits
    from autoprof.web.state import Settings

    never = refused_env_names(list(allow_env))
    if never:
        raise AutoprofError(
            f"--allow-env {never[0]}: no job may set it (only these can be allowed: "
            f"{harmless_env_text()})"
        )
    if not loopback(host) and token_file is None:
        raise AutoprofError(
            f"--host {host} listens beyond this machine: give a --token-file "
            "(a token printed to a terminal is not one to share)"
        )

    data_dir = own_folder(data_dir)  # the jobs' files, by name: this user's alone
    settings = Settings(
        store=engine.open_store(store_text),
        data_dir=data_dir,
        token=read_token(token_file),
        allow=compile_allow(list(allow)),
        allow_env=frozenset(allow_env),
        redis_url=os.environ.get("AUTOPROF_REDIS") or None,
        hosts=host_names(host, allow_hosts),
        limits=Limits(
            max_connections=max_connections,
            max_connections_per_client=max_client_connections,
            header_timeout_s=header_timeout,
            write_timeout_s=write_timeout,
        ),
    )
    sock = server.listen(host, port, settings.limits)
    app = create_app(settings)
    where = f"http://{host}:{port}"
    click.echo(f"autoprof serve: {where}/ (store {settings.store.shown})")
    if settings.read_only:
        click.echo("read-only: start with --allow REGEX to run measurements")
    elif settings.redis_url:
        click.echo("jobs go to RQ ($AUTOPROF_REDIS): run `autoprof worker` on this host")
    if not settings.read_only and token_file is None:
        click.echo(f"token (shown once): {settings.token}")
        click.echo(f"log in: {where}/login?token={settings.token}")
    if not loopback(host):
        starts = "" if settings.read_only else ", and starts measurements with the token"
        click.echo(
            f"autoprof: warning: listening on {host}: whoever reaches port {port} reads the "
            f"store{starts}"
        )
    if host in ("0.0.0.0", "::") and not allow_hosts:
        click.echo(
            "autoprof: warning: requests naming this machine otherwise than 127.0.0.1 or "
            "localhost get 400: add --allow-host NAME for each name (or address) clients use"
        )
    server.serve(app, sock, settings.limits)


def loopback(host: str) -> bool:
    """Whether `host` is reached from this machine only (localhost or a loopback address)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything
