"""Overlap producing the next item of a stream with consuming this one.

Reading a file, parsing it with pyarrow, waiting on a database socket: all let go of the GIL, so
one thread that makes the next items while the caller works on the current one keeps two cores
busy (`aggregate` reads perf.csv chunks ahead; the store reads result chunks ahead of the bulk
insert, and a run's rows ahead of the CSV writer).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def prefetched(items: Iterator[T], ahead: int = 2) -> Iterator[T]:
    """`items`, made in a thread up to `ahead` in advance (its errors raised in order)."""
    end = object()
    with ThreadPoolExecutor(max_workers=1) as pool:  # one worker: next() calls in order
        pending = deque(pool.submit(next, items, end) for _ in range(ahead))
        while (item := pending.popleft().result()) is not end:
            pending.append(pool.submit(next, items, end))
            yield item  # type: ignore[misc]
