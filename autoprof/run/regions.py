"""Named regions of one run: the relay between the workload's markers and perf's counters.

The workload inherits one end of a Unix SOCK_SEQPACKET socket pair, named by
`autoprof.markers.ENV`; each marker is one message, ``B <tid> <name>`` or ``E <tid> <name>``,
and waits for one byte back. The relay (a thread of the runner) takes copies of perf's event
descriptors once perf counts (`perf.counters`), and at each marker reads every counter while
the marking thread waits, then answers. A region counts from the reading at its first entry
to the reading at its matching exit: its deltas accumulate over entries. A region is active
while any thread of the workload is inside it (perf counts the whole process tree, threads
summed), so nested or concurrent entries of one name are counted once; each thread's
entries and exits are checked for balance on a stack of its own.

All regions of a run come from the same counters at once: `--region` costs no run more than
the plan. The record (`RegionsRecord`, OUT/runs/.../regions.json) holds raw readings in perf's
event order; `aggregate` scales them as perf scaled its totals and writes the region rows.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from autoprof.errors import AutoprofError
from autoprof.markers import ACK, ENV, NAME_MAX
from autoprof.perf import counters
from autoprof.perf.counters import ZERO, Reading
from autoprof.util.records import file_format, read_json, write_json

REGIONS_FILE = "regions.json"
CHANNEL_FD = 100  # the workload's end of the marker channel: this descriptor, or the next free
ALL = "all"  # `--region all`: every region the program enters
_MESSAGE_MAX = 2 + 20 + NAME_MAX


@dataclass
class Region:
    """One named region of a run: how often it was entered, and its counts (raw, perf's event
    order) summed over the time it was active."""

    entries: int = 0
    readings: list[Reading] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries, "readings": [_reading_json(r) for r in self.readings]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Region:
        return cls(int(data["entries"]), [Reading(*map(int, r)) for r in data["readings"]])


@dataclass
class RegionsRecord:
    """regions.json of a run: what its markers said and what the counters read.

    `total`: the readings when the workload ended (what perf then printed as its totals, raw);
    `markers`: messages received; `problems`: unbalanced markers, each naming the marker, its
    position (the nth marker of the run) and its thread; `asked`: the regions `--region`
    named (["all"] for every one)."""

    asked: list[str]
    markers: int = 0
    regions: dict[str, Region] = field(default_factory=dict)
    total: list[Reading] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    error: str | None = None  # the counters could not be read: no region counts for this run

    FORMAT: ClassVar[int] = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.FORMAT,
            "asked": self.asked,
            "markers": self.markers,
            "regions": {name: r.to_json() for name, r in self.regions.items()},
            "total": [_reading_json(r) for r in self.total],
            "problems": self.problems,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], path: object = REGIONS_FILE) -> RegionsRecord:
        file_format(data, cls.FORMAT, path)
        return cls(
            asked=[str(a) for a in data.get("asked", [])],
            markers=int(data.get("markers", 0)),
            regions={str(k): Region.from_json(v) for k, v in data.get("regions", {}).items()},
            total=[Reading(*map(int, r)) for r in data.get("total", [])],
            problems=[str(p) for p in data.get("problems", [])],
            error=data.get("error"),
        )

    def never_entered(self) -> list[str]:
        """The regions asked for by name that no marker entered."""
        return [name for name in self.asked if name != ALL and name not in self.regions]


def _reading_json(r: Reading) -> list[int]:
    return [r.value, r.enabled, r.running]


def read_record(folder: Path) -> RegionsRecord | None:
    """The regions.json of a run folder, or None when the run counted no region."""
    path = folder / REGIONS_FILE
    if not path.exists():
        return None
    return RegionsRecord.from_json(read_json(path), path)


def parse(message: bytes) -> tuple[str, int, str] | None:
    """(op, tid, name) of a marker's message, or None when it is not one (a name with a control
    character is none: the workload's text is shown on terminals and pages)."""
    op, _, rest = message.partition(b" ")
    tid, _, name = rest.partition(b" ")
    if op not in (b"B", b"E") or not tid.isdigit() or not name or len(name) > NAME_MAX:
        return None
    text = name.decode(errors="replace")
    if any(c < " " or c == "\x7f" for c in text):  # the workload's text reaches terminals
        return None
    return op.decode(), int(tid), text


