"""The journal of a profile (`out/journal.jsonl`): one line per finished run attempt, so that a
resumed profile runs only what is not finished (`finished`).

A line is appended in one write when a (run, repeat) ends, then fsynced while the next runs go
on: Ctrl-C, SIGTERM or a crash lose at most the run in progress, a power cut also the runs that
ended in the last SYNC_PAUSE_S (fsyncs are that far apart: one a run cost a plan of short runs
0.1 ms of CPU a run, and run folders are written back by the kernel's own timer anyway).
A line cut short by a crash is skipped when read.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from autoprof.run import outdir
from autoprof.run.outdir import RunRecord
from autoprof.util import records
from autoprof.util.owned import open_file
from autoprof.util.records import file_format, known_fields
from autoprof.util.status import FINAL_RUN_STATUSES, RunStatus

SYNC_PAUSE_S = 0.2  # between two fsyncs of the journal: what a power cut may lose at most


@dataclass
class Entry:
    """The end of one attempt at a (run, repeat): its status (the first part's that was not ok)
    and the folders of its parts."""

    run: int
    repeat: int
    status: str
    end: str = ""
    folders: list[str] = field(default_factory=list)

    FORMAT: ClassVar[int] = 1

    @classmethod
    def of(cls, records: list[RunRecord]) -> Entry:
        last = records[-1]
        status = next((r.status for r in records if r.status != RunStatus.OK), RunStatus.OK)
        return cls(last.run, last.repeat, status, last.end, [r.folder_name for r in records])

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, **vars(self), "folders": list(self.folders)}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: object = outdir.JOURNAL) -> Entry:
        """Raises NewerFormat for a line of a newer format, KeyError/TypeError/ValueError for
        one that is not an entry."""
        file_format(data, cls.FORMAT, path)
        return cls(
            **{
                **known_fields(cls, data),
                "run": int(data["run"]),
                "repeat": int(data["repeat"]),
                "status": str(data["status"]),
            }
        )


def read(out: Path) -> list[Entry]:
    """The entries of `out`'s journal in the order written; lines cut short are skipped."""
    return [entry for entry in _lines(out) if isinstance(entry, Entry)]


def unreadable(out: Path) -> list[int]:
    """The numbers of the journal's lines `read` skipped (cut short by a crash, or garbage):
    `aggregate` says so."""
    return [n for n, entry in enumerate(_lines(out), 1) if entry is None]


def _lines(out: Path) -> list[Entry | None]:
    """Each line of `out`'s journal: its entry, or None where it cannot be read."""
    path = out / outdir.JOURNAL
    if not path.exists():
        return []
    found: list[Entry | None] = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            found.append(Entry.from_json(records.loads(line), path))
        except (KeyError, TypeError, ValueError, AttributeError):
            found.append(None)  # a line cut short by a crash, or not autoprof's
    return found


def finished(out: Path) -> set[tuple[int, int]]:
    """(run, repeat) pairs whose last journal entry is final and whose folders each hold their
    run.json: the journal is fsynced, a run's files are left to the kernel's writeback, so a
    power cut can keep an entry and lose (or empty) its folder's record; such a run is not
    done, and a resume runs it again."""
    last = {(e.run, e.repeat): e for e in read(out)}
    return {
        key
        for key, entry in last.items()
        if entry.status in FINAL_RUN_STATUSES and all(_kept(out, f) for f in entry.folders)
    }


def _kept(out: Path, folder: str) -> bool:
    """Run folder `folder` holds a run.json with something in it (one stat a run)."""
    try:
        return os.stat(os.path.join(out, outdir.RUNS, folder, outdir.RUN_RECORD)).st_size > 0
    except (OSError, ValueError):  # missing; a name no folder can have
        return False


class Journal:
    """Appends entries to `out`'s journal, each in one write as its run ends; a thread of the
    journal's own fsyncs the file while the runs go on, at most once every SYNC_PAUSE_S, so the
    entries reach the disk in order and no run waits for the disk (a thread and an fsync a run,
    the next run waiting for it, cost 0.4 ms CPU and 1.5-2.5 ms wall a run). An append wakes
    the thread only when it waits for one: not during its pause."""

    def __init__(self, out: Path):
        self.path = out / outdir.JOURNAL
        self._fd: int | None = None
        self._syncer: threading.Thread | None = None
        self._changed = threading.Condition()
        self._written = self._synced = 0  # entries written, entries on disk
        self._closing = False
        self._idle = False  # the thread waits for an entry (not in its pause)

    def append(self, entry: Entry) -> None:
        """Write the entry now (in one write: a killed profiler leaves a whole line or none)."""
        if self._fd is None:
            self._fd = open_file(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            self._closing = False
            self._syncer = threading.Thread(target=self._sync, args=(self._fd,), daemon=True)
            self._syncer.start()
        line = (json.dumps(entry.to_json()) + "\n").encode()
        try:
            written = os.write(self._fd, line)
            if written < len(line):  # the disk filled up mid-line: no half line is left
                os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_CUR) - written)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(self.path)) from None
        with self._changed:
            self._written += 1
            if self._idle:
                self._changed.notify_all()

    def _sync(self, fd: int) -> None:
        while True:
            with self._changed:
                self._idle = True
                while self._synced == self._written and not self._closing:
                    self._changed.wait()
                self._idle = False
                if self._synced == self._written:
                    return
                target = self._written
            try:
                os.fdatasync(fd)  # the lines and the file's length: no timestamps to write
            finally:  # a failed fsync is not retried: the entries were written, the runs go on
                with self._changed:
                    self._synced = target
                    # the pause: entries appended meanwhile are synced together after it
                    self._changed.wait_for(lambda: self._closing, SYNC_PAUSE_S)

    def synced(self) -> None:
        """Wait until every entry is on disk, and close the file (an append opens it again)."""
        if self._syncer is None or self._fd is None:
            return
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._syncer.join()
        os.close(self._fd)
        self._fd, self._syncer = None, None
