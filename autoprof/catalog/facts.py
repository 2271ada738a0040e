"""`MachineFacts`: what a profile records about the machine it ran on (`machine.read_facts`).

Its own small module beside `host.py`, so that reading a profile folder's manifest does not
import the host catalog's readers (Intel JSON, YAML).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MachineFacts:
    """The machine a profile ran on; one row per distinct machine in the results store."""

    cpu_id: str  # perf's CPU id string, e.g. GenuineIntel-6-55-4 or AuthenticAMD-25-11-1
    model_name: str  # /proc/cpuinfo "model name"
    hostname: str
    kernel: str  # uname -r
    perf_version: str  # "perf version 6.1.187" -> "6.1.187"
    smt: bool
    nmi_watchdog: bool
    perf_event_paranoid: int | None
    # per catalog PMU: {"generic": n, "fixed": m, "reserved": r, "reserved_fixed": f}; what the
    # schedule assumed: n generic counters (r of them held by others, the NMI watchdog), m fixed
    # ones free and f more held (Arm's cycle counter, the watchdog's first); "reserved" is in
    # manifests since --reserve, "reserved_fixed" since Arm's --reserve
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    # one entry per online CPU, from sysfs at profile time (as autoperf records lscpu):
    # {"cpu": 5, "socket": 0, "core": 3, "node": 0}; "core" is the kernel's core_id (perf's
    # S0-D0-C3 numbering, unique within a socket). Empty in manifests written before it existed.
    topology: list[dict[str, int]] = field(default_factory=list)
    # the TSC's frequency in Hz (metrics' SYSTEM_TSC_FREQ) and the uncore CHA boxes per socket
    # (CHAS_PER_SOCKET), when the machine tells them (see machine.tsc_hz, machine.chas_per_socket)
    tsc_hz: float | None = None
    chas_per_socket: int | None = None
    # Arm: the core PMU's slots per cycle (perf's #slots, from sysfs caps/slots), see
    # machine.arm_slots
    slots: int | None = None