class Tally:
    """Region accounting over the markers of one run (pure: readings in, a record out)."""

    def __init__(self, asked: list[str]):
        self.record = RegionsRecord(asked=asked)
        self.every = ALL in asked
        self.active: Counter[str] = Counter()
        self.since: dict[str, list[Reading]] = {}
        self.stacks: dict[int, list[str]] = {}

    def _wanted(self, name: str) -> bool:
        return self.every or name in self.record.asked

    def mark(self, message: bytes, now: list[Reading]) -> None:
        """One marker, read at `now` while its thread waits."""
        record = self.record
        record.markers += 1
        parsed = parse(message)
        if parsed is None:
            record.problems.append(
                f"marker {record.markers}: {message[:80]!r} is not a marker message"
            )
            return
        op, tid, name = parsed
        stack = self.stacks.setdefault(tid, [])
        where = f"marker {record.markers}, thread {tid}"
        if op == "B":
            stack.append(name)
            self._enter(name, now)
            return
        if name not in stack:
            record.problems.append(f"end of {name!r} without a begin ({where})")
            return
        if stack[-1] != name:
            record.problems.append(
                f"end of {name!r} while {stack[-1]!r}, entered inside it, is still open: "
                f"unbalanced nesting ({where})"
            )
        del stack[len(stack) - 1 - stack[::-1].index(name)]
        self._leave(name, now)

    def _enter(self, name: str, now: list[Reading]) -> None:
        if not self._wanted(name):
            return
        region = self.record.regions.setdefault(name, Region(readings=[ZERO] * len(now)))
        region.entries += 1
        if self.active[name] == 0:
            self.since[name] = now
        self.active[name] += 1

    def _leave(self, name: str, now: list[Reading]) -> None:
        if not self._wanted(name) or self.active[name] == 0:
            return
        self.active[name] -= 1
        if self.active[name] == 0:
            region = self.record.regions[name]
            start = self.since.pop(name)
            if len(start) == len(now) == len(region.readings):  # else the reads failed: no counts
                region.readings = [
                    acc + (b - a) for acc, a, b in zip(region.readings, start, now, strict=True)
                ]

    def end(self, now: list[Reading]) -> RegionsRecord:
        """The record once the workload has ended (`now`: the final readings): a region still
        open is counted to the end and named as never left."""
        for tid, stack in self.stacks.items():
            for name in reversed(stack):
                self.record.problems.append(
                    f"{name!r} entered but never left (thread {tid}): counted to the end"
                )
                self._leave(name, now)
        self.stacks.clear()
        self.record.total = now
        return self.record


class Relay:
    """The marker channel of one run and the thread that answers it (see the module's doc).

    `env` and `pass_fds` go to the workload; `start(perf_pid)` once perf counts, before the
    workload runs; `finish(folder)` once it has ended, before perf prints its last counts."""

    def __init__(self, asked: list[str]):
        self.tally = Tally(asked)
        self._ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # the workload's end at a fixed number (the lowest free from CHANNEL_FD): its
        # AUTOPROF_MARKERS, and so the instructions its markers' look-up runs, are the same
        # in every run
        self._theirs = socket.socket(
            fileno=fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, CHANNEL_FD)
        )
        theirs.close()
        self._fds: list[int] = []
        self._thread: threading.Thread | None = None
        self._stop_r, self._stop_w = os.pipe()
        self.error: str | None = None
        self._closed = False

    @property
    def env(self) -> dict[str, str]:
        return {ENV: str(self._theirs.fileno())}

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._theirs.fileno(),)

    def spawned(self) -> None:
        """The workload holds its end now: ours alone stays here (its exit then reads as EOF)."""
        self._theirs.close()

    def start(self, perf_pid: int) -> None:
        try:
            self._fds = counters.event_fds(perf_pid)
        except AutoprofError as err:
            self.error = str(err)
        self._thread = threading.Thread(target=self._serve, name="autoprof-markers", daemon=True)
        self._thread.start()

    def _read(self) -> list[Reading]:
        if self.error is not None:
            return []
        try:
            return counters.read_all(self._fds)
        except (OSError, AutoprofError) as err:
            self.error = f"cannot read perf's counters: {err}"
            return []

    def _serve(self) -> None:
        while True:
            ready, _, _ = select.select([self._ours.fileno(), self._stop_r], [], [])
            if self._stop_r in ready:
                return
            try:
                message = self._ours.recv(_MESSAGE_MAX + 1)
            except OSError:
                return
            if not message:
                return  # every copy of the workload's end is closed
            try:
                self.tally.mark(message, self._read())
            except Exception as err:  # never leave the marking thread waiting for its answer
                self.error = self.error or f"region accounting failed: {err}"
            with contextlib.suppress(OSError):
                self._ours.send(ACK)

    def _stop(self) -> None:
        if self._thread is not None:
            with contextlib.suppress(OSError):
                os.write(self._stop_w, b"x")
            self._thread.join()
            self._thread = None

    def finish(self, folder: Path) -> RegionsRecord:
        """Stop answering, read the final counts, write regions.json in `folder`."""
        self._stop()
        record = self.tally.end(self._read())
        record.error = self.error
        if record.error:
            record.regions, record.total = {}, []
        self.close()
        write_json(folder / REGIONS_FILE, record.to_json())
        return record

    def close(self) -> None:
        """Stop the thread and close every descriptor (again: nothing)."""
        if self._closed:
            return
        self._stop()
        self._closed = True
        counters.close(self._fds)
        self._fds = []
        for sock in (self._ours, self._theirs):
            sock.close()
        for fd in (self._stop_r, self._stop_w):
            with contextlib.suppress(OSError):
                os.close(fd)
