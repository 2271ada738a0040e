"""The CLI shell: version, help, start-up imports, how commands end (errors, Ctrl-C, closed
pipes) and output meant for pipes."""

from __future__ import annotations

import importlib
import json
import os
import pty
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoprof import __version__
from autoprof.catalog import host
from autoprof.commands import COMMANDS, SUMMARIES, common
from autoprof.testing.cli import one_error_line, process
from autoprof.testing.synthetic_out import make_out

# libraries a command imports inside its functions, never at the top of its module (#11)
HEAVY = (
    "pandas",
    "numpy",
    "scipy",
    "matplotlib",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "redis",
    "rq",
    "networkx",
    "rich",
    "yaml",
)


@pytest.fixture(autouse=True)
def own_data_home(tmp_path, monkeypatch):
    """The default store of every autoprof run here is under tmp_path, never the user's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))
    monkeypatch.delenv("AUTOPROF_STORE", raising=False)


def heavy_imported(code: str) -> list[str]:
    """The HEAVY libraries in sys.modules after running `code` in a fresh interpreter."""
    loaded = f"sorted(m for m in {HEAVY!r} if m in sys.modules)"
    probe = f"{code}\nimport json, sys\nprint(json.dumps({loaded}))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_version(cli_run):
    proc = cli_run("--version")
    assert proc.returncode == 0
    assert __version__ in proc.stdout


def usage_error_line(proc) -> str:
    """The contract for a malformed command line: status 2, one `autoprof: error:` line that
    says where the help is, no traceback (issue #23: no more click usage + `Error:`)."""
    line = one_error_line(proc)
    assert "--help')" in line, proc.stderr
    return line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["no-such-command"], "No such command 'no-such-command'"),
        (["schedule", "--no-such-option"], "--no-such-option"),
        (["profile", "--interval", "many", "--", "true"], "'many' is not a valid integer"),
    ],
)
def test_a_malformed_command_line_is_a_usage_error(args, says, cli_run):
    assert says in usage_error_line(cli_run(*args))


def test_importing_the_cli_imports_no_heavy_library():
    assert heavy_imported("import autoprof.cli") == []


