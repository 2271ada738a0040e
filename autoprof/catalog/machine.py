"""The live machine, read in one place: its CPU id and model, SMT, the kernel's perf settings
(perf_event_paranoid, kptr_restrict, the NMI watchdog), this process's capabilities, its CPU
lists and topology, whether it has a core PMU, and its name and slots.

`host` (the catalog of this machine), `preflight` (can perf do it here) and `read_facts` (what a
profile records) all read them here, and every CPU list (sysfs's, --cpu-list) is parsed by the
one strict `cpu_list`. Each reader takes its root folder, so tests read a tree of their own.
"""

from __future__ import annotations

import platform
import re
import socket
from pathlib import Path

from autoprof.catalog.facts import MachineFacts
from autoprof.catalog.model import Catalog
from autoprof.errors import AutoprofError
from autoprof.perf import query as perf_query

PROC = Path("/proc")
SYSFS_PMUS = Path("/sys/bus/event_source/devices")
SYSFS_SYSTEM = Path("/sys/devices/system")
# The core PMUs of x86 (arch/x86/events/core.c registers "cpu"; hybrid parts one per core type).
X86_CORE_PMUS = ("cpu", "cpu_core", "cpu_atom", "cpu_lowpower")


def read_text(path: Path | str, default: str = "") -> str:
    """A small file of /proc or /sys, stripped; `default` where it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def midr(system: Path = SYSFS_SYSTEM, cpu: int = 0) -> str:
    """An Arm64 CPU's MIDR_EL1 as perf reads it (``0x00000000413fd0c1``); "" elsewhere."""
    return read_text(system / "cpu" / f"cpu{cpu}" / "regs" / "identification" / "midr_el1")


def arm_core_pmu(sysfs: Path = SYSFS_PMUS) -> str:
    """The name of this Arm machine's core PMU (the first with a ``cpus`` file: the kernel
    names it after the core, or ``armv8_pmuv3_N`` on ACPI servers); "" when there is none."""
    if not sysfs.is_dir():
        return ""
    return next((p.name for p in sorted(sysfs.iterdir()) if (p / "cpus").is_file()), "")


def arm_slots(sysfs: Path = SYSFS_PMUS) -> int | None:
    """Slots per cycle of this Arm machine's core PMU, as perf reads its ``#slots``
    (tools/perf/arch/arm64/util/pmu.c: the core PMU's ``caps/slots``, which the kernel fills
    from PMMIR_EL1.SLOTS, drivers/perf/arm_pmuv3.c `slots_show`); None without one, or 0."""
    pmu = arm_core_pmu(sysfs)
    text = read_text(sysfs / pmu / "caps" / "slots") if pmu else ""
    try:
        return int(text, 0) or None
    except ValueError:
        return None


def cpu_id(cpuinfo: str | None = None) -> str:
    """perf's CPU id string, e.g. ``GenuineIntel-6-55-4`` (family decimal, model and stepping
    hex), from /proc/cpuinfo; on Arm64 the MIDR of CPU 0."""
    text = cpuinfo if cpuinfo is not None else read_text("/proc/cpuinfo")
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
        if not line.strip() and fields:
            break
    try:
        return (
            f"{fields['vendor_id']}-{int(fields['cpu family'])}-"
            f"{int(fields['model']):X}-{int(fields['stepping']):X}"
        )
    except (KeyError, ValueError):
        return (midr() if cpuinfo is None else "") or platform.machine() or "unknown"


def model_name(cpuinfo: str | None = None) -> str:
    text = cpuinfo if cpuinfo is not None else read_text("/proc/cpuinfo")
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else platform.processor()


def tsc_hz(name: str | None = None, system: Path = SYSFS_SYSTEM) -> float | None:
    """The TSC's frequency: the "@ 2.10GHz" of Intel's CPU name (perf's own fallback when
    CPUID leaf 0x15 is not readable, tools/perf/arch/x86/util/tsc.c), else intel_pstate's
    base frequency (the TSC runs at the base frequency); None when neither tells."""
    found = re.search(r"@\s*([0-9]+(?:\.[0-9]+)?)\s*GHz", model_name() if name is None else name)
    if found:
        return float(found.group(1)) * 1e9
    base = read_text(system / "cpu" / "cpu0" / "cpufreq" / "base_frequency")
    return float(base) * 1e3 if base.isdigit() else None  # kHz


def chas_per_socket(pmus: Path = SYSFS_PMUS) -> int | None:
    """Uncore CHA boxes per socket: one `uncore_cha_N` PMU per box, each counting on every
    socket (its cpumask lists one CPU per socket); None without CHAs (clients, AMD)."""
    boxes = len(list(pmus.glob("uncore_cha_[0-9]*")))
    return boxes or None


def has_core_pmu(sysfs: Path = SYSFS_PMUS) -> bool:
    """Whether the kernel counts hardware events here: x86's core PMU, or a PMU serving a set
    of CPUs (a ``cpus`` file: Arm's core PMUs, x86 hybrid core types). A VM without a virtual
    PMU has none (dmesg: "PMU not available due to virtualization, using software events
    only"); perf then answers <not supported> for every hardware event."""
    if not sysfs.is_dir():
        return False
    return any((sysfs / name).is_dir() for name in X86_CORE_PMUS) or any(
        (pmu / "cpus").is_file() for pmu in sysfs.iterdir()
    )


