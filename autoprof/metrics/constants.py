"""The constants metric formulas read (SMT, sockets, TSC frequency, duration), from the
machine facts a profile recorded, overridable with ``--set NAME=VALUE``.

Facts are read defensively: a manifest from an older autoprof (no topology) or autoperf's
results.csv (no manifest at all) gives what it has, and `--set` gives the rest; a metric that
reads a constant nobody gave is reported, not computed.

perf's metrics read ``#`` literals (tools/perf/util/tool_pmu.c: ``#slots``, ``#smt_on``,
``#num_cpus``, ``#num_cpus_online``, ``#num_cores``, ``#num_packages``, ``#system_tsc_freq``;
the others, ``#num_dies``, ``#has_pmem``, ``#core_wide``, ``#target_cpu``, only by --set) and
``strcmp_cpuid_str(ID)``, 1 when the CPU id matches ID as perf's mapfile does. A literal comes
from the profiled machine's facts, else from the model table (`from_model`: Arm's slots per
cycle), else from --set; `gather` says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from autoprof.errors import AutoprofError

SMT = "HYPERTHREADING_ON"
THREADS = "THREADS_PER_CORE"
SOCKETS = "SOCKET_COUNT"
CORES = "CORES_PER_SOCKET"
CHAS = "CHAS_PER_SOCKET"
TSC = "SYSTEM_TSC_FREQ"
CPUS = "system.sockets[0].cpus.count * system.socket_count"  # Intel's name for all CPUs
DURATION_MS = "DURATIONTIMEINMILLISECONDS"
DURATION_S = "DURATIONTIMEINSECONDS"
SLOTS = "#slots"
CPUID_TEST = "strcmp_cpuid_str("


def _topology(machine: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Per-CPU records ``{cpu, socket, core, node}`` (a list, or a dict keyed by CPU)."""
    topo = machine.get("topology")
    if isinstance(topo, Mapping):
        return [dict(v, cpu=k) for k, v in topo.items() if isinstance(v, Mapping)]
    if isinstance(topo, list):
        return [t for t in topo if isinstance(t, Mapping)]
    return []


def from_machine(machine: Mapping[str, Any] | None) -> dict[str, float]:
    """The constants the machine facts of a manifest tell (none for a missing manifest)."""
    if not machine:
        return {}
    values: dict[str, float] = {}
    if isinstance(machine.get("smt"), bool):
        values[SMT] = float(machine["smt"])
        values[THREADS] = 2.0 if machine["smt"] else 1.0
    cpus = _topology(machine)
    try:
        sockets = {t["socket"] for t in cpus}
        cores = {(t["socket"], t["core"]) for t in cpus}
    except (KeyError, TypeError):
        sockets, cores = set(), set()
    if sockets and cores:
        values[SOCKETS] = float(len(sockets))
        values[CORES] = len(cores) / len(sockets)
        values[THREADS] = len(cpus) / len(cores)
        values[CPUS] = float(len(cpus))
    for key, name in (("tsc_hz", TSC), ("tsc_freq", TSC), ("chas_per_socket", CHAS)):
        if isinstance(machine.get(key), int | float):
            values[name] = float(machine[key])
    if isinstance(machine.get("slots"), int) and machine["slots"] > 0:
        values[SLOTS] = float(machine["slots"])
    literals = {SMT: "#smt_on", SOCKETS: "#num_packages", TSC: "#system_tsc_freq"}
    values.update((lit, values[name]) for name, lit in literals.items() if name in values)
    if cpus and cores:
        values["#num_cpus"] = values["#num_cpus_online"] = float(len(cpus))
        values["#num_cores"] = float(len(cores))
    return values


def from_model(cpu: str) -> dict[str, float]:
    """What the model table tells of a CPU id: an Arm core's slots per cycle."""
    from autoprof.catalog import arm

    slots = arm.slots(cpu)
    return {SLOTS: float(slots)} if slots else {}


def cpuid_tests(cpu: str, names: Iterable[str]) -> dict[str, float]:
    """The value of each ``strcmp_cpuid_str(ID)`` among `names` for the CPU id `cpu`:
    perf's mapfile match (tools/perf/arch/arm64/util/header.c: the MIDR but for variant and
    revision, which must be at least ID's; x86: ID is a regular expression)."""
    from autoprof.catalog import vendor

    match = vendor.midr_matches if vendor.vendor_of(cpu) == vendor.ARM64 else vendor.pattern_matches
    return {
        name: float(match(name[len(CPUID_TEST) : -1], cpu))
        for name in names
        if name.startswith(CPUID_TEST) and name.endswith(")")
    }


def gather(
    machine: Mapping[str, Any] | None, cpu: str, sets: Mapping[str, float], names: Iterable[str]
) -> tuple[dict[str, float], dict[str, str]]:
    """The constants for metrics reading `names` on CPU `cpu`, and where each came from:
    --set over the profiled machine's facts over the model table."""
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for found, source in (
        (cpuid_tests(cpu, names), f"CPU id {cpu}"),
        (from_model(cpu), "model table"),
        (from_machine(machine), "the profiled machine"),
        (dict(sets), "--set"),
    ):
        values.update(found)
        sources.update(dict.fromkeys(found, source))
    return values, sources


def parse_sets(pairs: list[str] | tuple[str, ...]) -> dict[str, float]:
    """``--set NAME=VALUE`` options (VALUE a number; SMT accepts on/off)."""
    values: dict[str, float] = {}
    for text in pairs:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise AutoprofError(f"--set {text!r}: expected NAME=VALUE (e.g. {TSC}=2.1e9)")
        value = {"on": "1", "off": "0", "true": "1", "false": "0"}.get(value.lower(), value)
        try:
            values[name.strip()] = float(value)
        except ValueError:
            raise AutoprofError(f"--set {text!r}: {value!r} is not a number") from None
    if SMT in values and THREADS not in values:
        values[THREADS] = 2.0 if values[SMT] else 1.0
    return values


def with_duration(constants: Mapping[str, float], seconds: float) -> dict[str, float]:
    """The constants plus the measured duration (unless --set gave one)."""
    values = {DURATION_MS: seconds * 1000.0, DURATION_S: seconds}
    values.update(constants)
    return values


def for_metric(aliases: Mapping[str, str], constants: Mapping[str, float]) -> dict[str, float]:
    """A metric's constants by alias: from `constants`, or the name itself when it is a
    number (Intel lists ``20`` as a constant)."""
    values = {}
    for alias, name in aliases.items():
        if name in constants:
            values[alias] = constants[name]
        else:
            try:
                values[alias] = float(name)
            except ValueError:
                continue
    return values
