"""autoprof's event strings against perf's encoding of the same perfmon data, per platform.

    python bench/encodings.py [--events-dir DIR]

For SKX, ICX, SPR, ADL, SKL and GLM the reference is the JSON Linux ships
(`../shared/perf-encodings/`); for every other platform it is rebuilt from perfmon by
create_perf_json.py's rules (autoprof/testing/perf_reference.py). Both are turned into terms by
jevents.py's rules and compared term by term. Prints the equal strings, the differences
justified by the kernel's formats (see perf_reference.justification), the unexplained ones
(target 0) and the reference events autoprof lacks.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoprof.catalog import intel
from autoprof.testing import perf_reference

REPO = Path(__file__).resolve().parents[1]

SHIPPED = perf_reference.SHIPPED


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-dir", type=Path, default=REPO.parent / "shared/events/intel")
    args = parser.parse_args()
    if not (args.events_dir / "mapfile.csv").is_file():
        print(f"skipped: no Intel perfmon data at {args.events_dir} (pass --events-dir)")
        return 0
    encodings = args.events_dir.parent.parent / "perf-encodings"
    options = intel.IntelOptions(experimental=True, deprecated=True)
    print(
        f"{'platform':<10} {'reference':<9} {'compared':>8} {'equal':>6} {'differ':>6} "
        f"{'missing':>7}  justified"
    )
    unexplained = 0
    for platform in sorted(intel.platform_cpu_ids(args.events_dir)):
        folder = encodings / SHIPPED.get(platform, "-")
        if folder.is_dir():
            source, reference = "shipped", perf_reference.shipped(folder)
        else:
            source, reference = "rebuilt", perf_reference.converted(args.events_dir, platform)
        catalog = intel.load(args.events_dir, platform, options)
        result = perf_reference.compare(catalog.events, reference)
        justified = sum(result["justified"].values())
        compared = result["equal"] + justified + len(result["different"])
        unexplained += len(result["different"])
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(result["justified"].items()))
        print(
            f"{platform:<10} {source:<9} {compared:>8} {result['equal']:>6} "
            f"{len(result['different']):>6} {len(result['missing']):>7}  {reasons}"
        )
    print(f"unexplained differences: {unexplained}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
