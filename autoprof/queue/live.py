"""Live intervals of queue jobs: the worker publishes them, `serve` and `jobs watch` read them.

While a job profiles, a thread of the worker's work horse tails the job's out/ folder (the
`perf stat -I` CSV perf writes as it counts, `results.live.Tail`) every PERIOD_S and appends
the new points to the Redis stream KEY (one per job; XADD capped at MAXLEN entries), then one
`end` entry; the stream expires TTL_S after that. A reader (`Follow`) reads from the last entry
it saw, so any number of pages and terminals follow one job, and one that comes late still
reads what the stream holds. Publishing is best effort: a Redis error loses points, never the
profile.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from autoprof.results.live import Tail

KEY = "autoprof:live:{}"
MAXLEN = 10_000  # entries (batches of points), trimmed oldest first
PERIOD_S = 0.05
TTL_S = 7 * 86400  # as long as a finished job stays listed
READ_COUNT = 1000

log = logging.getLogger(__name__)


def key(job_id: str) -> str:
    return KEY.format(job_id)


def _add(conn: redis.Redis, job_id: str, fields: dict[str, str]) -> None:
    try:
        conn.xadd(key(job_id), fields, maxlen=MAXLEN, approximate=True)  # type: ignore[arg-type]
    except redis.RedisError as err:
        log.warning("job %s: live intervals not published: %s", job_id, err)


@contextlib.contextmanager
def publishing(
    conn: redis.Redis, job_id: str, out: Path, period_s: float = PERIOD_S
) -> Iterator[None]:
    """Publish the intervals perf writes under `out` while the block runs, then `end`."""
    stop = threading.Event()
    tail = Tail(out)

    def publish() -> None:
        while True:
            stopping = stop.wait(period_s)
            if tail.poll():
                _add(conn, job_id, {"points": json.dumps(tail.points)})
                tail.points.clear()  # sent: the stream keeps them, not the horse
            if stopping:
                return

    thread = threading.Thread(target=publish, name=f"autoprof-live-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _add(conn, job_id, {"end": "1"})
        with contextlib.suppress(redis.RedisError):
            conn.expire(key(job_id), TTL_S)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Follow:
    """Points of one job's stream read so far, oldest first: the same `poll` and `points` as
    `results.live.Tail`, so the web streams a remote job as it streams a local one."""

    conn: redis.Redis
    job_id: str
    last: str = "0-0"
    points: list[dict] = field(default_factory=list)
    ended: bool = False  # the worker published its `end`

    def poll(self, block_ms: int | None = None) -> int:
        """Read the entries added since the last poll (waiting up to `block_ms` for one);
        returns how many points came."""
        before = len(self.points)
        streams = {key(self.job_id): self.last}
        found: Any = self.conn.xread(streams, count=READ_COUNT, block=block_ms)  # type: ignore[arg-type]
        for _, entries in found or []:
            for entry_id, values in entries:
                self.last = _text(entry_id)
                fields = {_text(k): _text(v) for k, v in values.items()}
                if "points" in fields:
                    self.points += json.loads(fields["points"])
                if "end" in fields:
                    self.ended = True
        return len(self.points) - before
