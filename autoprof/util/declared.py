"""Declared options: a frozen dataclass whose every field declares once its command-line flags,
help, type and range, and whether a job spec may carry it (`Option`, set with `declare`).

The command line (`commands.common.declared_flags`), the job spec (`queue.spec`) and the
manifest are derived from these declarations, so a value is checked the one way (`problem`)
wherever it comes from. Used by `ProfileOptions` (run), `FoldOptions` and `FlameOptions` (flame).
Imports nothing heavy: `autoprof --help` reads it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from autoprof.errors import AutoprofError

__all__ = [
    "Declared",
    "Option",
    "declare",
    "is_json",
    "kind_of",
    "option_fields",
    "spec_fields",
]

_OPTION = "autoprof.option"  # the key of a field's Option in its metadata


@dataclass(frozen=True, eq=False, repr=False)  # fewer generated methods: --help imports it
class Option:
    """One field of a `Declared` class (ProfileOptions, FoldOptions, ...) as the command line and
    the checks see it."""

    help: str = ""
    flags: tuple[str, ...] = ()  # click's declarations ("-a", "--system-wide"); () = no flag
    metavar: str | None = None
    low: float | None = None  # the smallest value allowed
    low_open: bool = False  # low itself is refused: values must exceed it (timeout > 0)
    high: float | None = None
    spec: bool = False  # a job spec may set it (what `submit` sends); else the worker's own
    recorded: bool = True  # the manifest keeps it (it says what the numbers mean, or the part)
    measures: bool = False  # it changes what the numbers mean: a resumed profile must keep it
    choices: tuple[str, ...] = ()  # the only values a text option takes (--core-type)

    @property
    def range_text(self) -> str | None:
        """The range as click shows one in --help (x>=10, 0<=x<=10, x>0)."""
        low_op = "<" if self.low_open else "<="
        if self.low is not None and self.high is not None:
            return f"{self.low:g}{low_op}x<={self.high:g}"
        if self.low is not None:
            return f"x{'>' if self.low_open else '>='}{self.low:g}"
        if self.high is not None:
            return f"x<={self.high:g}"
        return None

    def within(self, value: float) -> bool:
        above = self.low is None or value > self.low or (value == self.low and not self.low_open)
        return above and (self.high is None or value <= self.high)


def declare(default: Any, **declared: Any) -> Any:
    """A dataclass field of a `Declared` class: its default and its Option's arguments."""
    return field(default=default, metadata={_OPTION: Option(**declared)})


class Checked:
    """A record that says what is wrong with it in one line (`problem`, None when nothing is)
    and refuses itself with that line (`check`): the one shape of every request's and option
    set's validation, so that a caller can ask before acting or let bad input stop it."""

    def problem(self) -> str | None:
        raise NotImplementedError

    def check(self) -> Self:
        """This record, unless `problem` finds one: then AutoprofError with it."""
        found = self.problem()
        if found:
            raise AutoprofError(found)
        return self


class Declared(Checked):
    """A frozen dataclass whose fields declare their Option: checked the one way everywhere."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # for the type checker

    def problem(self) -> str | None:
        """What is wrong with these values, in one line (None when nothing is): a value of the
        wrong type or out of its range."""
        for f in dataclasses.fields(self):
            found = _value_problem(type(self), f.name, getattr(self, f.name))
            if found:
                return found
        return None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """Values from JSON (a manifest, a job spec): unknown keys are ignored (a newer
        autoprof's), missing ones take their defaults (an older one's). Not checked."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@functools.cache
def option_fields(cls: type) -> tuple[tuple[dataclasses.Field, Option], ...]:
    """Every field of `cls` with its Option, in declaration order (the --help order)."""
    return tuple((f, f.metadata[_OPTION]) for f in dataclasses.fields(cls))


def spec_fields(cls: type) -> frozenset[str]:
    """The fields of `cls` a job spec may set."""
    return frozenset(f.name for f, option in option_fields(cls) if option.spec)


@functools.cache
def _option_of(cls: type, name: str) -> Option:
    return next(option for f, option in option_fields(cls) if f.name == name)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The class's annotations evaluated, once: evaluating them for each of its fields cost
    ~10 ms of every `profile`'s start."""
    return typing.get_type_hints(cls)


@functools.cache
def kind_of(name: str, cls: type) -> tuple[type, bool]:
    """(the field's type, whether it may be None), from its annotation."""
    hint = _hints(cls)[name]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    kind = next(a for a in args if a is not types.NoneType)
    return typing.get_origin(kind) or kind, types.NoneType in args  # tuple[str, ...]: tuple


_KIND_NAMES = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    tuple: "a list of strings",
}


def is_json(value: Any, kinds: tuple[type, ...]) -> bool:
    """isinstance for JSON values: a bool is not a number here (JSON true is not a count), a
    whole number is a float."""
    if isinstance(value, bool):
        return bool in kinds
    if float in kinds and isinstance(value, int):
        return True
    if tuple in kinds:  # a repeatable option (tuple[str, ...]); JSON gives a list
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    return isinstance(value, kinds)


def _value_problem(cls: type, name: str, value: Any) -> str | None:
    """What is wrong with `value` for the field `name` of `cls` (None when nothing is)."""
    option = _option_of(cls, name)
    label = option.flags[-1] if option.flags else name
    kind, optional = kind_of(name, cls)
    if value is None:
        return None if optional else f"{label} must be given"
    if not is_json(value, (kind,)):
        return f"{label} {value!r} is not {_KIND_NAMES[kind]}"
    if kind in (int, float) and not option.within(value):
        return f"{label} {value!r} is not in the range {option.range_text}"
    if option.choices and value not in option.choices:
        return f"{label} {value!r} is not one of {', '.join(option.choices)}"
    return None
