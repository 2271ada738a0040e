"""JSON records (manifest.json, run.json, journal lines, report.json, bench.json, memory.json):
written whole or not at all (`write_json`), and read back from other autoprof versions: each
file carries a `format` number; a newer one is refused, an older one upgraded by its reader,
and keys a version does not know are ignored.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from autoprof.errors import AutoprofError, NewerFormat
from autoprof.util import atomic


def loads(text: str | bytes) -> Any:
    """`json.loads`, with a document nested too deep for Python's reader (which raises
    RecursionError) a ValueError like any other broken file: readers report it in one line."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def write_json(
    path: Path, data: Any, *, compact: bool = False, lines: bool = False, mode: int = 0o666
) -> None:
    """Write JSON atomically: into a temp file of this process and thread beside `path`, then
    renamed over it, so an interrupted write leaves no half file and writers racing on one path
    each leave a whole one. `mode` is the file's permissions before the umask (0o644: never
    writable by others, whatever the umask); `compact` leaves out white space (a large cache
    entry); `lines` writes an object a key a line (`key_lines`). Errors are raised, the temp
    file removed (`util.atomic`)."""
    if compact:
        text = json.dumps(data, separators=(",", ":"))
    else:
        text = key_lines(data) if lines else json.dumps(data, indent=2) + "\n"
    atomic.write(path, text, mode)


_encode = json.JSONEncoder().encode  # the C encoder (`indent` makes json use Python's)


def key_lines(data: dict[str, Any]) -> str:
    """A JSON object, each key on a line of its own with its value on one line: as readable as
    `indent` for a flat record, and a quarter of its cost (a run record is written a run)."""
    body = ",\n".join([f"  {_encode(key)}: {_encode(value)}" for key, value in data.items()])
    return "{\n" + body + "\n}\n"


def read_json(path: Path) -> Any:
    """A JSON file (`loads`: a document nested too deep is a ValueError)."""
    return loads(path.read_text())


def file_format(data: object, known: int, path: object) -> int:
    """The `format` of a file's JSON object (1 without one: files written before formats were
    recorded); raises NewerFormat for a format newer than `known`."""
    found = data.get("format", 1) if isinstance(data, dict) else 1
    if not isinstance(found, int) or found < 1:
        raise AutoprofError(f"{path}: format {found!r} is not a format number")
    if found > known:
        raise NewerFormat(path, found, known)
    return found


def known_fields(cls: type, data: Any) -> dict[str, Any]:
    """The entries of `data` that are fields of dataclass `cls`: a file written by a version
    with more fields still reads (the rest take their defaults). TypeError for a non-object."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected a JSON object, not {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
