"""What perf makes of event strings for another machine's PMUs: the perf_event_attr bits.

In a private mount namespace (``unshare -m``, root) a fake PMU tree
(`autoprof.testing.kernel_formats`) is bind-mounted over /sys/bus/event_source/devices;
``perf stat -vv -e A,B,... -a true`` then parses every string against those ``format/`` files
and prints each attr before failing to open it (the PMU types are fake)::

    perf_event_attr:
      type                             64
      config                           0x200013c
      { bp_addr, config1 }             0x10001
    ...
    Warning:
    NAME event is not supported by the kernel.

(zero fields are not printed; an uncore string gives one attr per box). A string perf cannot
parse (unknown term, value wider than its format) fails the whole command, so a failing batch
is split in halves until each bad string is found alone, with perf's message.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

DEVICES = "/sys/bus/event_source/devices"
BATCH = 400


@dataclass(frozen=True)
class Attr:
    """The bits perf would open an event with."""

    type: int
    config: int = 0
    config1: int = 0
    config2: int = 0


@dataclass
class Parsed:
    """perf's attrs per event name (one per box), and the strings it refused, with why."""

    attrs: dict[str, list[Attr]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def unavailable() -> str | None:
    """Why perf cannot be run over a fake tree here (None when it can)."""
    for tool in ("perf", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    with tempfile.TemporaryDirectory() as empty:
        script = f"mount --bind {shlex.quote(empty)} {DEVICES}"
        probe = subprocess.run(
            ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, check=False
        )
    if probe.returncode:
        return f"no bind mount over {DEVICES} in unshare -m: {probe.stderr.strip()[:200]}"
    return None


_FIELD = re.compile(
    r"^\s+(type|config|\{ bp_addr, config1 \}|\{ bp_len, config2 \}|config1|config2)\s+(\S+)$"
)
_KEYS = {"{ bp_addr, config1 }": "config1", "{ bp_len, config2 }": "config2"}
_NOT_SUPPORTED = re.compile(r"^(.*) event is not supported by the kernel\.$")


def parse_output(text: str) -> dict[str, list[Attr]]:
    """Attrs of ``perf stat -vv`` output, keyed by the event name perf warns about."""
    attrs: dict[str, list[Attr]] = {}
    current: dict[str, int] = {}
    for line in text.splitlines():
        match = _FIELD.match(line)
        if match:
            key = _KEYS.get(match.group(1), match.group(1))
            current[key] = int(match.group(2), 0)
            continue
        match = _NOT_SUPPORTED.match(line)
        if match and current:
            attrs.setdefault(match.group(1), []).append(Attr(**current))
            current = {}
    return attrs


def _perf(tree: Path, specs: list[str]) -> subprocess.CompletedProcess[str]:
    script = (
        f"mount --bind {shlex.quote(str(tree))} {DEVICES} && "
        f"exec perf stat -vv -a -e {shlex.quote(','.join(specs))} true"
    )
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
        timeout=300,
    )


def _error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines()]
    pointer = [line for line in lines if line.startswith("\\___")]
    return pointer[0].lstrip("\\_ ") if pointer else (lines[-1] if lines else "perf failed")


def parse(tree: Path, specs: list[str], batch: int = BATCH) -> Parsed:
    """perf's attrs for every string (names taken from their ``name=`` terms)."""
    parsed = Parsed()
    pending = [specs[i : i + batch] for i in range(0, len(specs), batch)]
    while pending:
        chunk = pending.pop()
        result = _perf(tree, chunk)
        if "Performance counter stats" in result.stderr or "perf_event_attr" in result.stderr:
            parsed.attrs.update(parse_output(result.stderr))
        elif len(chunk) == 1:
            parsed.refused[chunk[0]] = _error(result.stderr)
        else:
            half = len(chunk) // 2
            pending += [chunk[:half], chunk[half:]]
    return parsed
