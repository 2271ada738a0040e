"""The constants metric formulas read (SMT, sockets, TSC frequency, duration), from the
machine facts a profile recorded, overridable with ``--set NAME=VALUE``.

Facts are read defensively: a manifest from an older autoprof (no topology) or autoperf's
results.csv (no manifest at all) gives what it has, and `--set` gives the rest; a metric that
reads a constant nobody gave is reported, not computed.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    return values


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
