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
one hardware counter per CPU busy). CAP_PERFMON or CAP_SYS_ADMIN (root) lifts the paranoid rules.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from autoprof.errors import AutoprofError

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

    def has_cap(self, bit: int) -> bool:
        return bool(self.capabilities >> bit & 1)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_capabilities(status: Path) -> int:
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def read_system(proc: Path = Path("/proc")) -> System:
    """Read the machine's settings (the only I/O of this module)."""
    kernel = proc / "sys" / "kernel"
    return System(
        perf=shutil.which("perf"),
        paranoid=_read_int(kernel / "perf_event_paranoid"),
        kptr_restrict=_read_int(kernel / "kptr_restrict"),
        nmi_watchdog=_read_int(kernel / "nmi_watchdog"),
        capabilities=_read_capabilities(proc / "self" / "status"),
    )


def evaluate(
    system: System, *, system_wide: bool, kernel: bool, counters: bool = True
) -> list[Finding]:
    """The findings for a run that is system-wide (or per-process), wants kernel samples or
    symbols (`kernel`), and programs hardware counters (`counters`)."""
    findings: list[Finding] = []
    if system.perf is None:
        fix = "sudo apt-get install linux-perf"
        findings.append(Finding("perf-missing", FATAL, "perf is not installed", fix))
    privileged = system.has_cap(_CAP_PERFMON) or system.has_cap(_CAP_SYS_ADMIN)
    level = system.paranoid
    need = 0 if system_wide else 1 if kernel else 2  # the highest level that allows the run
    if level is not None and not privileged and level > need:
        fix = f"sudo sysctl -w kernel.perf_event_paranoid={need}"
        if level >= 3:
            severity, what = FATAL, "perf is disabled for users"
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


def check(*, system_wide: bool, kernel: bool, counters: bool = True) -> list[Finding]:
    """`evaluate` on this machine."""
    return evaluate(read_system(), system_wide=system_wide, kernel=kernel, counters=counters)


def fail_on_fatal(findings: list[Finding]) -> None:
    """Raise AutoprofError for the first fatal finding (message and fix on one line)."""
    for finding in findings:
        if finding.severity == FATAL:
            fix = f"; fix: {finding.fix}" if finding.fix else ""
            raise AutoprofError(f"{finding.message}{fix}")
