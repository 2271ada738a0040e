"""Where the command runs: `--pin CPUS` and `--core-type` become the CPU set the workload (and
every process it starts) is bound to, set in the child before its exec (`perf.launch`), so not
one of its instructions runs elsewhere. A hybrid CPU's core types are the CPUs its core PMUs
serve (sysfs `cpu_core/cpus`, `cpu_atom/cpus`)."""

from __future__ import annotations

from pathlib import Path

from autoprof.catalog import machine
from autoprof.errors import AutoprofError
from autoprof.run.options import CORE_TYPES, ProfileOptions


def core_type_cpus(core_type: str, sysfs: Path = machine.SYSFS_PMUS) -> frozenset[int]:
    """The CPUs of one kind of core (`CORE_TYPES`), or one AutoprofError line on a machine
    without that core PMU (not a hybrid CPU)."""
    pmu = CORE_TYPES[core_type]
    cpus = machine.read_cpus(sysfs / pmu / "cpus")
    if not cpus:
        raise AutoprofError(
            f"--core-type {core_type}: this machine has no {pmu} PMU (not a hybrid CPU)"
        )
    return cpus


def workload_cpus(
    options: ProfileOptions, sysfs: Path = machine.SYSFS_PMUS, system: Path = machine.SYSFS_SYSTEM
) -> frozenset[int] | None:
    """The CPUs the command runs on (None: wherever the kernel puts it); one AutoprofError line
    for a set the machine cannot honour (CPUs it lacks, a --pin outside the --core-type)."""
    if options.core_type is not None:
        kind = core_type_cpus(options.core_type, sysfs)
        cpus = machine.cpu_list(options.pin) if options.pin is not None else kind
        if not cpus <= kind:
            extra = ",".join(map(str, sorted(cpus - kind)))
            raise AutoprofError(
                f"--pin {options.pin}: CPUs {extra} are no {options.core_type} cores"
            )
    elif options.pin is not None:
        cpus = machine.cpu_list(options.pin)
    else:
        return None
    online = machine.online_cpus(system)
    if online is not None and not cpus <= online:
        missing = ",".join(map(str, sorted(cpus - online)))
        given = f"--pin {options.pin}" if options.pin else f"--core-type {options.core_type}"
        raise AutoprofError(f"{given}: this machine has no CPU {missing} online")
    return cpus
