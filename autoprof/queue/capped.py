"""RQ jobs whose data may expand to MAX_JOB_DATA bytes at most.

RQ stores a job's data zlib-compressed and `Job.restore` decompresses it whole: a few hundred KB
in Redis can expand to gigabytes in every worker and `jobs list` that reads the job. A spec is a
few KB of JSON; CappedJob inflates at most MAX_JOB_DATA + 1 bytes and, past that, keeps nothing
and refuses the job when its data is read.
"""

from __future__ import annotations

import zlib
from typing import Any

from rq.exceptions import DeserializationError
from rq.job import Job
from rq.utils import decode_redis_hash

MAX_JOB_DATA = 1 << 20


class TooLarge(DeserializationError):
    """Job data past MAX_JOB_DATA: refused, never inflated (a DeserializationError, which RQ's
    failure handling expects for unreadable jobs)."""

    def __str__(self) -> str:
        return f"refused: job data expands past {MAX_JOB_DATA} bytes"


def inflated_size_ok(raw: bytes) -> bool:
    """Whether `raw` (zlib, or plain as RQ falls back to) is at most MAX_JOB_DATA once inflated;
    inflates at most MAX_JOB_DATA + 1 bytes to know."""
    if len(raw) > MAX_JOB_DATA:
        return False
    try:
        return len(zlib.decompressobj().decompress(raw, MAX_JOB_DATA + 1)) <= MAX_JOB_DATA
    except zlib.error:
        return True  # stored plain: its size was checked above


class CappedJob(Job):
    too_large = False

    def restore(self, raw_data: Any) -> Any:
        data = decode_redis_hash(raw_data).get("data")
        too_large = isinstance(data, bytes) and not inflated_size_ok(data)
        if too_large:
            raw_data = {k: v for k, v in raw_data.items() if k not in ("data", b"data")}
            raw_data["data"] = b""  # RQ falls back to it as plain data; nothing to inflate
        restored = super().restore(raw_data)
        self.too_large = too_large
        return restored

    def _deserialize_data(self) -> None:
        if self.too_large:
            raise TooLarge()
        super()._deserialize_data()