def test_help_imports_no_heavy_library():
    """`autoprof --help` and every `autoprof COMMAND --help`, one after the other in one fresh
    interpreter: the first help that loads a HEAVY library is the one named (imports only
    accumulate, so each is seen where it first happens)."""
    code = f"""
import contextlib, io, json, sys
from autoprof.cli import cli
first = {{}}
for args in [[], *([name] for name in {list(COMMANDS)!r})]:
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(args=[*args, "--help"], standalone_mode=False) == 0
    for name in {HEAVY!r}:
        if name in sys.modules:
            first.setdefault(name, " ".join(["autoprof", *args, "--help"]))
print(json.dumps(first))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {}


def test_help_lists_every_command_whole_without_importing_one():
    """`autoprof --help` reads the summaries table: no command module is imported, and each
    summary is its command's own (the first paragraph of its docstring), not cut short."""
    assert list(SUMMARIES) == list(COMMANDS)
    code = """
import contextlib, io, json, sys
from autoprof.cli import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert cli.main(args=["--help"], standalone_mode=False) == 0
loaded = sorted(m for m in sys.modules if m.startswith("autoprof.commands."))
print(json.dumps({"loaded": loaded, "help": out.getvalue()}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout.splitlines()[-1])
    assert shown["loaded"] == []
    listing = " ".join(shown["help"].split())
    for name, target in COMMANDS.items():
        module, _, attr = target.partition(":")
        summary = getattr(importlib.import_module(module), attr).get_short_help_str(10**6)
        assert SUMMARIES[name] == summary, name
        assert f"{name} {summary}" in listing, name


def test_help_names_the_catalog_variable():
    assert common.ENV_EVENTS_DIR == host.ENV_EVENTS_DIR


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["aggregate", "/nonexistent/out"], "/nonexistent/out"),
        (["events", "show", "NO_SUCH_EVENT.ANY"], "unknown event"),
        (["events", "search", "("], "bad pattern"),
        (["schedule", "--events-dir", "/nonexistent", "--cpu", "SKX"], "/nonexistent"),
        (["profile", "-e", "NO_SUCH_EVENT.ANY", "--", "true"], "unknown event"),
        (["runs", "list", "--store", "mysql://u@h/db"], "unsupported store URL scheme"),
        (["jobs", "list", "--redis", "redis://127.0.0.1:1/0"], "Redis redis://127.0.0.1:1/0"),
        (["submit", "--redis", "redis://127.0.0.1:1/0", "--", "true"], "exactly one of"),
        (["analyze", "stats", "/nonexistent.csv"], "/nonexistent.csv"),
        (["worker", "--redis", "redis://127.0.0.1:1/0"], "--allow"),
    ],
)
def test_bad_input_is_one_error_line(args, says, tmp_path, cli_run):
    assert says in one_error_line(cli_run(*args, cwd=tmp_path))


def test_a_malformed_catalog_is_one_error_line(tmp_path, cli_run):
    (tmp_path / "mapfile.csv").write_text("not,a\nperfmon,mapfile\n")
    line = one_error_line(cli_run("schedule", "--events-dir", tmp_path, "--cpu", "SKX"))
    assert f"{tmp_path / 'mapfile.csv'} names no Intel, AMD or Arm64 CPU" in line
    (tmp_path / "mapfile.csv").write_text("Family-model,Version\nGenuineIntel-6-55,v1\n")
    line = one_error_line(cli_run("schedule", "--events-dir", tmp_path, "--cpu", "SKX"))
    assert f"malformed {tmp_path / 'mapfile.csv'}" in line


def test_a_broken_results_file_is_one_error_line(tmp_path, cli_run):
    broken = tmp_path / "results.csv"
    broken.write_bytes(b'EVENT_NAME,SAMPLE_VALUE\n\x00\xff,"unclosed\n')
    line = one_error_line(cli_run("analyze", "stats", broken, "-o", tmp_path))
    assert f"{broken}: not a readable results.csv" in line


def test_perf_missing_from_path_is_one_error_line(tmp_path, cli_run):
    """No perf on $PATH: the profile stops before it starts, saying what to install."""
    proc = cli_run("profile", "-e", "task-clock", "-o", tmp_path / "out", "--", "true",
                   env={"PATH": str(tmp_path)})  # fmt: skip
    assert "perf is not installed" in one_error_line(proc)
    assert not (tmp_path / "out").exists()


def test_events_show_takes_what_profile_takes(cli_run):
    """`profile -e syscalls:sys_enter_write` measures it, so `events show` describes it (it used
    to say "unknown event" unless --tracepoints was given)."""
    if "syscalls:sys_enter_write" not in host.tracepoints():
        pytest.skip("this machine has no syscalls:sys_enter_write tracepoint (tracefs)")
    shown = cli_run("events", "show", "syscalls:sys_enter_write")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("syscalls:sys_enter_write  [tracepoint]")


# --- output meant for pipes (#17 item 12) -------------------------------------------------------


def test_piped_output_is_not_wrapped(intel_dir, cli_run):
    """rich assumes 80 columns where stdout is no terminal; the summary line is longer."""
    proc = cli_run("schedule", "--events-dir", intel_dir, "--cpu", "SKX")
    assert proc.returncode == 0, proc.stderr
    [summary] = [line for line in proc.stdout.splitlines() if " events in " in line]
    assert len(summary) > 80 and summary.endswith(" ms")
    assert "scheduled in" in summary


def test_next_hints_are_shell_quoted():
    hint = common.next_hint("autoprof", "aggregate", Path("my out/$HOME [1]"))
    assert hint == "next: autoprof aggregate 'my out/$HOME [1]'"
    assert shlex.split(hint.removeprefix("next: "))[-1] == "my out/$HOME [1]"


def test_next_hint_is_one_shell_quoted_line(tmp_path):
    out = tmp_path / ("a folder name long enough to cross eighty columns" + " [x] $HOME")
    proc = process("profile", "-e", "task-clock", "-o", out, "--", "true")
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if "next:" in line]
    hint = line.split("next: ", 1)[1]
    assert shlex.split(hint) == ["autoprof", "aggregate", str(out)]


@pytest.fixture
def stored_run(tmp_path, cli_run) -> tuple[str, str]:
    """(store, run id) of a stored synthetic profile whose results.csv is about 1 MB."""
    out = make_out(tmp_path / "out", intervals=200)
    store = str(tmp_path / "store.db")
    assert cli_run("upload", out, "--store", store).returncode == 0
    listed = cli_run("runs", "list", "--store", store).stdout.splitlines()
    return store, listed[1].split()[0]


@pytest.mark.slow  # a real process, a real pipe
def test_closed_pipe_ends_quietly(stored_run):
    store, run_id = stored_run
    autoprof = shlex.join([sys.executable, "-m", "autoprof"])
    script = f"{autoprof} runs export {run_id} -o - --store {shlex.quote(store)} | head -1"
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {script}"], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.startswith("EVENT_NAME,") and proc.stdout.count("\n") == 1
    assert proc.stderr == ""
    assert proc.returncode == 0


def _wait_for_read(pid: int, timeout_s: float = 30.0) -> None:
    """Until process `pid` (its main thread) sleeps reading its terminal: the test's pty."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if Path(f"/proc/{pid}/wchan").read_text() in ("wait_woken", "n_tty_read"):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never waited for input")