def read_int(path: Path) -> int | None:
    """The first number of a /proc or /sys file; None where it cannot be read."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def smt_active(system: Path = SYSFS_SYSTEM) -> bool:
    return read_int(system / "cpu" / "smt" / "active") == 1


def nmi_watchdog(proc: Path = PROC) -> int | None:
    """1 when the NMI watchdog holds a hardware counter on every CPU."""
    return read_int(proc / "sys" / "kernel" / "nmi_watchdog")


def perf_event_paranoid(proc: Path = PROC) -> int | None:
    return read_int(proc / "sys" / "kernel" / "perf_event_paranoid")


def max_sample_rate(proc: Path = PROC) -> int | None:
    """The most samples a second the kernel lets an event take (perf throttles above it)."""
    return read_int(proc / "sys" / "kernel" / "perf_event_max_sample_rate")


def kptr_restrict(proc: Path = PROC) -> int | None:
    return read_int(proc / "sys" / "kernel" / "kptr_restrict")


def capabilities(proc: Path = PROC) -> int:
    """The effective capability bits of this process (CapEff); 0 where unreadable."""
    try:
        for line in (proc / "self" / "status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


# /proc/self/uid_map of the initial user namespace: every uid mapped to itself
_INITIAL_UID_MAP = ["0", "0", "4294967295"]


def in_user_namespace(proc: Path = PROC) -> bool:
    """This process runs in a user namespace other than the initial one (a rootless
    container), where the kernel does not honour its capabilities for perf."""
    try:
        return (proc / "self" / "uid_map").read_text().split() != _INITIAL_UID_MAP
    except OSError:
        return False  # no user namespaces in this kernel


def cpu_list(text: str) -> frozenset[int]:
    """CPU numbers of a list such as perf's -C and sysfs write it: "0-3,5"; anything else is
    an AutoprofError (one line), never a guess."""
    cpus: set[int] = set()
    for item in text.strip().split(","):
        first, sep, last = item.strip().partition("-")
        if not first.isdigit() or (sep and not last.isdigit()):
            raise AutoprofError(f"CPU list {text!r}: expected numbers and ranges such as 0-3,5")
        low, high = int(first), int(last) if sep else int(first)
        if high < low:
            raise AutoprofError(f"CPU list {text!r}: range {item} runs backwards")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def read_cpus(path: Path) -> frozenset[int] | None:
    """A sysfs CPU list (an empty one: no CPU, as a memory-only NUMA node's); None where it
    cannot be read or is not one."""
    text = read_text(path)
    if not text:
        return frozenset() if path.exists() else None
    try:
        return cpu_list(text)
    except AutoprofError:
        return None


def online_cpus(system: Path = SYSFS_SYSTEM) -> frozenset[int] | None:
    return read_cpus(system / "cpu" / "online")


def topology(root: Path = SYSFS_SYSTEM) -> list[dict[str, int]]:
    """Socket, core and NUMA node of each online CPU, from sysfs (what `lscpu -p` shows; "core"
    is the kernel's core_id, unique within its socket); -1 where sysfs says nothing."""

    def number(path: Path) -> int:
        text = read_text(path)
        return int(text) if text.lstrip("-").isdigit() else -1

    node_of = {}
    for node in sorted((root / "node").glob("node[0-9]*")):
        for cpu in read_cpus(node / "cpulist") or ():
            node_of[cpu] = int(node.name.removeprefix("node"))
    online = sorted(read_cpus(root / "cpu" / "online") or ())
    return [
        {
            "cpu": cpu,
            "socket": number(root / "cpu" / f"cpu{cpu}" / "topology" / "physical_package_id"),
            "core": number(root / "cpu" / f"cpu{cpu}" / "topology" / "core_id"),
            "node": node_of.get(cpu, -1),
        }
        for cpu in online
    ]


def read_facts(catalog: Catalog | None = None) -> MachineFacts:
    """What a profile records about the machine it ran on."""
    counters = {}
    if catalog is not None:
        counters = {
            p.name: {
                "generic": p.counters,
                "fixed": p.fixed,
                "reserved": p.reserved,
                "reserved_fixed": p.reserved_fixed,
            }
            for p in catalog.pmus.values()
            if not p.unconstrained
        }
    return MachineFacts(
        cpu_id=cpu_id(),
        model_name=model_name(),
        hostname=socket.gethostname(),
        kernel=platform.release(),
        perf_version=perf_query.version(),
        smt=smt_active(),
        nmi_watchdog=nmi_watchdog() == 1,
        perf_event_paranoid=perf_event_paranoid(),
        counters=counters,
        topology=topology(),
        tsc_hz=tsc_hz(),
        chas_per_socket=chas_per_socket(),
        slots=arm_slots(),
    )
