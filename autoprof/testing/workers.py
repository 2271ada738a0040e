"""Helpers for the queue's tests and benchmark: a Redis database of one's own, real workers.

`claim` takes the highest Redis database index that is empty, atomically (a claim key is set
only while the database holds no key at all), so concurrent test runs never share or flush each
other's data. `WorkerProcess` is `python -m autoprof worker` as a subprocess.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import redis
from rq import Worker

_CLAIM = (
    "if redis.call('DBSIZE') == 0 then "
    "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', 3600) else return false end"
)


def claim(base: str) -> tuple[str, redis.Redis] | None:
    """(URL of an empty database index now ours, client on it); None when none is free.
    Raises redis.RedisError when no server answers at `base`."""
    redis.Redis.from_url(base, socket_connect_timeout=2).ping()
    token = uuid.uuid4().hex
    for db in range(15, 0, -1):
        client = redis.Redis.from_url(f"{base}/{db}")
        if client.eval(_CLAIM, 1, "autoprof-test-claim", token):
            return f"{base}/{db}", client
    return None


class WorkerProcess:
    """`autoprof worker` as a real process, with test-speed heartbeats and maintenance."""

    def __init__(self, tmp: Path, redis_text: str, store: str, hostname: str, allow: str):
        self.hostname, self.workdir = hostname, tmp / f"work-{hostname}"
        self.log = tmp / f"worker-{hostname}.log"
        argv = [sys.executable, "-I", "-m", "autoprof", "worker", "--redis", redis_text]
        argv += ["--store", store, "--hostname", hostname, "--allow", allow, "--keep"]
        argv += ["--max-load", "1000", "--load-poll", "0.1", "--heartbeat", "1"]
        argv += ["--maintenance", "1", "--workdir", str(self.workdir)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def horse(self) -> int | None:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        pids = children.read_text().split() if children.exists() else []
        return int(pids[0]) if pids else None

    def kill(self) -> None:
        """SIGKILL the worker and its work horse (the job's process), as a crash would."""
        horse = self.horse()
        if horse is None:
            raise AssertionError("the worker has no work horse: no job running")
        os.kill(horse, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_ready(conn: redis.Redis, names: list[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hosts = {w.name.rsplit(".", 1)[0] for w in Worker.all(connection=conn)}
        if set(names) <= hosts:
            return
        time.sleep(0.1)
    raise AssertionError(f"workers {names} did not start")
