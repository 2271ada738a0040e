"""A run's processes started with posix_spawn (`perf.spawn`) get what Popen gave them: the
descriptors passed and no other, the signals Python ignores back at their default, the
program found on the environment's PATH, and Popen's exit codes."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from autoprof.perf import spawn

pytestmark = pytest.mark.skipif(not spawn.usable(), reason="posix_spawn cannot pass fds here")

LIST_FDS = "import json, os; print(json.dumps(sorted(map(int, os.listdir('/proc/self/fd')))))"


def output(tmp_path, argv: list[str], **kwargs) -> str:
    """What `argv`, started by `spawn.start`, writes to its standard output."""
    out = os.open(tmp_path / "output", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC)
    try:
        child = spawn.start(argv, env=os.environ, stdout=out, **kwargs)
    finally:
        os.close(out)
    assert isinstance(child, spawn.Spawned) and child.wait() == 0
    return (tmp_path / "output").read_text()


def test_a_child_has_the_descriptors_passed_and_none_inherited(tmp_path):
    inherited = os.open(os.devnull, os.O_RDONLY)  # as one this process was started with
    given = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.set_inheritable(inherited, True)
    spawn._private.cache_clear()  # as before this process's first child
    try:
        listed = output(tmp_path, [sys.executable, "-I", "-c", LIST_FDS], pass_fds=(given,))
    finally:
        os.close(inherited)
        os.close(given)
    fds = set(json.loads(listed))
    assert {0, 1, 2, given} <= fds and inherited not in fds
    assert len(fds - {0, 1, 2, given}) <= 1  # the child's own listing of /proc/self/fd


def test_a_child_has_sigpipe_at_its_default_as_popen_restores_it(tmp_path):
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN  # as Python starts
    status = output(tmp_path, ["grep", "^SigIgn:", "/proc/self/status"])  # grep's own
    ignored = int(status.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))


def test_the_program_is_found_on_the_environments_path_and_ends_as_popen_says(tmp_path):
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "ends-killed"
    script.write_text("#!/bin/sh\nkill -9 $$\n")
    script.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    assert spawn.start(["ends-killed"], env=env).wait() == -signal.SIGKILL
    with pytest.raises(FileNotFoundError):
        spawn.start(["ends-killed"], env={"PATH": "/nonexistent"})
    held = spawn.start(["sleep", "30"], env=env)
    assert held.poll() is None
    held.kill()
    assert held.wait() == -signal.SIGKILL and held.poll() == -signal.SIGKILL
