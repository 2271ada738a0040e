"""Every string autoprof plans for a platform, parsed by perf against the kernel's formats
(`kernel_formats` trees, `perf_attrs`), compared with the bits of the vendor's data
(`vendor_bits`): Intel's 40 platforms, AMD's Zen 1-6, perf's Arm cores. Used by
tests/test_kernel_formats.py; ``python -m autoprof.testing.kernel_check SKX zen4 neoverse-n1``
prints the differences (no argument: every platform of every vendor)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoprof.catalog import amd, arm, embedded, intel, pmuevents, vendor
from autoprof.catalog.model import Event, ReadOptions
from autoprof.testing import kernel_formats, perf_attrs, vendor_bits

EVERYTHING = intel.IntelOptions(experimental=True, deprecated=True)
ALL_EVENTS = ReadOptions(deprecated=True)
Want = Callable[[Event], perf_attrs.Attr | None]


@dataclass
class Report:
    platform: str
    checked: int = 0
    refused: dict[str, str] = field(default_factory=dict)  # spec -> perf's message
    different: list[tuple[str, str, perf_attrs.Attr, perf_attrs.Attr]] = field(
        default_factory=list
    )  # (name, spec, perf's bits, the data's bits)
    unchecked: int = 0  # free-running / fixed uncore counters: type only


def raw_events(events_dir: Path, platform: str) -> dict[tuple[str, str], dict]:
    """(pmu or "uncore", name) -> the event's JSON object."""
    raws: dict[tuple[str, str], dict] = {}
    for row in intel.rows_for_cpu(events_dir, platform):
        if row.kind not in ("core", "hybridcore", "uncore", "uncore experimental"):
            continue
        if row.kind == "hybridcore":
            where = intel.HYBRID_PMU.get(row.core_role, "cpu")
        else:
            where = "cpu" if row.kind == "core" else "uncore"
        for raw in intel.load_json_events(events_dir / row.path.lstrip("/")):
            raws.setdefault((where, str(raw.get("EventName"))), raw)
    return raws


def expected(event: Event, raws: dict, platform: str) -> perf_attrs.Attr | None:
    core = event.pmu == "cpu" or event.pmu.startswith("cpu_")
    raw = raws.get((event.pmu, event.name) if core else ("uncore", event.name))
    if raw is None:
        return None
    return vendor_bits.core(raw) if core else vendor_bits.uncore(raw, platform)


def compare(platform: str, events: list[Event], want: Want, tree: Path) -> Report:
    """perf's bits for `events` under `tree` against `want`. An event of a PMU the platform's
    kernel does not create is refused by perf (``Cannot find PMU``), as on the machine."""
    parsed = perf_attrs.parse(tree, [e.spec for e in events])
    report = Report(platform, len(events), parsed.refused)
    for event in events:
        if event.spec in parsed.refused:
            continue
        attrs = parsed.attrs.get(event.label, [])
        bits = want(event)
        if bits is None:
            report.unchecked += 1
            continue
        got = {(a.config, a.config1, a.config2) for a in attrs}
        if got != {(bits.config, bits.config1, bits.config2)}:
            have = attrs[0] if attrs else perf_attrs.Attr(-1)
            report.different.append((event.name, event.spec, have, bits))
    return report


def check(events_dir: Path, platform: str, tree: Path) -> Report:
    """An Intel platform (perfmon folder name, ``SKX``)."""
    catalog = intel.load(events_dir, platform, EVERYTHING)
    raws = raw_events(events_dir, platform)
    events = [e for e in catalog.events if e.style]
    return compare(platform, events, lambda e: expected(e, raws, platform), tree)


def model_raws(folder: Path) -> dict[str, dict[str, Any]]:
    """EventName -> JSON object of a model folder of perf's data (first one wins, as jevents)."""
    raws: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        for raw in pmuevents.read_json(path):
            name = raw.get("EventName") or raw.get("ArchStdEvent")
            if isinstance(name, str) and "MetricName" not in raw:
                raws.setdefault(name.lower(), raw)
    return raws


