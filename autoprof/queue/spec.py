"""What a queue job asks for: `JobSpec`, carried as plain JSON (RQ's JSON serializer).

A worker runs commands that others submit, so a spec is parsed as untrusted input: every field
is checked for its type and range, unknown fields are refused, and the command must match one of
the worker's --allow patterns (`allowed`). A job that fails these checks is refused, not run.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from autoprof.errors import AutoprofError
from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.run.request import Request
from autoprof.util.declared import spec_fields

# the only function a worker runs; jobs naming anything else are refused
JOB_FUNCTION = "autoprof.queue.worker.run_job"


class Refused(AutoprofError):
    """A job the worker will not run: its message starts with "refused: "."""

    def __init__(self, reason: str):
        super().__init__(f"refused: {reason}")


@dataclass(frozen=True)
class JobSpec:
    """One profile (or one part of a split profile) to run on a target machine."""

    command: list[str]
    events: list[str] = field(default_factory=list)  # empty: every event of the machine
    # the ProfileOptions a submitter may set (util.declared.spec_fields; part and parts are the
    # spec's own fields, force the worker's)
    options: dict[str, Any] = field(default_factory=dict)
    # EventSelection's fields (not --cpu/--smt/--events-dir: the worker profiles its own machine)
    selection: dict[str, Any] = field(default_factory=dict)
    profile_id: str = ""  # shared by the parts of a split profile; the store's run id
    part: int = 1
    parts: int = 1
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def profile_options(self) -> ProfileOptions:
        return ProfileOptions.from_json(self.options | {"part": self.part, "parts": self.parts})

    def request(self, events_dir: str | None = None) -> Request:
        """The measurement this job asks for, on the worker's own machine (`events_dir`: the
        worker's --events-dir)."""
        return Request(
            command=self.command,
            events=self.events,
            options=self.profile_options(),
            selection=EventSelection.from_json(self.selection),
            events_dir=events_dir,
            profile_id=self.profile_id or None,
            tags=self.tags,
        )

    @classmethod
    def of(cls, request: Request) -> JobSpec:
        """The job that asks a worker for `request` (on its own machine: the request's catalog
        options, --cpu and the like, are not sent)."""
        options = request.options
        return cls(
            command=list(request.command),
            events=list(request.events),
            options=options.spec_json(),
            selection=request.selection.to_json(),
            profile_id=request.profile_id or "",
            part=options.part,
            parts=options.parts,
            tags=dict(request.tags),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> JobSpec:
        """Parse an untrusted spec; raises Refused naming the first problem."""
        if not isinstance(data, dict):
            raise Refused(f"job argument is {type(data).__name__}, not a profile spec")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise Refused(f"unknown spec fields: {', '.join(sorted(unknown))}")
        command = data.get("command")
        if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
            raise Refused("spec command must be a non-empty list of strings")
        events = data.get("events", [])
        if not (isinstance(events, list) and all(isinstance(e, str) for e in events)):
            raise Refused("spec events must be a list of strings")
        tags = data.get("tags", {})
        if not (isinstance(tags, dict) and all(isinstance(v, str) for v in tags.values())):
            raise Refused("spec tags must map strings to strings")
        try:
            profile_id = str(uuid.UUID(str(data.get("profile_id"))))
        except ValueError:
            raise Refused("spec profile_id is not a uuid") from None
        options = data.get("options", {})
        if not isinstance(options, dict):
            raise Refused("spec options must be an object")
        unknown_options = sorted(set(options) - spec_fields(ProfileOptions))
        if unknown_options:
            raise Refused(f"unknown spec options field {unknown_options[0]!r}")
        spec = cls(
            command=list(command),
            events=list(events),
            options=dict(options),
            selection=_selection(data.get("selection", {})),
            profile_id=profile_id,
            part=data.get("part", 1),
            parts=data.get("parts", 1),
            tags=dict(tags),
        )
        # the command line's own check, so a spec is refused exactly where `profile` refuses
        problem = spec.profile_options().problem()
        if problem:
            raise Refused(problem)
        return spec


def _selection(values: Any) -> dict[str, Any]:
    """A spec's `selection`, checked as the catalog commands check their flags."""
    if not isinstance(values, dict):
        raise Refused("spec selection must be an object")
    unknown = sorted(set(values) - spec_fields(EventSelection))
    if unknown:
        raise Refused(f"unknown spec selection field {unknown[0]!r}")
    problem = EventSelection.from_json(values).problem()
    if problem:
        raise Refused(problem)
    return dict(values)


def compile_allow(patterns: list[str]) -> list[re.Pattern]:
    """The worker's --allow patterns; a bad one is an error before the worker starts."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as err:
            raise AutoprofError(f"--allow {pattern!r} is not a regular expression: {err}") from None
    return compiled


def allowed(command: list[str], patterns: list[re.Pattern]) -> bool:
    """True when the shell-joined command fully matches one of `patterns`."""
    line = shlex.join(command)
    return any(p.fullmatch(line) for p in patterns)
