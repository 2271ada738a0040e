"""autoprof's own YAML catalogs (``autoprof/events/*.yaml``): events perf knows by name.

A file holds one PMU block and its events::

    pmu: {name: software, unconstrained: true}          # or generic: 4, fixed: 0
    events:
      - {name: task-clock, description: ..., spec: task-clock, counters: [0, 1]}

`spec` defaults to the name; `counters` to none (the PMU's constraint decides).
"""

from __future__ import annotations

from pathlib import Path

from autoprof.catalog.model import Catalog, Event, Pmu
from autoprof.errors import AutoprofError

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "events"


def load_file(path: Path, cpu: str = "") -> Catalog:
    """Parse one YAML catalog (PyYAML imported only now: `catalog.cache.load_yaml` keeps the
    builtin ones parsed, and a profile's start does without it)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
        block = data["pmu"]
        pmu = Pmu(
            name=block["name"],
            generic=int(block.get("generic", 0)),
            fixed=int(block.get("fixed", 0)),
            unconstrained=bool(block.get("unconstrained", False)),
            description=str(block.get("description", "")),
        )
        events = [
            Event(
                name=str(item["name"]),
                pmu=pmu.name,
                spec=str(item.get("spec", item["name"])),
                counters=frozenset(int(c) for c in item.get("counters", [])),
                description=str(item.get("description", "")),
            )
            for item in data["events"]
        ]
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as err:
        raise AutoprofError(f"malformed YAML catalog {path}: {err!r}") from None
    return Catalog(cpu, {pmu.name: pmu}, events, source=f"yaml {Path(path).name}")


def load_builtin(name: str, cpu: str = "") -> Catalog:
    """A catalog shipped with autoprof, e.g. ``software``."""
    return load_file(BUILTIN_DIR / f"{name}.yaml", cpu)
