"""Can perf do what we are about to ask of it on this machine? Said before running, with the fix.

API (shared by `profile` and `record`)::

    findings = check(system_wide=False, kernel=True, counters=False)
    fail_on_fatal(findings)          # AutoprofError naming the first fatal finding and its fix
    for f in findings: print(f)      # "warning: ... (fix: sudo sysctl -w ...)"

`check` reads the machine (`read_system`) and hands the values to `evaluate`, a pure function, so
the rules can be tested with any values. The rules follow the kernel's documentation of
``perf_event_paranoid`` (-1 anything; >= 0 no raw tracepoints for users; >= 1 no system-wide
(CPU) events; >= 2 no kernel profiling; Debian's 3: no perf at all), ``kptr_restrict`` (1 hides
kernel addresses from users without CAP_SYSLOG, 2 from everyone) and ``nmi_watchdog`` (it keeps
one hardware counter per CPU busy). CAP_PERFMON or CAP_SYS_ADMIN (root) lifts the paranoid rules,
but only in the initial user namespace, where the kernel checks them (`perfmon_capable()`): the
root of a rootless container (`unshare -r`, podman) is an ordinary user to perf, which then
quietly counts user space only (`task-clock:u`) and refuses `-a`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoprof.catalog import machine, perfnames
from autoprof.catalog.model import Catalog
from autoprof.errors import AutoprofError
from autoprof.perf import command as perf_command

FATAL = "fatal"
WARNING = "warning"

_CAP_SYS_ADMIN = 21
_CAP_SYSLOG = 34
_CAP_PERFMON = 38


@dataclass(frozen=True)
class Finding:
    key: str  # stable id: "perf-missing", "paranoid", "kptr-restrict", "nmi-watchdog"
    severity: str  # FATAL or WARNING
    message: str  # one line
    fix: str | None = None  # the exact command that fixes it

    def __str__(self) -> str:
        fix = f" (fix: {self.fix})" if self.fix else ""
        return f"{self.severity}: {self.message}{fix}"


@dataclass(frozen=True)
class System:
    """The values the rules need, as read from /proc (None when unreadable)."""

    perf: str | None  # path of the perf executable
    paranoid: int | None  # /proc/sys/kernel/perf_event_paranoid
    kptr_restrict: int | None  # /proc/sys/kernel/kptr_restrict
    nmi_watchdog: int | None  # /proc/sys/kernel/nmi_watchdog
    capabilities: int  # effective capability bits of this process (CapEff)
    user_namespace: bool = False  # in a user namespace other than the initial one
    online_cpus: frozenset[int] | None = None  # /sys/devices/system/cpu/online

    def has_cap(self, bit: int) -> bool:
        return bool(self.capabilities >> bit & 1)


def read_system(proc: Path = machine.PROC, sys: Path = Path("/sys")) -> System:
    """The machine's settings (`catalog.machine` reads them: the only I/O of this module)."""
    return System(
        perf=perf_command.installed(),
        paranoid=machine.perf_event_paranoid(proc),
        kptr_restrict=machine.kptr_restrict(proc),
        nmi_watchdog=machine.nmi_watchdog(proc),
        capabilities=machine.capabilities(proc),
        user_namespace=machine.in_user_namespace(proc),
        online_cpus=machine.online_cpus(sys / "devices" / "system"),
    )


