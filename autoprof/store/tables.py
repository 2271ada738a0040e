"""What the store's tables hold, as plain names and values: the constants and keys that the
upload (`upload`, which writes without SQLAlchemy) and the schema (`models`) share.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

RUN_COMPLETE = "complete"  # every part of the run is stored
RUN_INCOMPLETE = "incomplete"  # some parts of a split profile have not arrived yet
KIND_PROFILE = "profile"  # `autoprof profile`: every event, one perf run per group
KIND_BENCH = "bench"  # `autoprof bench`: commands timed and counted N times each

# the machine table's columns but id and fingerprint (tests/test_store.py checks the model's)
MACHINE_COLUMNS = (
    "cpu_id",
    "model_name",
    "hostname",
    "kernel",
    "perf_version",
    "smt",
    "nmi_watchdog",
    "perf_event_paranoid",
    "counters",
)

# results.csv column -> column of `series` (fixed along intervals) or `measurement`
SERIES_COLUMNS: dict[str, str] = {
    "EVENT_NAME": "event_name",
    "SOCKET": "socket",
    "CORE": "core",
    "CPU": "cpu",
    "NODE": "node",
    "UNIT": "unit",
    "RUN": "plan_run",
    "REPEAT": "repeat",
    "PMU": "pmu",
    "VALUE_UNIT": "value_unit",
    "REGION": "region",
}
SAMPLE_COLUMNS: dict[str, str] = {
    "INDEX": "interval_index",
    "TIME": "time",
    "SAMPLE_VALUE": "sample_value",
    "PERCENT_RUNNING": "percent_running",
    "STATUS": "status",
}


def machine_fingerprint(columns: dict[str, Any]) -> str:
    """A machine row's key: sha256 of the values of its other columns. Facts a manifest holds
    beyond them (topology, TSC frequency, ...) stay in each part's manifest, so a fact autoprof
    learns later does not split a machine's rows."""
    return hashlib.sha256(json.dumps(columns, sort_keys=True).encode()).hexdigest()


def machine_columns(facts: dict[str, Any]) -> dict[str, Any]:
    """The entries of `facts` that are columns of the machine table (not id, not fingerprint)."""
    return {k: v for k, v in facts.items() if k in MACHINE_COLUMNS}


def measurement_partition(part_id: int) -> str:
    """The table of a part's measurements on PostgreSQL: a partition of `measurement`."""
    return f"measurement_{int(part_id)}"
