"""Giving a long-lived process's freed memory back to the system after a one-off peak.

glibc's malloc keeps what a process frees for its next allocations, and raises its mmap
threshold each time it frees a large mmap'ed block (mallopt(3), M_MMAP_THRESHOLD: dynamic),
so that later large buffers come from the heap too and stay there. A server that once builds
a run's summary (`store.summary`: some 110 MiB more at 1 M rows) held that memory for the rest
of its life, and the downloads that followed grew it further. A fixed mmap threshold keeps the
heap small too, but maps and faults in every large buffer anew: a first download then took
2.4x a static server's time instead of 1.8x.
"""

from __future__ import annotations

import ctypes


def release_free_memory() -> None:
    """Return the heap's free pages to the system (glibc's malloc_trim); nothing where the C
    library has no such call (musl)."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)
