"""Every string autoprof plans for an Intel platform, parsed by perf against the kernel's
formats (`kernel_formats` trees, `perf_attrs`), compared with the bits of Intel's data
(`vendor_bits`). Used by tests/test_kernel_formats.py; ``python -m autoprof.testing.kernel_check
SKX`` prints the differences of one platform."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autoprof.catalog import intel
from autoprof.catalog.model import Event
from autoprof.testing import kernel_formats, perf_attrs, vendor_bits

EVERYTHING = intel.IntelOptions(experimental=True, deprecated=True)


@dataclass
class Report:
    platform: str
    checked: int = 0
    refused: dict[str, str] = field(default_factory=dict)  # spec -> perf's message
    different: list[tuple[str, str, perf_attrs.Attr, perf_attrs.Attr]] = field(
        default_factory=list
    )  # (name, spec, perf's bits, the data's bits)
    unchecked: int = 0  # free-running / fixed uncore counters, PERF_METRICS: type only


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


def check(events_dir: Path, platform: str, tree: Path) -> Report:
    catalog = intel.load(events_dir, platform, EVERYTHING)
    events = [e for e in catalog.events if e.style]
    parsed = perf_attrs.parse(tree, [e.spec for e in events])
    raws = raw_events(events_dir, platform)
    report = Report(platform, len(events), parsed.refused)
    for event in events:
        if event.spec in parsed.refused:
            continue
        attrs = parsed.attrs.get(event.label, [])
        want = expected(event, raws, platform)
        if want is None:
            report.unchecked += 1
            continue
        got = {(a.config, a.config1, a.config2) for a in attrs}
        if got != {(want.config, want.config1, want.config2)}:
            have = attrs[0] if attrs else perf_attrs.Attr(-1)
            report.different.append((event.name, event.spec, have, want))
    return report


def main(argv: list[str]) -> None:
    from autoprof.catalog import embedded

    events_dir = embedded.directory("intel")
    assert events_dir is not None
    with tempfile.TemporaryDirectory() as tmp:
        for platform in argv or sorted(kernel_formats.INTEL):
            tree = Path(tmp) / platform
            kernel_formats.write_tree(tree, kernel_formats.INTEL[platform])
            r = check(events_dir, platform, tree)
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
