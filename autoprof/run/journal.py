"""The journal of a profile (`out/journal.jsonl`): one line per finished run attempt, so that a
resumed profile runs only what is not finished.

A line is appended in one write when a (run, repeat) ends, then fsynced while the next run goes
on: Ctrl-C, SIGTERM or a crash lose at most the run in progress, a power cut at most one more.
A line cut short by a crash is skipped when read.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from autoprof.run import outdir
from autoprof.run.outdir import RunRecord
from autoprof.util import records
from autoprof.util.records import file_format, known_fields
from autoprof.util.status import FINAL_RUN_STATUSES, RunStatus


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
    path = out / outdir.JOURNAL
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            data = records.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        try:
            entries.append(Entry.from_json(data, path))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return entries


def finished(out: Path) -> set[tuple[int, int]]:
    """(run, repeat) pairs whose last journal entry is final."""
    last = {(e.run, e.repeat): e.status for e in read(out)}
    return {key for key, status in last.items() if status in FINAL_RUN_STATUSES}


class Journal:
    """Appends entries to `out`'s journal; each is fsynced in a thread while the next run goes
    on, and the next append waits for that fsync, so entries reach the disk in order."""

    def __init__(self, out: Path):
        self.path = out / outdir.JOURNAL
        self._syncing: threading.Thread | None = None

    def append(self, entry: Entry) -> None:
        """Write the entry now (in one write: a killed profiler leaves a whole line or none)."""
        self.synced()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(entry.to_json()) + "\n").encode())
        except BaseException:
            os.close(fd)
            raise
        self._syncing = threading.Thread(target=_sync_and_close, args=(fd,), daemon=True)
        self._syncing.start()

    def synced(self) -> None:
        """Wait until the last entry is on disk."""
        if self._syncing is not None:
            self._syncing.join()
            self._syncing = None


def _sync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