def check_amd(events_dir: Path, model: str, tree: Path) -> Report:
    """A Zen model (``zen4``): every event, deprecated ones too."""
    catalog = amd.load(events_dir, model, ALL_EVENTS)
    raws = model_raws(events_dir / f"amd{model}")
    return compare(model, catalog.events, lambda e: vendor_bits.amd(raws[e.name], model), tree)


def check_arm(events_dir: Path, model: str, tree: Path) -> Report:
    """An Arm core (``neoverse-n1``, ``arm/neoverse-n2-v2``): its core and uncore events."""
    catalog = arm.load(events_dir, model, ALL_EVENTS)
    raws = model_raws(events_dir / _arm_folder(events_dir, model))
    standard: dict[str, dict[str, Any]] = {}
    for name in arm.STANDARD_FILES:
        for raw in pmuevents.read_json(events_dir / name):
            standard.setdefault(str(raw.get("EventName")).lower(), raw)
    return compare(
        model, catalog.events, lambda e: vendor_bits.arm(raws[e.name.lower()], standard), tree
    )


def arm_models(events_dir: Path) -> list[str]:
    """Every core model folder of perf's arm64 mapfile (``arm/neoverse-n1``)."""
    return sorted({r[2] for r in arm.rows(events_dir) if r[3:4] == ["core"]})


def _arm_folder(events_dir: Path, model: str) -> str:
    return arm.model_for(events_dir, arm.models(events_dir).get(model.lower(), model))[0]


def vendor_of(platform: str) -> str:
    """The embedded data set of a platform name: Intel's folder, a Zen model, else an Arm core."""
    if platform in kernel_formats.INTEL:
        return "intel"
    return "amd" if platform in kernel_formats.AMD_TREES else "arm64"


def tree_name(platform: str) -> str:
    """The kernel_formats tree a platform of any vendor is checked under."""
    if platform in kernel_formats.INTEL:
        return platform
    if platform in kernel_formats.AMD_TREES:
        return kernel_formats.AMD_TREES[platform]
    arm_dir = embedded.directory("arm64")
    assert arm_dir is not None
    return kernel_formats.arm_tree(_arm_folder(arm_dir, platform))


def run(platform: str, root: Path) -> Report:
    """Check one platform of any vendor, writing its tree under `root`."""
    vendor = vendor_of(platform)
    events_dir = embedded.directory(vendor)
    assert events_dir is not None
    tree = root / tree_name(platform)
    if not tree.is_dir():
        kernel_formats.write_tree(tree, kernel_formats.PLATFORMS[tree.name])
    checker = {"intel": check, "amd": check_amd, "arm64": check_arm}[vendor]
    return checker(events_dir, platform, tree)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m autoprof.testing.kernel_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("platform", nargs="*", help="Intel platform, AMD tree or Arm model")
    argv = parser.parse_args(argv).platform
    if not argv:
        arm_dir = embedded.directory("arm64")
        assert arm_dir is not None
        argv = [*sorted(kernel_formats.INTEL), *kernel_formats.AMD_TREES, *arm_models(arm_dir)]
    with tempfile.TemporaryDirectory() as tmp:
        for platform in argv:
            try:
                r = run(platform, Path(tmp))
            except vendor.UnknownCpu as e:
                parser.error(str(e))
            print(
                f"{platform}: {r.checked} strings, {len(r.refused)} refused, "
                f"{len(r.different)} different, {r.unchecked} type only"
            )
            for spec, why in r.refused.items():
                print(f"  refused {spec}: {why}")
            for _name, spec, got, want in r.different:
                print(
                    f"  differs {spec}: perf {got.config:#x}/{got.config1:#x} "
                    f"data {want.config:#x}/{want.config1:#x}"
                )


if __name__ == "__main__":
    main(sys.argv[1:])
