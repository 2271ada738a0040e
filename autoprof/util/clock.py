"""UTC times as autoprof writes, stores and prints them.

Files on disk hold aware ISO 8601 text (`now_iso`); the results store holds naive UTC
datetimes (`naive_utc`, `naive_now`: SQLite keeps no time zone); RQ hands back naive or aware
times depending on its version (`aware_utc`); tables print `when`.
"""

from __future__ import annotations

import datetime as dt
from typing import overload


def now_iso(timespec: str = "milliseconds") -> str:
    """The current time as aware ISO 8601 text (``2024-06-01T12:00:00.000+00:00``)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec=timespec)


def naive_now() -> dt.datetime:
    """The current time as a naive UTC datetime (the store's convention)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@overload
def naive_utc(stamp: dt.datetime) -> dt.datetime: ...
@overload
def naive_utc(stamp: str | None) -> dt.datetime | None: ...
def naive_utc(stamp: dt.datetime | str | None) -> dt.datetime | None:
    """`stamp` (a datetime or ISO 8601 text; naive means UTC) as a naive UTC datetime; None
    when absent."""
    if not stamp:
        return None
    if not isinstance(stamp, dt.datetime):
        stamp = dt.datetime.fromisoformat(stamp)  # TypeError / ValueError on anything else
    return stamp.astimezone(dt.UTC).replace(tzinfo=None) if stamp.tzinfo else stamp


def aware_utc(stamp: dt.datetime | None) -> dt.datetime | None:
    """`stamp` as an aware UTC datetime (naive means UTC): RQ 1 and 2 store naive UTC times,
    RQ 3 aware ones, and the two cannot be compared or subtracted."""
    if stamp is None:
        return None
    return stamp.replace(tzinfo=dt.UTC) if stamp.tzinfo is None else stamp.astimezone(dt.UTC)


def when(stamp: dt.datetime | None) -> str:
    """A table cell for a time: ``2024-06-01 12:00:00``, or ``-`` when there is none."""
    return stamp.strftime("%Y-%m-%d %H:%M:%S") if stamp else "-"