@pytest.mark.slow  # a real process, a real SIGINT
def test_ctrl_c_exits_130_without_a_traceback(stored_run, cli_run):
    """Ctrl-C at `runs delete`'s confirmation prompt, sent as SIGINT to the real process."""
    store, run_id = stored_run
    argv = [sys.executable, "-m", "autoprof", "runs", "delete", run_id, "--store", store]
    terminal, tty = pty.openpty()  # the prompt is asked on a terminal only
    with subprocess.Popen(argv, stdin=tty, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        os.close(tty)
        assert proc.stdout.read(len("delete run")) == b"delete run"  # the prompt is up
        # as a user would, press Ctrl-C while the prompt waits: a SIGINT that lands between
        # the prompt and the read is lost inside CPython's input(), which flushes stderr first
        # and clears any error that raises (Python/bltinmodule.c, builtin_input_impl)
        _wait_for_read(proc.pid)
        os.kill(proc.pid, signal.SIGINT)
        # stdin stays open: closing it would race the signal with an EOF, a "no" to click
        proc.wait(timeout=30)
        stderr = proc.stderr.read()
    os.close(terminal)
    assert proc.returncode == 130
    assert stderr.decode().strip() == "autoprof: interrupted"
    assert run_id in cli_run("runs", "list", "--store", store).stdout  # nothing was deleted


def test_every_option_says_what_it_does():
    """Each option of each command has a help text (#41: report --top, memory --top, serve
    --port, demo -o and worker --hostname had none)."""
    import click

    from autoprof.cli import cli

    def commands(group: click.Group, prefix: str):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                yield from commands(command, f"{prefix}{name} ")
            elif command is not None:
                yield f"{prefix}{name}", command

    bare = [
        f"{name} {'/'.join(param.opts)}"
        for name, command in commands(cli, "")
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert not bare, bare


@pytest.mark.parametrize("text", ["", "\n\n", "# my events\n   # none yet\n"])
def test_an_events_file_that_names_no_event_is_an_error(cli_run, tmp_path, text):
    """Not "every event": that would be the longest profile the machine offers."""
    events = tmp_path / "events.txt"
    events.write_text(text)
    commands = (["profile", "--dry-run"], ["bench", "-n", "2"], ["submit", "--host", "nowhere"])
    for command in commands:
        line = one_error_line(cli_run(*command, "--events", events, "--", "true"))
        assert "names no event" in line and str(events) in line


@pytest.mark.parametrize("group", [[], ["events"], ["runs"], ["store"], ["jobs"], ["analyze"],
                                   ["metrics"]])  # fmt: skip
def test_help_lists_every_summary_whole(cli_run, group):
    """Each command's help opens with a one-line summary short enough for an 80-column
    listing: click cut every long first sentence with "..."."""
    listing = cli_run(*group, "--help").stdout.split("Commands:")[1]
    rows = [line for line in listing.splitlines() if line.strip()]
    assert rows and not [row for row in rows if row.endswith("...")], listing
    assert all(row.rstrip().endswith(".") for row in rows), listing