def evaluate(
    system: System,
    *,
    system_wide: bool,
    kernel: bool,
    counters: bool = True,
    cpu_list: str | None = None,
) -> list[Finding]:
    """The findings for a run that is system-wide (or per-process; on the CPUs of `cpu_list`),
    wants kernel samples or symbols (`kernel`), and programs hardware counters (`counters`)."""
    findings: list[Finding] = []
    if system.perf is None:
        fix = "sudo apt-get install linux-perf"
        findings.append(Finding("perf-missing", FATAL, "perf is not installed", fix))
    if cpu_list is not None:
        findings += _cpu_list_findings(system, cpu_list)
    userns = system.user_namespace
    privileged = not userns and (system.has_cap(_CAP_PERFMON) or system.has_cap(_CAP_SYS_ADMIN))
    level = system.paranoid
    need = 0 if system_wide else 1 if kernel else 2  # the highest level that allows the run
    host = " on the host" if userns else ""
    if userns and level is not None and level > 1 and not system_wide:
        findings.append(
            Finding(
                "user-namespace",
                WARNING,
                f"user namespace (rootless container): capabilities do not count for perf, "
                f"kernel.perf_event_paranoid={level} applies: user space only (task-clock:u)",
                f"sudo sysctl -w kernel.perf_event_paranoid=1{host}",
            )
        )
    if level is not None and not privileged and level > need:
        fix = f"sudo sysctl -w kernel.perf_event_paranoid={need}{host}"
        if level >= 3:
            severity, what = FATAL, "perf is disabled for users"
        elif system_wide and userns:
            severity, what = (
                FATAL,
                (
                    "system-wide counting is refused in a user namespace (rootless container): "
                    "perf ignores its capabilities"
                ),
            )
        elif system_wide:
            severity, what = FATAL, "system-wide sampling needs root or CAP_PERFMON"
        else:
            severity, what = WARNING, "kernel frames will be missing (user space only)"
        message = f"kernel.perf_event_paranoid={level}: {what}"
        findings.append(Finding("paranoid", severity, message, fix))
    restrict = system.kptr_restrict
    if (
        kernel
        and restrict is not None
        and (restrict >= 2 or (restrict == 1 and not system.has_cap(_CAP_SYSLOG)))
    ):
        findings.append(
            Finding(
                "kptr-restrict",
                WARNING,
                f"kernel.kptr_restrict={restrict} hides kernel addresses: "
                "kernel frames will show as [unknown]",
                "sudo sysctl -w kernel.kptr_restrict=0",
            )
        )
    if counters and system.nmi_watchdog:
        findings.append(
            Finding(
                "nmi-watchdog",
                WARNING,
                "the NMI watchdog is on and holds one hardware counter per CPU",
                "sudo sysctl -w kernel.nmi_watchdog=0",
            )
        )
    return findings


def _cpu_list_findings(system: System, cpu_list: str) -> list[Finding]:
    wanted = machine.cpu_list(cpu_list)
    online = system.online_cpus
    if online is None or wanted <= online:
        return []
    missing = _format_cpus(wanted - online)
    message = f"--cpu-list {cpu_list}: CPU {missing} not online; this machine has CPUs "
    return [Finding("cpu-list", FATAL, message + _format_cpus(online))]


def _format_cpus(cpus: frozenset[int]) -> str:
    """{0, 1, 2, 3, 5} -> "0-3,5"."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in ranges)


def check(
    *, system_wide: bool, kernel: bool, counters: bool = True, cpu_list: str | None = None
) -> list[Finding]:
    """`evaluate` on this machine."""
    return evaluate(
        read_system(), system_wide=system_wide, kernel=kernel, counters=counters, cpu_list=cpu_list
    )


def fail_on_fatal(findings: list[Finding]) -> None:
    """Raise AutoprofError for the first fatal finding (message and fix on one line)."""
    for finding in findings:
        if finding.severity == FATAL:
            fix = f"; fix: {finding.fix}" if finding.fix else ""
            raise AutoprofError(f"{finding.message}{fix}")


def check_reserve(catalog: Catalog, reserve: int) -> None:
    """Refuse a `--reserve` a core PMU cannot honour as its catalog took it: the watchdog holds
    generic counters (x86), or the cycle counter first and then generic ones (Arm), and one
    generic counter stays autoprof's, so a 4-counter x86 PMU reserves at most 3 and a 6-counter
    Arm PMU with its cycle counter 6 (the catalog would otherwise reserve fewer silently); a
    machine without a core PMU (a VM without a virtual PMU) has no counter to reserve."""
    if not reserve:
        return
    core = [catalog.pmus[name] for name in perfnames.core_pmus(catalog)]
    if not core:
        raise AutoprofError(
            f"--reserve {reserve}: this machine has no core PMU, so no generic counters to reserve"
        )
    for pmu in core:
        if pmu.reserved + pmu.reserved_fixed < reserve:
            cycle = " and a cycle counter" if pmu.reserved_fixed else ""
            raise AutoprofError(
                f"--reserve {reserve}: the {pmu.name} PMU has {pmu.counters} generic "
                f"counters{cycle}, at most {pmu.counters - 1 + pmu.reserved_fixed} can be reserved"
            )
