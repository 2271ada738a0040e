"""The live kernel's PMU formats: does a planned string fit them?

perf parses ``pmu/term=value,.../`` against the files in
``/sys/bus/event_source/devices/<pmu>/format/`` (``event`` -> ``config:0-7``, ``umask`` ->
``config:8-15,32-55``, ``filter_rem`` -> ``config1:32``): a term with no file, or a value wider
than its bits, is a syntax error that fails the whole run. Checked once, before the first run,
such an event is left out with its reason (an Exclusion, like every other) instead.

Pure functions over a folder: `parse_format` reads one file's text, `read_pmu` a PMU's folder
(a box type such as ``uncore_cha`` is read from its first box, ``uncore_cha_0``, as perf opens
every box with the same format), `misfit` judges one event, `without_misfits` a catalog.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from autoprof.catalog import encoding
from autoprof.catalog.model import Catalog, Event, Exclusion

# perf's own terms (tools/perf/util/parse-events.c config_term_names): not format files.
PERF_TERMS = frozenset({"config", "config1", "config2", "config3"}) | encoding.LABEL_TERMS
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")

Format = list[tuple[str, int, int]]  # (config field, first bit, last bit)


def parse_format(text: str) -> Format:
    """``config:0-7,32-35`` -> [("config", 0, 7), ("config", 32, 35)]; ``config1:32`` is one bit."""
    field, sep, ranges = text.strip().partition(":")
    if not sep or not field.startswith("config"):
        raise ValueError(f"not a PMU format: {text!r}")
    out = []
    for part in ranges.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ValueError(f"not a PMU format: {text!r}")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        out.append((field, first, last))
    return out


def width(fmt: Format) -> int:
    """How many bits a value of the term may have (perf scatters them over the ranges)."""
    return sum(last - first + 1 for _, first, last in fmt)


def pmu_folder(sysfs: Path, pmu: str) -> Path | None:
    """The folder of a PMU as perf finds it: its own name, else its first numbered box."""
    if (sysfs / pmu).is_dir():
        return sysfs / pmu
    try:
        names = os.listdir(sysfs)  # not Path.glob: its pattern is compiled at every start
    except OSError:
        return None
    box = re.compile(rf"{re.escape(pmu)}_\d+")
    boxes = sorted(name for name in names if box.fullmatch(name))
    return sysfs / boxes[0] if boxes else None


def read_pmu(sysfs: Path, pmu: str) -> dict[str, Format] | None:
    """{term: format} of a PMU (None when the kernel shows no such PMU or no formats)."""
    folder = pmu_folder(sysfs, pmu)
    if folder is None or not (folder / "format").is_dir():
        return None
    formats = {}
    for path in (folder / "format").iterdir():
        try:
            formats[path.name] = parse_format(path.read_text())
        except (OSError, ValueError):
            continue
    return formats


def event_ext_pmus(sysfs: Path) -> tuple[str, ...]:
    """The PMUs (box types: ``uncore_pcu`` for ``uncore_pcu_0``) whose ``event`` format carries
    config bit 21, an ExtSel the kernel passes on (``config:0-7,21``), sorted."""
    found = set()
    for path in sysfs.glob("*/format/event") if sysfs.is_dir() else ():
        try:
            fmt = parse_format(path.read_text())
        except (OSError, ValueError):
            continue
        if any(field == "config" and first <= 21 <= last for field, first, last in fmt):
            found.add(re.sub(r"_\d+$", "", path.parent.parent.name))
    return tuple(sorted(found))


def misfit(event: Event, formats: dict[str, Format]) -> str | None:
    """Why perf would refuse the event's string against these formats (None: it fits)."""
    for term, value in encoding.terms(event):
        if term in PERF_TERMS:
            continue
        fmt = formats.get(term)
        if fmt is None:
            return f"the kernel's {event.pmu} format has no term {term!r}"
        bits = width(fmt)
        if value >> bits:
            ranges = ",".join(f"{a}-{b}" if a != b else str(a) for _, a, b in fmt)
            return (
                f"{term}={value:#x} does not fit the kernel's {event.pmu} format "
                f"{fmt[0][0]}:{ranges} ({bits} bits)"
            )
    return None


def without_misfits(catalog: Catalog, sysfs: Path) -> Catalog:
    """The catalog less the encoded events whose strings this kernel's formats cannot carry,
    each left out with the reason. PMUs the kernel does not show are not judged here."""
    cache: dict[str, dict[str, Format] | None] = {}
    kept: list[Event] = []
    dropped: list[Exclusion] = []
    for event in catalog.events:
        if event.style and event.pmu not in cache:
            cache[event.pmu] = read_pmu(sysfs, event.pmu)
        formats = cache.get(event.pmu) if event.style else None
        why = misfit(event, formats) if formats else None
        if why:
            dropped.append(Exclusion(event.name, event.pmu, f"{why} (in {sysfs})"))
        else:
            kept.append(event)
    if not dropped:
        return catalog
    used = {e.pmu for e in kept}
    pmus = {n: p for n, p in catalog.pmus.items() if n in used or n not in cache}
    return Catalog(catalog.cpu, pmus, kept, catalog.excluded + dropped, catalog.source)
