"""Inlined frames from binutils' addr2line: stackcollapse-perf.pl's ``--inline`` (and
``--context``), call for call, so that the folded output is the same.

For a frame ``ip symbol+0xoff (dso)`` the Perl script runs ``addr2line -a IP -e DSO -i -f -s -C``
and reads function / ``file:line`` pairs, innermost first. When addr2line knows nothing
(``??`` / ``??:0``) and the symbol has an offset, it finds the symbol's address with ``nm`` and
asks again at symbol + offset. Results are cached per (ip, dso) and dso, as there.
"""

from __future__ import annotations

import re
import subprocess

_DISCRIMINATOR = re.compile(r" \(discriminator \S+\)")
_SYMBOL_OFFSET = re.compile(r"^(.+)\+0x([0-9a-f]+)$")


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace")
    except FileNotFoundError:
        return ""
    return done.stdout


def pairs_to_frames(output: str, context: bool) -> str:
    """addr2line's output after its address line -> frames root first joined by ``;``."""
    frames: list[str] = []
    item = ""
    for line in output.splitlines():
        line = _DISCRIMINATOR.sub("", line)
        if item == "":
            item = line
        else:
            frames.insert(0, f"{item}:{line}" if context else item)
            item = ""
    return ";".join(frames)


class Addr2line:
    """An `InlineResolver` (see autoprof.perf.script) backed by addr2line and nm."""

    def __init__(self, context: bool = False) -> None:
        self.context = context
        self._cache: dict[tuple[str, str], str] = {}
        self._nm: dict[str, str] = {}

    def __call__(self, pc: str, raw: str, mod: str) -> str:
        key = (pc, mod)
        if key in self._cache:
            return self._cache[key]
        output = _run(["addr2line", "-a", pc, "-e", mod, "-i", "-f", "-s", "-C"])
        output = output.split("\n", 1)[1] if "\n" in output else ""
        if "??\n??:0" in output and (match := _SYMBOL_OFFSET.match(raw)):
            func, offset = match.group(1), int(match.group(2), 16)
            if mod not in self._nm:
                self._nm[mod] = _run(["nm", mod])
            symbol = re.search(rf"^([0-9a-f]+) . {re.escape(func)}$", self._nm[mod], re.M)
            if symbol is not None:
                result = self(f"0x{int(symbol.group(1), 16) + offset:x}", "", mod)
                self._cache[key] = result
                return result
        result = self._cache[key] = pairs_to_frames(output, self.context)
        return result
