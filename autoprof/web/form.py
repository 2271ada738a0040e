"""What the new-measurement form asks for (`JobRequest`, a job's `request.json`), parsed from
the form's JSON with one-line errors; its measurement is the CLI's `Request`, with its limits."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

from autoprof.errors import AutoprofError
from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.run.request import Request

TOOLS = ("stat", "profile", "record")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class JobRequest:
    """What the new-measurement form asks for. `stat` streams its intervals live; `profile`
    repeats; both measure every chosen event without multiplexing. `record` samples for a
    flame graph."""

    tool: str
    command: list[str]
    events: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    duration: float = 10.0  # seconds each group watches `pid` (stat/profile attached to it)
    interval_ms: int = 100
    repeat: int = 1
    reserve: int = 0  # generic counters taken by others (--reserve)
    tags: dict[str, str] = field(default_factory=dict)
    # what part of the program is counted (ProfileOptions' --region, --per-thread, --pin,
    # --core-type: their limits and checks are the CLI's)
    regions: list[str] = field(default_factory=list)
    per_thread: bool = False
    pin: str | None = None
    core_type: str | None = None
    emulate: bool = False  # profile under an emulator (--emulate): exact, no PMU needed

    @property
    def options(self) -> ProfileOptions:
        """How a stat/profile job measures (the CLI's ProfileOptions)."""
        options = ProfileOptions(
            interval_ms=self.interval_ms,
            repeat=self.repeat,
            regions=tuple(self.regions),
            per_thread=self.per_thread,
            pin=self.pin,
            core_type=self.core_type,
            emulate=self.emulate,
        )
        if self.pid is not None:  # every group watches the running process for `duration`
            options = replace(options, pids=str(self.pid), duration=self.duration)
        return options

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def measurement(self) -> Request:
        """What a stat/profile job measures: the one `Request` that `run.planning` plans and
        `pipeline.measure` runs for the CLI and the queue too, with their limits."""
        return Request(
            self.command,
            self.events,
            options=self.options,
            selection=EventSelection(reserve=self.reserve),
            tags=self.tags,
            env=self.env,
        )

    @classmethod
    def from_form(cls, data: Any) -> JobRequest:
        """Parse the form's JSON (command as one shell line or a list of arguments, env and
        tags as KEY=VALUE lines, numbers as numbers or the text of an input); raises
        AutoprofError with what is wrong. Interval, repeat, duration and reserve have the
        limits every entry point has (`run.options`)."""
        if not isinstance(data, dict):
            raise AutoprofError(f"expected a JSON object, not {type(data).__name__}")
        tool = str(data.get("tool", "stat"))
        if tool not in TOOLS:
            raise AutoprofError(f"unknown tool {tool!r} (choose {', '.join(TOOLS)})")
        command = _command(data.get("command", ""))
        pid = data.get("pid") or None
        if not command and pid is None:
            raise AutoprofError("give a command (or a PID to attach to)")
        if command and pid is not None and tool != "record":
            raise AutoprofError("give a command or a PID to attach to, not both")
        events = data.get("events") or []
        if not (isinstance(events, list) and all(isinstance(e, str) for e in events)):
            raise AutoprofError("events: expected a list of event names")
        events = [e for e in events if e.strip()]
        emulate = data.get("emulate") in (True, "on", "true")
        if emulate and tool != "profile":
            raise AutoprofError("emulate: an emulator gives totals; choose the profile tool")
        if tool != "record" and not events and not emulate:  # emulated: the emulator's all
            raise AutoprofError("choose at least one event")
        request = cls(
            tool=tool,
            command=command,
            events=events,
            env=_pairs(data.get("env", ""), "environment variable", _ENV_NAME),
            pid=_pid(pid) if pid is not None else None,
            duration=_number(data.get("duration") or 10, "duration", float),
            interval_ms=_number(data.get("interval_ms", 100), "interval"),
            repeat=_number(data.get("repeat", 1), "repeat"),
            reserve=_number(data.get("reserve", 0), "reserve"),
            tags=_pairs(data.get("tags", ""), "tag", None),
            regions=_lines(data.get("regions", ""), "regions"),
            per_thread=data.get("per_thread") in (True, "on", "true"),
            pin=str(data.get("pin") or "").strip() or None,
            core_type=str(data.get("core_type") or "").strip() or None,
            emulate=emulate,
        )
        request.measurement().check()  # the CLI's limits (run.options), in its words
        return request


def _command(value: Any) -> list[str]:
    """A command given as one shell line or as a list of arguments."""
    if isinstance(value, list) and all(isinstance(arg, str) for arg in value):
        return value
    if not isinstance(value, str):
        raise AutoprofError("command: expected a shell line or a list of arguments")
    try:
        return shlex.split(value)
    except ValueError as err:
        raise AutoprofError(f"command: {err}") from None


def _lines(value: Any, what: str) -> list[str]:
    """Names one per line (a textarea's text), or a list of names."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    if not isinstance(value, str):
        raise AutoprofError(f"{what}: expected names, one per line")
    return [line.strip() for line in value.splitlines() if line.strip()]


def _number(value: Any, what: str, kind: type = int) -> Any:
    """`value` (a JSON number, or an input's text) as a `kind` (int: a whole number; float:
    seconds), or AutoprofError saying what is wrong."""
    try:
        if isinstance(value, bool):  # JSON true is no number
            raise TypeError
        return kind(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(1e999)
        noun = "a number of seconds" if kind is float else "a whole number"
        raise AutoprofError(f"{what} {value!r} is not {noun}") from None


def _pid(value: Any) -> int:
    """A process id to attach to (the kernel's pid_max is at most 2**22)."""
    pid = _number(value, "pid")
    if not 1 <= pid <= 2**22:
        raise AutoprofError(f"pid {pid} is outside 1..{2**22}")
    return pid


def _pairs(text: Any, what: str, name_rule: re.Pattern | None) -> dict[str, str]:
    """KEY=VALUE lines (or a dict) -> dict; names checked against `name_rule` when given."""
    items = (
        text.items()
        if isinstance(text, dict)
        else (line.partition("=")[::2] for line in str(text).splitlines() if line.strip())
    )
    pairs = {}
    for key, value in items:
        key = str(key).strip()
        if not key or (name_rule is not None and not name_rule.fullmatch(key)):
            raise AutoprofError(f"{what} {key!r}: expected KEY=VALUE with a plain name")
        pairs[key] = str(value).strip()
    return pairs
